"""A row's token counts are computed once in its life (`mrcr_gen._counts`): from the generator's
sealed sidecar, else the count cache, else counted (on every core) and cached. A wrong or stale
sidecar and a corrupted cache line never change a result: each test below compares with a
fresh count (no sidecar, no cache)."""

from __future__ import annotations

import json
import multiprocessing
import pickle
import shutil
from collections import Counter
from concurrent.futures import Future
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcr_gen import _counts
from mrcr_gen._card import sidecar_path
from mrcr_gen._counts import CountCache, RowCounts, SidecarCounts, counted_in_order, seal, tokenizer_key
from mrcr_gen._tokens import count_tokens
from mrcr_gen.cli import gen_main, validate_main
from mrcr_gen.eval._items import read_items
from mrcr_gen.recipes import RECIPES, recipe_named

# Two workers: files finished in workers are published by the command (their sidecars sealed before).
SMALL = ["--needles", "2", "--needles", "4", "--bin", "8192", "--samples", "2", "--seed", "3", "--workers", "2"]


def generate(recipe: str, out: Path, *options: str) -> list[Path]:
    with pytest.raises(SystemExit) as done:
        gen_main(["--recipe", recipe, *SMALL, "--out", str(out), *options])
    assert done.value.code in (0, None)
    return sorted(p for p in out.rglob("*") if p.suffix in (".parquet", ".csv"))


@pytest.fixture(scope="module", params=["openai-mrcr", "mrcr-v2"])
def generated(request, tmp_path_factory) -> list[Path]:
    return generate(request.param, tmp_path_factory.mktemp(request.param) / "data")


def items(path: Path, **options) -> list[dict]:
    return [item.model_dump() for item in read_items(path, recipes=RECIPES, **options)]


def fresh(path: Path, tmp_path: Path) -> list[dict]:
    """The items of a copy of `path` without its sidecar, counted with no cache."""
    copy = tmp_path / "fresh" / path.name
    copy.parent.mkdir(exist_ok=True)
    shutil.copyfile(path, copy)
    return [item | {"source": str(path)} for item in items(copy, cache=False)]


