"""What a generated dataset leaves beside its files for validators to read back: the dataset card's
tokenizer line and the per-file sidecar of row samples."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ._files import ForeignFile


def sidecar_path(data_path: Path) -> Path:
    """`X.samples.jsonl` beside a data file `X.parquet` or `X.csv`."""
    return data_path.with_name(data_path.name.removesuffix(".parquet").removesuffix(".csv") + ".samples.jsonl")


CARD_TOKENIZER = re.compile(r'^  tokenizer: (".*")$', re.MULTILINE)


def card_tokenizer(card_text: str) -> str | None:
    """The tokenizer spec a dataset card's YAML header names, or None (e.g. openai/mrcr's own card)."""
    if not card_text.startswith("---\n"):
        return None
    header = card_text[4 : card_text.find("\n---", 4)]
    match = CARD_TOKENIZER.search(header)
    return json.loads(match.group(1)) if match else None


# --- one generation per folder ------------------------------------------------------------------

CARD_GENERATION = re.compile(r"^  generation: (\{.*\})$", re.MULTILINE)
CARD_FILES = re.compile(r"^  files: (\[.*\])$", re.MULTILINE)
#: Data files an older card (one without a `files:` line) names, in its file list or table.
OLDER_CARD_FILE = re.compile(r"`(\d+needle/[^`\s]+\.(?:parquet|csv))`")


class FolderTaken(ValueError):
    """The output folder holds another generation's files (one line for the user)."""


def shard_card_name(shard: tuple[int, int]) -> str:
    """The dataset card of shard K/N: README.md for 1/1, else README.shard-K-of-N.md."""
    index, count = shard
    return "README.md" if count == 1 else f"README.shard-{index}-of-{count}.md"


def card_names(out: Path) -> list[Path]:
    """The dataset cards in `out`: README.md and the cards of shards (README.shard-K-of-N.md)."""
    return [p for p in [out / "README.md", *sorted(out.glob("README.shard-*-of-*.md"))] if p.is_file()]


def generation_lines(generation: dict, files: list[str]) -> list[str]:
    """The card header's record of what made the folder (option name -> value, as typed options
    resolve) and of every file the generation writes there, read back by `claim_folder`."""
    return [f"  generation: {json.dumps(generation, sort_keys=True)}", f"  files: {json.dumps(files)}"]


def _recorded(card_text: str) -> tuple[dict | None, list[str]] | None:
    """(generation, files) a card of mrcr-gen records; generation None for an older card; None for
    a card mrcr-gen did not write."""
    if not card_text.startswith("---\n"):
        return None
    header = card_text[4 : card_text.find("\n---", 4)]
    if "\nmrcr_gen:" not in "\n" + header:
        return None
    generation, files = CARD_GENERATION.search(header), CARD_FILES.search(header)
    if generation is None or files is None:
        found = list(dict.fromkeys(OLDER_CARD_FILE.findall(card_text)))
        companions = [name + suffix for name in found for suffix in (".build.json",)]
        companions += [sidecar_path(Path(name)).as_posix() for name in found if name.endswith(".parquet")]
        return None, found + companions
    return json.loads(generation.group(1)), json.loads(files.group(1))


def _differences(before: dict | None, now: dict) -> str:
    if before is None:
        return "written by an mrcr-gen that did not record its options"
    shown = []
    for key in sorted(set(before) | set(now)):
        if before.get(key) != now.get(key):
            there, here = (json.dumps(side.get(key), sort_keys=True) for side in (before, now))
            shown.append(f"--{key} {there} there, {here} here")
    return "; ".join(shown)


def claim_folder(
    out: Path,
    generation: dict,
    overwrite: bool,
    targets: Sequence[str] = (),
    builds: Mapping[str, str] | None = None,
) -> None:
    """Make `out` this generation's, before anything is written there. `targets` are the files the
    generation writes (relative to `out`: its card, data files and sidecars), `builds` the build
    fingerprint of each data file.

    Cards of this generation (an earlier run, other shards) are kept: a rerun resumes. A card of
    another generation is refused (FolderTaken, naming what differs) unless `overwrite`, which
    removes the files that card lists, then the card. A target that exists and that no card of ours
    lists is refused (ForeignFile) when mrcr-gen did not write it, whatever `overwrite` says; when
    it did (its sidecar records a build) but for other options, and its card is gone, it is refused
    unless `overwrite` (FolderTaken). Nothing is removed before every check has passed."""
    root = out.resolve()
    for card, files in check_folder(out, generation, overwrite, targets, builds):
        for name in files:
            path = (out / name).resolve()
            if path.is_relative_to(root) and path != root:  # a card names files inside its folder only
                path.unlink(missing_ok=True)
        card.unlink(missing_ok=True)


def check_folder(
    out: Path,
    generation: dict,
    overwrite: bool,
    targets: Sequence[str] = (),
    builds: Mapping[str, str] | None = None,
) -> list[tuple[Path, list[str]]]:
    """`claim_folder`'s checks, with nothing removed (a command runs them before its work starts):
    the cards of other generations `overwrite` replaces, with the files each lists."""
    listed: set[str] = set()
    replaced: list[tuple[Path, list[str]]] = []
    for card in card_names(out):
        try:
            recorded = _recorded(card.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            recorded = (None, [])
        if recorded is None:
            if card.name in targets:
                raise ForeignFile(card, "move it away or choose another --out (--overwrite replaces only our files)")
            continue
        before, files = recorded
        listed |= {card.name, *files}
        if before == generation:
            continue
        if not overwrite:
            raise FolderTaken(
                f"{out} holds another generation ({card.name}: {_differences(before, generation)}); "
                "add --overwrite to replace it (the files its card lists are removed), or choose another --out"
            )
        replaced.append((card, files))
    for name in targets:
        _check_unlisted(out, name, listed, overwrite, builds or {})
    return replaced


def _check_unlisted(out: Path, name: str, listed: set[str], overwrite: bool, builds: Mapping[str, str]) -> None:
    """Refuse to write `name` over a file that no card of ours lists, unless it is ours and either
    identical to what this generation writes (resumed) or `overwrite` (see `claim_folder`)."""
    path = out / name
    if name in listed or not (path.exists() or path.is_symlink()):
        return
    data = name.removesuffix(".samples.jsonl") if name.endswith(".samples.jsonl") else name
    sidecar = sidecar_path(out / data)
    build = _sidecar_build(sidecar)
    if build is None or (path != sidecar and not path.is_file()):
        raise ForeignFile(path, "move it away or choose another --out (--overwrite replaces only our files)")
    if overwrite or any(build == b for n, b in builds.items() if sidecar_path(out / n) == sidecar):
        return
    raise FolderTaken(
        f"{out} holds {name}, written by mrcr-gen with other options, and no card that lists it "
        "(README.md was removed?); add --overwrite to replace it, or choose another --out"
    )


def _sidecar_build(sidecar: Path) -> str | None:
    """The build a sidecar of ours records on its first line; None for a file that is not one."""
    try:
        with sidecar.open(encoding="utf-8") as handle:
            record = json.loads(handle.readline())
    except (OSError, ValueError):
        return None
    build = record.get("build") if isinstance(record, dict) else None
    return build if isinstance(build, str) else None
