"""The generation core with a recipe it has never seen: a toy recipe that supplies only its options,
its file plan and a builder gets engines, shards, sidecars, resume, the card and refusals."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrcr_gen._errors import RequestError
from mrcr_gen._parquet import RowGroupFileJoin, RowGroupWriter
from mrcr_gen.engines import LocalEngine
from mrcr_gen.generate import (
    CardFrame,
    GenerateRequest,
    GenerationDefaults,
    GenerationJob,
    GenOption,
    PlannedFile,
    RowBatch,
    generate_for,
    option_values,
    parse_shard,
    plan_chunks,
    run_job,
    shard_card_name,
)

SCHEMA = pa.schema([("index", pa.int64()), ("text", pa.string())])


@dataclass(frozen=True)
class Spec:
    index: int
    max_tokens: int = 1 << 20  # large enough that two workers cut a file into chunks


@dataclass(frozen=True)
class ToyBuilder:
    word: str
    tokenizer: str = "o200k_base"

    def build_key(self, file: PlannedFile) -> list:
        return [self.word, [spec.index for spec in file.rows]]

    def batches(self, file: PlannedFile, rows: tuple, store: Path | None) -> Iterator[RowBatch]:
        for spec in rows:
            text = f"{self.word} {spec.index}"
            yield RowBatch(pa.table({"index": [spec.index], "text": [text]}, schema=SCHEMA), [{"chars": len(text)}])

    def open_file(self, path: Path, groups: Sequence[int], durable: bool = True) -> RowGroupWriter:
        return RowGroupWriter(path, SCHEMA, groups=groups, durable=durable)

    def join_file(self, path: Path) -> RowGroupFileJoin:
        return RowGroupFileJoin(path)

    def sharing_writer(self) -> None:
        return None

    def release(self) -> None:
        pass


class ToyRecipe(GenerationDefaults):
    name = "toy"
    generation_options = (GenOption("word", ("--word",), str, "hello", "The word every row repeats."),)

    def plan_generation(self, request: GenerateRequest) -> GenerationJob:
        index, count = parse_shard(request.shard)
        files = [
            PlannedFile(f"toy_{k}.parquet", tuple(Spec(i) for i in range(k * request.samples, (k + 1) * request.samples)))
            for k in range(4)
        ]
        return GenerationJob(
            out=request.out or Path("toy"),
            files=tuple(f for i, f in enumerate(files) if i % count == index - 1),
            builder=ToyBuilder(request.options["word"]),
            generation={"recipe": self.name, "samples": request.samples, "word": request.options["word"]},
            tokenizer="o200k_base",
            frame=CardFrame(hub=("license: mit",), configs=(("toy", "*.parquet"),), title="# Toy"),
            card_name=shard_card_name((index, count)),
        )


@contextmanager
def no_bar(total: int):
    yield lambda rows: None


def data(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith("README")}


def test_a_recipe_the_core_never_saw_gets_the_same_bytes_on_every_engine_and_shard(tmp_path):
    recipe = ToyRecipe()
    generate_for(recipe, GenerateRequest(samples=3, out=tmp_path / "one", workers=1, options={"word": "hi"}), no_bar)
    generate_for(recipe, GenerateRequest(samples=3, out=tmp_path / "two", workers=2, options={"word": "hi"}), no_bar)
    for k in (1, 2):
        request = GenerateRequest(samples=3, out=tmp_path / "shards", shard=f"{k}/2", workers=1, options={"word": "hi"})
        generate_for(recipe, request, no_bar)
    expected = data(tmp_path / "one")
    assert len(expected) == 8 and data(tmp_path / "two") == expected == data(tmp_path / "shards")
    sidecar = (tmp_path / "one" / "toy_1.samples.jsonl").read_text().splitlines()
    assert len(sidecar) == 3 and all('"chars": 4' in line and '"tokenizer": "o200k_base"' in line for line in sidecar)
    card = (tmp_path / "one" / "README.md").read_text()
    assert card.startswith("---\nlicense: mit\nconfigs:\n- config_name: toy") and '"toy_3.samples.jsonl"' in card


def toy_check(word: str) -> list[str]:
    """A recipe's up-front check: a note naming the process it ran in, or AssemblyError."""
    import os

    from mrcr_gen._budget import AssemblyError

    if word == "never":
        raise AssemblyError("cannot make rows of 'never'")
    return [f"checked in process {os.getpid()}"]