def no_counting(monkeypatch) -> None:
    """Any token count from here on fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("counted a row that was counted before")

    monkeypatch.setattr("mrcr_gen._tokens.Tokenizer.count_batch", refuse)
    monkeypatch.setattr("mrcr_gen._tokens.TiktokenTokenizer.count", refuse)
    monkeypatch.setattr("mrcr_gen._tokens.token_counter", lambda: refuse)


def test_a_generated_sidecar_vouches_for_every_row_and_agrees_with_a_fresh_count(generated, tmp_path, monkeypatch):
    for path in generated:
        expected = fresh(path, tmp_path)
        assert len(SidecarCounts(path, "o200k_base").counts) == len(expected) > 0
        no_counting(monkeypatch)
        assert [item | {"source": str(path)} for item in items(path, cache=False)] == expected
        monkeypatch.undo()


def _rewrite(path: Path, change) -> None:
    """Rewrite the sidecar of the data file `path` line by line with `change(row, record)`."""
    sidecar = sidecar_path(path)
    lines = [json.loads(line) for line in sidecar.read_text(encoding="utf-8").splitlines()]
    sidecar.write_text("".join(json.dumps(change(row, record)) + "\n" for row, record in enumerate(lines)))


def _wrong_counts(row: int, record: dict) -> dict:
    # Far from the truth: another bin, were it believed.
    return record | {"prompt_tokens": record["prompt_tokens"] + 50_000, "n_tokens": record["n_tokens"] + 50_000}


def _stale(row: int, record: dict) -> dict:
    # A sidecar of another file, whole and consistent: its own sha256, its counts sealed to it.
    sha, key = "0" * 64, tokenizer_key("o200k_base")
    moved = _wrong_counts(row, record)
    return moved | {"data_sha256": sha, "seal": seal(sha, key, row, moved["prompt_tokens"], moved["n_tokens"])}


def _other_tokenizer(row: int, record: dict) -> dict:
    # Counted (and sealed) by another tokenizer.
    sha, key = record["data_sha256"], "f" * 16
    moved = _wrong_counts(row, record)
    seal_ = seal(sha, key, row, moved["prompt_tokens"], moved["n_tokens"])
    return moved | {"tokenizer": "cl100k_base", "seal": seal_}


def _torn(row: int, record: dict) -> dict:
    return {"n_tokens": "many"} if row == 0 else record


@pytest.mark.parametrize("change", [_wrong_counts, _stale, _other_tokenizer, _torn])
def test_a_wrong_or_stale_sidecar_never_changes_a_result(generated, tmp_path, change):
    for path in generated:
        expected = fresh(path, tmp_path)
        copy = tmp_path / "data" / path.name
        copy.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, copy)
        shutil.copyfile(sidecar_path(path), sidecar_path(copy))
        _rewrite(copy, change)
        found = [item | {"source": str(path)} for item in items(copy, cache=False)]
        assert found == [item | {"source": str(path)} for item in expected]


def test_the_sidecar_is_sealed_to_the_file_as_it_is_now(generated, tmp_path):
    path = generated[0]
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    shutil.copyfile(sidecar_path(path), sidecar_path(copy))
    assert len(SidecarCounts(copy, "o200k_base").counts) > 0
    with copy.open("ab") as handle:  # the file changed after the sidecar was written
        handle.write(b"\0")
    assert SidecarCounts(copy, "o200k_base").counts == {}


def test_a_second_read_takes_every_count_from_the_cache(generated, tmp_path, monkeypatch):
    path = generated[-1]
    copy = tmp_path / path.name  # no sidecar: counted, then cached
    shutil.copyfile(path, copy)
    first = items(copy)
    assert CountCache("o200k_base").path.is_file()
    no_counting(monkeypatch)
    assert items(copy) == first
    monkeypatch.undo()
    assert items(copy, cache=False) == first


def test_a_corrupted_or_torn_cache_line_is_ignored(generated, tmp_path):
    path = generated[0]
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    expected = items(copy, cache=False)
    cache = CountCache("o200k_base")
    items(copy)  # fills the cache
    lines = cache.path.read_text().splitlines()
    assert len(lines) == len(expected)
    digest, prompt, total, check = lines[0].split("\t")
    wrong = f"{digest}\t{int(prompt) + 50_000}\t{int(total) + 50_000}\t{check}"
    torn = lines[1][: len(lines[1]) // 2]
    cache.path.write_text("\n".join([wrong, *lines[2:], torn]))
    assert items(copy) == expected
    assert items(copy) == expected  # the rows re-counted were cached again, rightly


def _put_many(directory: str, start: int) -> None:
    cache = CountCache("o200k_base", directory)
    for i in range(start, start + 300):
        cache.put(f"{i:064x}", (i, i + 1))


def in_processes(target, folder, starts) -> None:
    """`target(folder, start)` in a spawned process for each of `starts`, all at once; each exits 0."""
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=target, args=(str(folder), start)) for start in starts]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
        assert writer.exitcode == 0


def test_concurrent_writers_never_tear_the_cache(tmp_path):
    in_processes(_put_many, tmp_path, [0, 300, 600])
    cache = CountCache("o200k_base", tmp_path)
    assert all(cache.get(f"{i:064x}") == (i, i + 1) for i in range(900))
    assert len(cache.path.read_text().splitlines()) == 900


def test_no_cache_neither_reads_nor_writes_it(generated, tmp_path):
    path = generated[0]
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    items(copy, cache=False)
    assert not CountCache("o200k_base").path.exists()
    counts = RowCounts(copy, "o200k_base", cache=False)
    assert counts.get(0, "x") is None


def test_counts_come_in_order_and_rows_before_a_break_come_first():
    def rows():
        yield from ["a b c", "", "d " * 1000, "e"]
        raise OSError("broken")

    seen = []
    with pytest.raises(OSError, match="broken"):
        for text, counted in counted_in_order(rows(), lambda text: [text, text] if text else None, "o200k_base", 2):
            seen.append((text, counted))
    assert [text for text, _ in seen] == ["a b c", "", "d " * 1000, "e"]
    assert seen[1][1] is None
    assert seen[2][1] == [count_tokens("d " * 1000)] * 2


def test_counting_on_every_core_gives_the_counts_of_one(monkeypatch):
    monkeypatch.setattr(_counts, "INLINE_CHARS", 0)  # every row after the first on the cores
    texts = [("word " * n, "x" * n) for n in range(1, 40)]
    expected = [_counts.count_texts("o200k_base", list(pair)) for pair in texts]
    found = [counted for _, counted in counted_in_order(iter(texts), list, "o200k_base", 4)]
    assert found == expected


def test_validate_takes_the_sidecar_s_counts_and_agrees_with_a_recount(generated, tmp_path, monkeypatch, capsys):
    folder = generated[0].parents[1]
    reports = []
    for options in ([], ["--no-cache"]):
        out = tmp_path / f"report{len(reports)}.json"
        with pytest.raises(SystemExit):
            monkeypatch.setattr("sys.argv", ["mrcr-validate", str(folder), "--json", str(out), "-q", *options])
            validate_main()
        reports.append(json.loads(out.read_text())["summary"])
    stripped = tmp_path / "stripped"
    shutil.copytree(folder, stripped)
    for path in stripped.rglob("*"):
        if path.suffix in (".parquet", ".csv"):
            _rewrite(path, _wrong_counts)
    out = tmp_path / "stripped.json"
    with pytest.raises(SystemExit):
        monkeypatch.setattr("sys.argv", ["mrcr-validate", str(stripped), "--json", str(out), "-q", "--no-cache"])
        validate_main()
    recount = json.loads(out.read_text())["summary"]
    assert reports[0]["by_bin"] == reports[1]["by_bin"] == recount["by_bin"]
    assert reports[0]["by_check"] == reports[1]["by_check"] == {}


def test_the_sidecar_is_read_once_before_a_worker_gets_it(generated, tmp_path):
    path = generated[0]
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    shutil.copyfile(sidecar_path(path), sidecar_path(copy))
    counts = RowCounts(copy, "o200k_base", cache=False)
    shipped = pickle.dumps(counts)  # as a validation unit goes to a worker
    copy.unlink()  # a worker hashing the file itself would find nothing now
    sidecar_path(copy).unlink()
    received = pickle.loads(shipped)
    assert received.get(0, "x") == counts.get(0, "x") is not None


def test_mrcr_eval_no_cache_leaves_the_cache_alone_and_scores_the_same(generated, tmp_path, monkeypatch, capsys):
    from mrcr_gen.cli import eval_main
    from tests.support.chat_server import ChatServer

    path = generated[0]
    copy = tmp_path / path.name  # no sidecar: every row counted
    shutil.copyfile(path, copy)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    summaries = []
    with ChatServer("oracle") as server:
        for run, options in enumerate((["--no-cache"], [])):
            out = tmp_path / f"run{run}"
            args = [str(copy), "--model", "test-model", "--base-url", server.base_url, "--out", str(out), *options]
            with pytest.raises(SystemExit) as done:
                eval_main(args)
            capsys.readouterr()
            assert done.value.code == 0
            records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
            summaries.append(sorted((r["row"], r["o200k_tokens"], r["bin"], r["score"]) for r in records))
            assert CountCache("o200k_base").path.is_file() == (run == 1)
    assert summaries[0] == summaries[1]


def test_a_row_of_its_own_is_sent_before_the_next_row_is_read(tmp_path, monkeypatch):
    # The first request waits only for the first row's count, never for the second row's.
    from mrcr_gen.eval import _planner
    from mrcr_gen.eval._config import EvalConfig
    from mrcr_gen.eval._items import EvalItem

    asked = []

    def reader(path, **options):
        for row in range(3):
            asked.append(row)
            fields = {"source": str(path), "row": row, "digest": f"d{row}", "recipe": "openai-mrcr", "n_needles": 2}
            yield EvalItem(**fields, messages=[{}])

    monkeypatch.setattr(_planner, "read_items", reader)
    config = EvalConfig(data=["x.parquet"], model="m", out=str(tmp_path / "out"))
    planner = _planner.Planner(config, RECIPES, ["x.parquet"], {"x.parquet": "sha"}, [], {"settings": "s"})
    steps = iter(planner)
    kind, job = next(steps)
    assert kind == _planner.JOB and [item.row for item in job] == [0] and asked == [0]
    assert [job[0].row for kind, job in steps if kind == _planner.JOB] == [1, 2]


# -- mrcr-grade and the Inspect tasks take the counts too ---------------------------------------


def _responses(path: Path, folder: Path) -> Path:
    """A RESPONSES.jsonl with one reply per row of `path` (the same replies for every copy of it)."""
    n_rows = len(items(path, cache=False, skip=lambda row, digest: True))
    out = folder / f"{path.name}.responses.jsonl"
    out.write_text("".join(json.dumps({"row": i, "response": f"reply {i}"}) + "\n" for i in range(n_rows)))
    return out


def _grade_cli(path: Path, responses: Path, capsys, *options: str) -> dict:
    from mrcr_gen.cli._grade import grade_main

    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        grade_main([str(path), str(responses), "--json", *options])
    out, err = capsys.readouterr()
    assert done.value.code in (0, None), err
    return json.loads(out)


def _grade_library(path: Path, responses: Path, capsys, *options: str) -> dict:
    from mrcr_gen import grade_responses

    return grade_responses(path, responses, cache="--no-cache" not in options)


GRADERS = [_grade_cli, _grade_library]


def _copy(path: Path, folder: Path, sidecar: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / path.name
    shutil.copyfile(path, copy)
    if sidecar:
        shutil.copyfile(sidecar_path(path), sidecar_path(copy))
    return copy


def _edited(path: Path, change) -> None:
    """`change` (a sidecar rewrite, or "edited data file") applied to the copy `path`."""
    if change != "edited data file":
        _rewrite(path, change)
        return
    _reversed_rows(path)
    assert SidecarCounts(path, "o200k_base").counts == {}  # rows of the same bin may hide it below


def _reversed_rows(path: Path) -> None:
    """Rewrite the data file `path` with its rows in reverse order (its sidecar left as it was)."""
    if path.suffix == ".csv":
        import csv

        with path.open(newline="", encoding="utf-8") as handle:
            header, *rows = list(csv.reader(handle))
        with path.open("w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows([header, *reversed(rows)])
        return
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    pq.write_table(table.take(list(reversed(range(table.num_rows)))), path)


@pytest.mark.parametrize("grade", GRADERS)
def test_mrcr_grade_takes_the_sidecar_s_counts_without_counting(generated, tmp_path, capsys, grade):
    for path in generated:
        responses = _responses(path, tmp_path)
        expected = grade(_copy(path, tmp_path / "fresh", sidecar=False), responses, capsys, "--no-cache")
        with pytest.MonkeyPatch.context() as patch:  # (undo() would undo the test's own cache folder too)
            no_counting(patch)
            assert grade(path, responses, capsys) == expected
            assert grade(path, responses, capsys, "--no-cache") == expected
        assert not CountCache("o200k_base").path.exists()  # nothing was counted, nothing cached


@pytest.mark.parametrize("grade", GRADERS)
@pytest.mark.parametrize("change", [_wrong_counts, _stale, _other_tokenizer, _torn, "edited data file"])
def test_mrcr_grade_ignores_a_wrong_or_stale_sidecar(generated, tmp_path, capsys, grade, change):
    for path in generated:
        copy = _copy(path, tmp_path / "data")
        _edited(copy, change)
        responses = _responses(copy, tmp_path)
        expected = grade(_copy(copy, tmp_path / "fresh", sidecar=False), responses, capsys, "--no-cache")
        assert grade(copy, responses, capsys, "--no-cache") == expected
        assert grade(copy, responses, capsys) == expected  # counted, then cached
        assert grade(copy, responses, capsys) == expected  # from the cache


def _poison_cache() -> None:
    """Every line of the count cache rewritten with wrong counts and a check that passes: a cache
    that is read shows it in the bins."""
    cache = CountCache("o200k_base")
    poisoned = []
    for line in cache.path.read_text().splitlines():
        digest, prompt, total, _ = line.split("\t")
        wrong = (int(prompt) + 50_000, int(total) + 50_000)
        poisoned.append(
            "\t".join([digest, *map(str, wrong), _counts._check(cache.key, digest, _counts.counts_value(wrong))]) + "\n"
        )
    cache.path.write_text("".join(poisoned))


@pytest.mark.parametrize("grade", GRADERS)
def test_mrcr_grade_no_cache_neither_reads_nor_writes_the_cache(generated, tmp_path, capsys, grade):
    path = generated[0]
    copy = _copy(path, tmp_path / "data", sidecar=False)
    responses = _responses(copy, tmp_path)
    expected = grade(copy, responses, capsys, "--no-cache")
    assert not CountCache("o200k_base").path.exists()
    assert grade(copy, responses, capsys) == expected  # counted and cached
    _poison_cache()
    assert grade(copy, responses, capsys, "--no-cache") == expected
    assert grade(copy, responses, capsys) != expected  # the poison shows where the cache is read


def test_mrcr_grade_no_cache_with_html_reads_no_cache(generated, tmp_path, capsys):
    copy = _copy(generated[0], tmp_path / "data", sidecar=False)
    responses = _responses(copy, tmp_path)
    _grade_cli(copy, responses, capsys, "--html", str(tmp_path / "page.html"), "--no-cache")
    assert (tmp_path / "page.html").is_file() and not CountCache("o200k_base").path.exists()


def _counting_spy(patch: pytest.MonkeyPatch) -> Counter:
    """Every token count from here on, by the texts counted (each row's own: its messages and
    answer, or its transcript and final query), all counted in this process where the spy sees them."""
    counted: Counter = Counter()
    real = _counts.count_texts

    def spy(tokenizer_spec, texts):
        counted[tuple(texts)] += 1
        return real(tokenizer_spec, texts)

    patch.setattr(_counts, "count_texts", spy)
    patch.setattr(_counts, "_counting_pool", lambda: None)
    return counted


def _page_read_again(path: Path, responses: Path, result: dict, cache: bool) -> str:
    """The page of `result` with its rows read (and counted) from the file again, as it was made before
    it took the grading's rows."""
    from mrcr_gen import graded_view
    from mrcr_gen.eval import read_responses, render_view

    return render_view(graded_view(path, read_responses(responses), result, cache=cache))


