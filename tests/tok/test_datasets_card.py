"""A generated folder loads with `datasets` (offline), a config per needle count, as on the Hub."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from mrcr_gen import iter_rows


def test_load_dataset_per_needle_count_offline(tiny_data, tmp_path):
    probe = (
        "import json, sys, datasets\n"
        "out = {}\n"
        "for name in ('2needle', '4needle'):\n"
        "    d = datasets.load_dataset(sys.argv[1], name, split='train')\n"
        "    out[name] = {'rows': d.num_rows, 'columns': d.column_names, 'needles': sorted(set(list(d['n_needles']))), 'answers': list(d['answer'])}\n"
        "print(json.dumps(out))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env |= {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home")}
    done = subprocess.run([sys.executable, "-c", probe, str(tiny_data)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr


    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    columns = ["prompt", "answer", "random_string_to_prepend", "n_needles", "desired_msg_index", "total_messages", "n_chars", "date_added"]
    for n in (2, 4):
        part = loaded[f"{n}needle"]
        assert part["rows"] == 3 and part["columns"] == columns and part["needles"] == [n]
        assert part["answers"] == [r.answer for r in iter_rows(tiny_data / f"{n}needle" / f"{n}needle_0.parquet")]


def test_card_header_is_the_hubs_yaml(tiny_data):
    card = (tiny_data / "README.md").read_text()
    header = card.split("---\n")[1]
    assert card.startswith("---\nlicense: mit\n")
    for line in ("- config_name: 2needle", "- config_name: 4needle", "    path: 4needle/*.parquet", "  - split: train", "- text-generation", "- long-context"):
        assert line in header.splitlines()
