"""The dataset card's frame, the same for every recipe: the Hub's YAML header (the recipe's lines,
one config per data glob, which tokenizer counted, the generation and its files, read back by
mrcr-validate and by the next run into the folder), then the recipe's own text."""

from __future__ import annotations

import json
from pathlib import Path

from .._card import generation_lines, sidecar_path
from .._tokens import load_tokenizer
from .._version import __version__
from ._job import GenerationJob

IN_PROGRESS = "\n\nBeing generated, or interrupted: rerun the same command to complete it.\n"


def planned_names(job: GenerationJob) -> list[str]:
    """Every file this shard writes (data files, then their sidecars), relative to the folder."""
    names = [f.relative_path for f in job.files]
    return [*names, *(sidecar_path(Path(name)).as_posix() for name in names)]


def card_header(job: GenerationJob) -> str:
    counted_by = load_tokenizer(job.tokenizer).describe()
    lines = ["---", *job.frame.hub, "configs:"]
    for name, glob in job.frame.configs:
        lines += [f"- config_name: {name}", "  data_files:", "  - split: train", f"    path: {glob}"]
    lines += ["mrcr_gen:", f"  version: {json.dumps(__version__)}"]
    lines += [f"  {key}: {value}" for key, value in job.frame.recorded]
    lines += [
        f"  tokenizer{'' if key == 'spec' else '_' + key}: {json.dumps(value)}" for key, value in counted_by.items()
    ]
    lines += generation_lines(job.generation, planned_names(job))
    return "\n".join(lines) + "\n---\n\n"


def in_progress_card(job: GenerationJob) -> str:
    """The card while the files are being written: an interrupted run is known too."""
    return card_header(job) + job.frame.title + IN_PROGRESS