def test_mrcr_grade_no_cache_html_counts_each_row_once(generated, tmp_path, capsys):
    for path in generated:
        copy = _copy(path, tmp_path / "data", sidecar=False)
        responses = _responses(copy, tmp_path)
        page = tmp_path / f"{copy.name}.html"
        with pytest.MonkeyPatch.context() as patch:
            counted = _counting_spy(patch)
            result = _grade_cli(copy, responses, capsys, "--html", str(page), "--no-cache")
        assert sum(counted.values()) == len(counted) == result["n_rows"] > 0  # each row counted, once
        assert page.read_text(encoding="utf-8") == _page_read_again(copy, responses, result, cache=False)


def test_mrcr_grade_html_reads_the_rows_a_grader_without_items_does_not_give(generated, tmp_path, capsys, monkeypatch):
    """A plugin's grader made before `items`: the page reads its rows from the file, as before."""
    from mrcr_gen.recipes import recipe_claiming

    path = generated[0]
    recipe = type(recipe_claiming(path))
    real = recipe.grade_responses

    def old_grader(self, data, responses, *, allow_missing=False, cache=True):
        return real(self, data, responses, allow_missing=allow_missing, cache=cache)

    monkeypatch.setattr(recipe, "grade_responses", old_grader)
    responses = _responses(path, tmp_path)
    result = _grade_cli(path, responses, capsys, "--html", str(tmp_path / "page.html"))
    assert (tmp_path / "page.html").read_text(encoding="utf-8") == _page_read_again(path, responses, result, True)


