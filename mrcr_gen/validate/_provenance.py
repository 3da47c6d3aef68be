"""What a generated file says about itself: the tokenizer its dataset card names, and the bin its
sidecar (`*.samples.jsonl`) records for each row, which the recount must agree with."""

from __future__ import annotations

import json
from pathlib import Path

from .._card import card_tokenizer, sidecar_path
from .._tokens import DEFAULT_TOKENIZER
from ._findings import OUT_OF_RANGE, Finding, RowResult


def dataset_tokenizer(path: str | Path) -> str | None:
    """The tokenizer named by the dataset card beside the file or one folder up: README.md, else a
    shard's card (README.shard-K-of-N.md, when `--shard` wrote the folder); else the one the file's
    sidecar records for its rows."""
    for folder in list(Path(path).parents)[:2]:
        for card in [folder / "README.md", *sorted(folder.glob("README.shard-*-of-*.md"))]:
            if card.is_file():
                try:
                    named = card_tokenizer(card.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    named = None
                if named is not None:
                    return named
    return _sidecar_tokenizer(Path(path))


def _sidecar_tokenizer(path: Path) -> str | None:
    try:
        with sidecar_path(path).open(encoding="utf-8") as lines:
            record = json.loads(next(lines, "null"))
    except (OSError, ValueError):
        return None
    spec = record.get("tokenizer") if isinstance(record, dict) else None
    return spec if isinstance(spec, str) else None


class SidecarBins:
    """The generated bin and token count of each row of a file, from its sidecar (`X.samples.jsonl`
    beside `X.parquet` or `X.csv`, one record per row with "bin", "n_tokens" and "tokenizer"), when it
    has one line per row (`num_rows` None: the file's rows are not known before they are read)."""

    def __init__(self, path: str | Path, num_rows: int | None, counted: str = "the row recounts") -> None:
        self.records: list[dict] = []
        self.counted = counted  # what was recounted, with its verb: "prompt + answer recount"
        sidecar = sidecar_path(Path(path))
        try:
            if sidecar.is_file():
                records = [json.loads(line) for line in sidecar.read_text(encoding="utf-8").splitlines() if line]
                if num_rows in (None, len(records)) and all(isinstance(r, dict) and "bin" in r for r in records):
                    self.records = records
        except (OSError, ValueError):
            pass

    def check(self, result: RowResult, file: str, tokenizer: str) -> RowResult:
        """`result` plus a `token_bin` error when the recount leaves the bin the row was generated for."""
        if not self.records or result.n_tokens is None or not 0 <= result.row < len(self.records):
            return result
        record = self.records[result.row]
        generated_bin = record["bin"]
        if not str(generated_bin).startswith(("(", "[")) or result.bin in (generated_bin, OUT_OF_RANGE):
            return result  # `tokens=N` rows have no bin to leave; out of range is reported already
        counted_by = record.get("tokenizer", DEFAULT_TOKENIZER)
        finding = Finding(
            file=file,
            row=result.row,
            check="token_bin",
            severity="error",
            message=(
                f"generated for bin {generated_bin} ({record.get('n_tokens')} {counted_by} tokens, says the sidecar), "
                f"but {self.counted} to {result.n_tokens} {tokenizer} tokens (bin {result.bin})"
            ),
        )
        return result.model_copy(update={"findings": (*result.findings, finding)})
