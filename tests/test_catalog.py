import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mrcr_gen import load_catalog, normalize_ask
from tests.support import SHARED_REAL

ROOT = Path(__file__).resolve().parents[1]
SEEN = SHARED_REAL / "entities-seen.txt"
REAL_FORMATS = [
    "poem", "song", "short essay", "short news article", "email", "social media post",
    "diary entry", "formal letter", "short scene in a play", "riddle",
]


def test_a_catalogs_asks_are_made_once_per_process_and_each_caller_gets_its_own_list():
    """A generation worker receives a copy of the catalog with every work unit: an equal copy's
    asks are the ones already made (the same objects), every format with every entity, in order."""
    import pickle

    catalog = load_catalog()
    first, copy = catalog.asks(), pickle.loads(pickle.dumps(catalog)).asks()
    assert [(a.format, a.entity) for a in first] == [(f.name, e) for f in catalog.formats for e in catalog.entities]
    assert copy == first and all(a is b for a, b in zip(copy, first, strict=True))
    copy.pop()
    assert len(catalog.asks()) == len(first) == 4380


def test_catalog_has_438_entities_and_the_10_real_formats():
    catalog = load_catalog()
    assert len(catalog.entities) == len(set(catalog.entities)) == 438
    assert all(e == e.strip().lower() and " about " not in f" {e} " for e in catalog.entities)
    assert [f.name for f in catalog.formats] == REAL_FORMATS
    for spec in catalog.formats:
        assert spec.ask == f"write a {spec.name} about {{entity}}"
        assert spec.tokens.p10 < spec.tokens.median < spec.tokens.p90
        assert spec.guidance


def test_asks_stay_distinct_after_normalisation():
    asks = load_catalog().asks()
    assert len({normalize_ask(a.text) for a in asks}) == len(asks) == 4380


def test_every_entity_seen_in_real_rows_is_in_the_catalog():
    if not SEEN.exists():
        pytest.skip("../shared/mrcr-real is not on this machine")
    seen = {line.strip() for line in SEEN.read_text().splitlines() if line.strip()}
    assert seen <= set(load_catalog().entities)


@pytest.mark.slow
def test_catalog_ships_inside_the_built_wheel(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True,
    )
    wheel = next(tmp_path.glob("mrcr_gen-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "site")
    assert {
        "mrcr_gen/_data/entities/entities.txt",
        "mrcr_gen/_data/formats/formats.json",
        "mrcr_gen/_data/formats/offline_templates.json",
    } <= names
    probe = (
        "import json, mrcr_gen; from mrcr_gen.recipes.openai_mrcr._offline_formats import compose_writing; "
        "c = mrcr_gen.load_catalog(); assert compose_writing('poem', 'tea', 0, 0); "
        "print(json.dumps([mrcr_gen.__file__, len(c.entities), len(c.formats)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True,
        cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
    ).stdout
    where, n_entities, n_formats = json.loads(out)
    assert where.startswith(str(tmp_path / "site")) and (n_entities, n_formats) == (438, 10)