def test_mrcr_grade_refuses_no_cache_a_plugin_s_grader_cannot_honour(generated, tmp_path, monkeypatch, capsys):
    from mrcr_gen._recipe import GradeDefaults
    from mrcr_gen.cli._grade import grade_main

    def old_grader(self, data, responses, *, allow_missing=False):
        raise AssertionError("graded without honouring --no-cache")

    monkeypatch.setattr(GradeDefaults, "grade_responses", old_grader)
    monkeypatch.setattr(type(recipe_named("mrcr-v2")), "grade_responses", old_grader)
    path = generated[0]
    with pytest.raises(SystemExit) as done:
        grade_main([str(path), str(_responses(path, tmp_path)), "--no-cache"])
    assert done.value.code == 2
    assert "--no-cache" in capsys.readouterr().err


def _dataset(path: Path, **options) -> list[tuple]:
    pytest.importorskip("inspect_ai")
    from mrcr_gen.inspect._dataset import mrcr_dataset

    dataset = mrcr_dataset(str(path), recipe=items(path, cache=False, skip=lambda *_: True)[0]["recipe"], **options)
    samples = [(s.id, s.metadata, [m.text for m in s.input] if isinstance(s.input, list) else s.input) for s in dataset]
    return [(id_, metadata | {"file": Path(metadata["file"]).name}, sent) for id_, metadata, sent in samples]