class CheckedToyRecipe(ToyRecipe):
    def plan_generation(self, request: GenerateRequest) -> GenerationJob:
        from dataclasses import replace
        from functools import partial

        return replace(super().plan_generation(request), check=partial(toy_check, request.options["word"]))


@pytest.mark.parametrize("workers", [1, 2])
def test_the_up_front_check_runs_before_anything_is_written_in_a_worker_when_there_are_workers(tmp_path, workers):
    import io
    import os

    from rich.console import Console

    def request(word: str, out: Path) -> GenerateRequest:
        messages = Console(file=io.StringIO(), width=200)
        return GenerateRequest(samples=2, out=out, workers=workers, options={"word": word}, messages=messages)

    checked = request("hi", tmp_path / "hi")
    generate_for(CheckedToyRecipe(), checked, no_bar)
    [note] = checked.messages.file.getvalue().splitlines()
    pid = int(note.removeprefix("note: checked in process "))
    assert (pid == os.getpid()) == (workers == 1) and len(data(tmp_path / "hi")) == 8
    with pytest.raises(RequestError, match="^cannot make rows of 'never'$"):
        generate_for(CheckedToyRecipe(), request("never", tmp_path / "never"), no_bar)
    assert not (tmp_path / "never").exists()


def test_a_rerun_writes_nothing_and_a_changed_option_is_another_generation(tmp_path):
    job = ToyRecipe().plan_generation(GenerateRequest(samples=2, out=tmp_path, options={"word": "hi"}))
    run_job(job, engine=LocalEngine(1))
    written = []
    run_job(job, engine=LocalEngine(1), on_rows=written.append)
    assert written == []
    other = ToyRecipe().plan_generation(GenerateRequest(samples=2, out=tmp_path, options={"word": "ho"}))
    with pytest.raises(ValueError, match='--word "hi" there, "ho" here'):
        run_job(other, engine=LocalEngine(1))


def test_options_are_checked_against_the_recipes_declarations():
    declared = ToyRecipe.generation_options
    assert option_values(declared, {}, "toy") == {"word": "hello"}
    with pytest.raises(ValueError, match="--date-added is not an option of --recipe toy"):
        option_values(declared, {"date_added": "01-01-2025"}, "toy")
    with pytest.raises(RequestError, match="--file-format is not an option of --recipe toy"):  # by its name
        generate_for(ToyRecipe(), GenerateRequest(options={"file_format": "csv"}), no_bar)


def test_a_recipes_declared_options_appear_in_mrcr_gen(monkeypatch):
    import typer
    from typer.testing import CliRunner

    from mrcr_gen.cli import _gen

    monkeypatch.setattr(_gen, "RECIPES", (*_gen.RECIPES, ToyRecipe()))
    app = typer.Typer()

    @app.command()
    @_gen._signature
    def command(ctx: typer.Context, **values) -> None:
        print(values["word"], values["rows_per_file"])

    assert "--word" in CliRunner().invoke(app, ["--help"]).output
    assert CliRunner().invoke(app, ["--word", "yo"]).output.split() == ["yo", "400"]


@given(
    sizes=st.lists(st.integers(1, 20), min_size=1, max_size=8),
    whole=st.lists(st.booleans(), min_size=8, max_size=8),
    workers=st.integers(1, 8),
)
def test_a_file_whose_rows_are_built_in_one_sequence_is_never_cut(sizes, whole, workers):
    files = [tuple(Spec(i, 1 << 22) for i in range(n)) for n in sizes]
    plan = plan_chunks(files, workers, whole[: len(files)])
    for rows, chunks, kept in zip(files, plan, whole, strict=False):
        assert sum(chunks, ()) == rows
        if kept:
            assert chunks == [rows]