def _hashed_again(path):
    raise AssertionError("the data file was hashed again to check its sidecar")


def test_the_inspect_dataset_takes_the_sidecar_s_counts_without_counting_or_hashing_twice(generated, tmp_path):
    pytest.importorskip("inspect_ai")
    from mrcr_gen.inspect._tasks import TASKS

    for path in generated:
        expected = _dataset(_copy(path, tmp_path / "fresh", sidecar=False), cache=False)
        with pytest.MonkeyPatch.context() as patch:
            no_counting(patch)
            patch.setattr(_counts, "file_sha256", _hashed_again)  # the dataset hashes each file once
            assert _dataset(path) == expected
            assert _dataset(path, cache=False) == expected
            task = TASKS["mrcr" if path.suffix == ".parquet" else "mrcr_v2"](data=str(path), no_cache=True)
            found = [(s.id, s.metadata["bin_upper"], s.metadata["o200k_prompt_tokens"]) for s in task.dataset]
            assert found == [(id_, meta["bin_upper"], meta["o200k_prompt_tokens"]) for id_, meta, _ in expected]
        assert not CountCache("o200k_base").path.exists()


@pytest.mark.parametrize("change", [_wrong_counts, _stale, _other_tokenizer, _torn, "edited data file"])
def test_the_inspect_dataset_ignores_a_wrong_or_stale_sidecar(generated, tmp_path, change):
    for path in generated:
        copy = _copy(path, tmp_path / "data")
        _edited(copy, change)
        expected = _dataset(_copy(copy, tmp_path / "fresh", sidecar=False), cache=False)
        assert _dataset(copy, cache=False) == expected
        assert _dataset(copy) == expected  # counted, then cached
        assert _dataset(copy) == expected  # from the cache


def test_the_inspect_task_s_no_cache_neither_reads_nor_writes_the_cache(generated, tmp_path):
    pytest.importorskip("inspect_ai")
    from mrcr_gen.inspect._dataset import DataError
    from mrcr_gen.inspect._tasks import TASKS

    path = generated[0]
    copy = _copy(path, tmp_path / "data", sidecar=False)
    task = TASKS["mrcr" if path.suffix == ".parquet" else "mrcr_v2"]

    def bins(**options) -> list:
        return [(s.id, s.metadata["bin_upper"]) for s in task(data=str(copy), **options).dataset]

    expected = bins(no_cache=True)
    assert not CountCache("o200k_base").path.exists()
    assert bins() == expected
    _poison_cache()
    assert bins(no_cache=True) == expected
    assert bins() != expected  # the poison shows where the cache is read
    with pytest.raises(DataError) as info:
        task(data=str(copy), no_cache="yes")
    assert str(info.value) == "no_cache: expected true or false, got 'yes'"


# -- the count cache stays bounded: compaction --------------------------------------------------


def _digest(i: int) -> str:
    return f"{i:064x}"


def _true_counts(digest: str) -> tuple[int, int]:
    """The counts a test puts for `digest`: a function of it, so any line can be checked."""
    i = int(digest, 16)
    return i, 2 * i + 1


def _file_lines(cache: CountCache) -> list[tuple[str, tuple[int, int]]]:
    """The cache file's lines as (digest, counts), each asserted whole and valid."""
    text = cache.path.read_text(encoding="utf-8")
    found = []
    for line in text.splitlines():
        digest, prompt, total, check = line.split("\t")
        assert check == _counts._check(cache.key, digest, f"{prompt}\t{total}"), line
        assert (int(prompt), int(total)) == _true_counts(digest), line
        found.append((digest, (int(prompt), int(total))))
    return found


def _append_raw(cache: CountCache, digests) -> None:
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    with cache.path.open("ab") as handle:
        for digest in digests:
            handle.write(_counts._line(cache.key, digest, _counts.counts_value(_true_counts(digest))))


def test_compaction_keeps_the_most_recent_rows_once_each(tmp_path, monkeypatch):
    monkeypatch.setattr(_counts, "KEEP_ENTRIES", 3)
    cache = CountCache("o200k_base", tmp_path)
    _append_raw(cache, [_digest(i) for i in (0, 1, 2, 3, 1, 4, 0, 4)])
    with cache.path.open("ab") as handle:
        handle.write(b"torn\t1")
    assert cache.compact()
    assert _file_lines(cache) == [(_digest(i), _true_counts(_digest(i))) for i in (1, 0, 4)]
    assert cache.path.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{cache.key}.lock", f"{cache.key}.tsv"]
    monkeypatch.setattr(
        _counts, "KEEP_BYTES", 2 * len(_counts._line(cache.key, _digest(0), _counts.counts_value((0, 1))))
    )
    assert cache.compact() and [d for d, _ in _file_lines(cache)] == [_digest(0), _digest(4)]


def test_a_cache_of_many_duplicated_lines_is_compacted_by_the_next_write_never_by_a_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(_counts, "DUPLICATE_SLACK", 5)
    writer = CountCache("o200k_base", tmp_path)
    _append_raw(writer, [_digest(i % 10) for i in range(50)])  # ten rows, each counted five times
    reader = CountCache("o200k_base", tmp_path)
    assert all(reader.get(_digest(i)) == _true_counts(_digest(i)) for i in range(10))
    assert len(_file_lines(reader)) == 50  # reading rewrites nothing
    writer.put(_digest(10), _true_counts(_digest(10)))
    assert [d for d, _ in _file_lines(writer)] == [_digest(i) for i in range(11)]
    writer.put(_digest(11), _true_counts(_digest(11)))  # compacted once: now appended again
    assert len(_file_lines(writer)) == 12


def test_a_cache_never_grows_past_its_bound(tmp_path, monkeypatch):
    cache = CountCache("o200k_base", tmp_path)
    line_size = len(_counts._line(cache.key, _digest(0), _counts.counts_value((0, 1))))
    monkeypatch.setattr(_counts, "KEEP_ENTRIES", 10)
    monkeypatch.setattr(_counts, "COMPACT_BYTES", 30 * line_size)
    for i in range(100):
        cache.put(_digest(i), _true_counts(_digest(i)))
        assert cache.path.stat().st_size <= 30 * line_size
    assert [d for d, _ in _file_lines(cache)][-10:] == [_digest(i) for i in range(90, 100)]
    assert cache.get(_digest(0)) == _true_counts(_digest(0))  # this process still knows what it counted
    assert CountCache("o200k_base", tmp_path).get(_digest(0)) is None  # dropped: only a recount is lost


def test_a_compaction_waits_for_no_one_and_is_retried_by_a_later_write(tmp_path, monkeypatch):
    import fcntl

    monkeypatch.setattr(_counts, "DUPLICATE_SLACK", 0)
    cache = CountCache("o200k_base", tmp_path)
    _append_raw(cache, [_digest(0)] * 5)
    cache.get(_digest(0))  # loaded: a compaction is due
    with _counts._flock(cache.lock_path, fcntl.LOCK_SH):  # another process is appending
        assert not cache.compact()
        cache.path.parent.joinpath(f".{cache.key}.123.tmp").write_text("a compaction killed midway")
    assert len(_file_lines(cache)) == 5
    cache.put(_digest(1), _true_counts(_digest(1)))  # no one holds the lock now
    assert [d for d, _ in _file_lines(cache)] == [_digest(0), _digest(1)]
    assert not list(tmp_path.glob("*.tmp"))


@settings(max_examples=150, deadline=None)
@given(
    keep=st.integers(1, 6),
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("put"), st.integers(0, 2), st.integers(0, 9)),
            st.tuples(st.just("compact"), st.integers(0, 2), st.just(0)),
            st.tuples(st.just("new run"), st.integers(0, 2), st.just(0)),
        ),
        max_size=40,
    ),
)
def test_compaction_keeps_exactly_the_most_recent_rows_and_never_changes_a_count(keep, steps):
    """Runs (instances, each with what it loaded and counted) putting and compacting in any order:
    the file holds exactly what a model of it holds, every line whole and true."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        patch.setattr(_counts, "KEEP_ENTRIES", keep)
        patch.setattr(_counts, "DUPLICATE_SLACK", 10**9)  # compactions only where the steps say
        runs = [CountCache("o200k_base", folder) for _ in range(3)]
        known: list[set[str] | None] = [None] * 3  # what each run loaded and counted
        model: list[str] = []  # the file's lines' digests
        for action, run, i in steps:
            if action == "new run":
                runs[run], known[run] = CountCache("o200k_base", folder), None
                continue
            if action == "put":
                runs[run].put(_digest(i), _true_counts(_digest(i)))
                seen = known[run] = set(model) if known[run] is None else known[run]  # loaded on first use
                if _digest(i) not in seen:
                    seen.add(_digest(i))
                    model.append(_digest(i))
            else:
                assert runs[run].compact()
                latest = list(dict.fromkeys(reversed(model)))[:keep]
                model = list(reversed(latest))
            lines = _file_lines(runs[run]) if runs[run].path.exists() else []
            assert [digest for digest, _ in lines] == model


def _runs_putting_and_compacting(directory: str, seed: int, limits: dict, out: str) -> None:
    """Three runs one after the other, each putting the counts of 200 rows the other processes put
    too, in its own order, compacting now and then; the first also puts 100 rows of its own, which
    no one puts again (a line lost would stay lost). How many compactions it made, in `out`."""
    import random

    for name, value in limits.items():  # a process of its own: its module, its limits
        setattr(_counts, name, value)
    rng = random.Random(seed)
    compactions = 0
    for run in range(3):
        cache = CountCache("o200k_base", directory)
        rows = rng.sample(range(200), 200) + ([1000 * (seed + 1) + j for j in range(100)] if run == 0 else [])
        for i in rng.sample(rows, len(rows)):
            cache.put(_digest(i), _true_counts(_digest(i)))
            if rng.random() < 0.05:
                compactions += cache.compact()
    Path(out).write_text(str(compactions))


def _reading_until(directory: str, stop: str, out: str, monotone: bool) -> None:
    """Reads the cache file over and over until `stop` exists: every whole line it sees must be
    valid and true (a torn last piece is what a reader skips) and, when nothing is dropped
    (`monotone`), a row it saw is there in every later read. How many reads, in `out`."""
    cache = CountCache("o200k_base", directory)
    reads = 0
    seen: set[str] = set()
    while not Path(stop).exists():
        try:
            text = cache.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        digests = set()
        for line in text.split("\n")[:-1]:
            digest, prompt, total, check = line.split("\t")
            assert check == _counts._check(cache.key, digest, f"{prompt}\t{total}"), line
            assert (int(prompt), int(total)) == _true_counts(digest), line
            digests.add(digest)
        assert not monotone or seen <= digests, f"{len(seen - digests)} rows gone"
        seen = digests
        reads += 1
    Path(out).write_text(str(reads))


@pytest.mark.parametrize("keep", [10**6, 50])
def test_runs_appending_and_compacting_at_once_lose_no_line_and_change_no_count(tmp_path, monkeypatch, keep):
    cache = CountCache("o200k_base", tmp_path / "cache")
    line_size = len(_counts._line(cache.key, _digest(0), _counts.counts_value((0, 1))))
    limits = {"KEEP_ENTRIES": keep, "COMPACT_BYTES": 120 * line_size, "DUPLICATE_SLACK": 20}
    context = multiprocessing.get_context("spawn")
    stop, folder = tmp_path / "stop", str(cache.path.parent)
    reader = context.Process(target=_reading_until, args=(folder, str(stop), str(tmp_path / "reads"), keep > 500))
    writers = [
        context.Process(
            target=_runs_putting_and_compacting, args=(folder, seed, limits, str(tmp_path / f"compactions{seed}"))
        )
        for seed in range(3)
    ]
    for process in [reader, *writers]:
        process.start()
    for writer in writers:
        writer.join(120)
        assert writer.exitcode == 0
    stop.touch()
    reader.join(60)
    assert reader.exitcode == 0 and int((tmp_path / "reads").read_text()) > 0
    assert sum(int((tmp_path / f"compactions{seed}").read_text()) for seed in range(3)) > 0
    digests = [digest for digest, _ in _file_lines(cache)]  # every line whole and true
    everyone = {_digest(i) for i in [*range(200), *(1000 * (s + 1) + j for s in range(3) for j in range(100))]}
    if keep > 500:  # nothing dropped: every row any run put is there
        assert set(digests) == everyone
    for name, value in limits.items():
        monkeypatch.setattr(_counts, name, value)
    assert cache.compact()
    digests = [digest for digest, _ in _file_lines(cache)]
    assert len(digests) == len(set(digests)) == min(keep, 500)


def test_mrcr_v2_rows_left_to_count_are_counted_on_every_core_each_transcript_once(tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from mrcr_gen.recipes.mrcr_v2._checks import transcript_id

    (path, *_) = generate("mrcr-v2", tmp_path / "data", "--samples", "7", "--rows-per-transcript", "3")
    copy = _copy(path, tmp_path / "fresh", sidecar=False)
    counted: list[list[str]] = []
    submitted: list[int] = []
    count_texts = _counts.count_texts

    def recording(tokenizer_spec, texts):
        counted.append(list(texts))
        return count_texts(tokenizer_spec, texts)

    class Cores(ThreadPoolExecutor):  # stands in for the counting processes
        def submit(self, fn, /, *args, **kwargs):
            submitted.append(1)
            return super().submit(fn, *args, **kwargs)

    cores = Cores(2)
    monkeypatch.setattr(_counts, "count_texts", recording)
    monkeypatch.setattr(_counts, "_counting_pool", lambda: cores)
    monkeypatch.setattr(_counts, "INLINE_CHARS", 0)
    found = list(read_items(copy, recipes=RECIPES, cache=False))
    cores.shutdown()
    assert len(found) > len({item.group for item in found}) > 1 and all(item.error is None for item in found)
    assert [item.prompt_tokens for item in found] == [count_tokens(item.messages[0]["content"]) for item in found]
    assert len(counted) == len(found) and len(submitted) == len(found) - 1  # the first row here, the rest on the cores
    transcripts = [texts[0] for texts in counted if len(texts) == 2]
    assert len(transcripts) == len({transcript_id(t) for t in transcripts}) == len({item.group for item in found})


def test_a_cache_that_cannot_be_locked_or_written_is_no_error(tmp_path, monkeypatch):
    import errno
    import fcntl

    monkeypatch.setattr(_counts, "DUPLICATE_SLACK", 0)
    cache = CountCache("o200k_base", tmp_path)
    _append_raw(cache, [_digest(0)] * 3)

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "no locks available")

    with pytest.MonkeyPatch.context() as patch:  # a file system without locks: appends, never compacts
        patch.setattr(fcntl, "flock", no_locks)
        cache.put(_digest(1), _true_counts(_digest(1)))
        assert not cache.compact()
    assert [d for d, _ in _file_lines(cache)] == [_digest(0)] * 3 + [_digest(1)]
    cache.lock_path.unlink()
    cache.lock_path.mkdir()  # a lock that cannot be opened: no write, no error
    cache.put(_digest(2), _true_counts(_digest(2)))
    assert cache.compact()
    assert len(_file_lines(cache)) == 4
    assert CountCache("o200k_base", tmp_path).get(_digest(1)) == _true_counts(_digest(1))


@pytest.mark.parametrize("inline", [0, 50, 10**9])
def test_a_small_job_is_counted_here_and_a_large_one_on_the_cores_after_its_first_rows(monkeypatch, inline):
    """The first row, and rows up to INLINE_CHARS characters, are counted in the reading thread
    (a small job never waits for the counting processes to start); the rest on the cores; the
    counts are the same either way."""
    submitted = []

    class Cores:
        def submit(self, function, *args):
            submitted.append(args[1])
            done: Future = Future()
            done.set_result(function(*args))
            return done

    monkeypatch.setattr(_counts, "INLINE_CHARS", inline)
    monkeypatch.setattr(_counts, "_counting_pool", lambda: Cores())
    texts = [["word " * n] for n in range(1, 30)]  # 5, 10, 15, ... characters
    found = [counted for _, counted in counted_in_order(iter(texts), list, "o200k_base")]
    assert found == [[count_tokens(t[0])] for t in texts]
    here = len(texts) - len(submitted)
    sizes = [len(text[0]) for text in texts]  # a row is counted here while less was counted before it
    expected_here = next((k for k in range(1, len(texts)) if sum(sizes[:k]) >= inline), len(texts))
    assert here == expected_here and submitted == texts[here:]
