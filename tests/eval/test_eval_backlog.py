"""A reply gives its slot to the next request at once and waits for its grade in the backlog;
RUN_DIR/replies.jsonl keeps every reply until its record is written, so a run stopped before its
grades are written loses no reply: the next run grades them without sending the rows again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from mrcr_gen import iter_rows, run_eval, run_eval_async
from mrcr_gen._openai import ChatResult
from mrcr_gen.eval import EvalConfig, _pipeline, _session
from mrcr_gen.eval._journal import JOURNAL_NAME, ReplyJournal, read_journal
from mrcr_gen.eval._planner import scored_record as real_scored_record
from tests.support.chat_server import ChatServer

ROWS_OF_SMALL_DATA = 12
VOLATILE = {"latency_s"}


def config(data, out, server, **kwargs) -> EvalConfig:
    return EvalConfig(data=[str(data)], model="test-model", out=str(out), base_url=server.base_url, **kwargs)


def results(out) -> list[dict]:
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def held_grading(monkeypatch) -> threading.Event:
    """Grades wait until the returned event is set (graded in threads: a local function cannot be sent
    to a worker process)."""
    release = threading.Event()

    def scored_record(item, recipe, result, strip_think):
        release.wait(timeout=120)
        return real_scored_record(item, recipe, result, strip_think)

    monkeypatch.setattr(_session, "scored_record", scored_record)
    return release


class Background:
    """`run_eval_async` on a loop of its own thread, so the test can watch the server meanwhile."""

    def __init__(self, cfg: EvalConfig):
        self.loop = asyncio.new_event_loop()
        self.error: BaseException | None = None
        self.task: asyncio.Task | None = None
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(cfg,), daemon=True)
        self.thread.start()
        self.started.wait(30)

    def _run(self, cfg: EvalConfig) -> None:
        asyncio.set_event_loop(self.loop)
        self.task = self.loop.create_task(run_eval_async(cfg))
        self.loop.call_soon(self.started.set)
        try:
            self.loop.run_until_complete(self.task)
        except BaseException as exc:  # cancelled, or the run's own error: the test looks
            self.error = exc
        finally:
            self.loop.close()

    def cancel(self) -> None:
        assert self.task is not None
        self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(60)

    def join(self) -> None:
        self.thread.join(120)
        assert not self.thread.is_alive()


def wait_for(condition, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def comparable(records: list[dict]) -> dict[int, dict]:
    return {r["row"]: {k: v for k, v in r.items() if k not in VOLATILE} for r in records}


def test_requests_go_on_while_replies_wait_for_their_grade(small_data, tmp_path, api_key, monkeypatch):
    release = held_grading(monkeypatch)
    out = tmp_path / "run"
    with ChatServer("oracle") as server:
        run = Background(config(small_data, out, server, concurrency=2))
        try:
            # With the slot held until the grade, only 2 rows could be sent while no grade finishes.
            assert wait_for(lambda: server.total_requests == ROWS_OF_SMALL_DATA)
            assert results(out) == []
            assert wait_for(lambda: len(read_journal(out / JOURNAL_NAME)) == ROWS_OF_SMALL_DATA)
        finally:
            release.set()
            run.join()
    assert run.error is None
    records = results(out)
    assert len(records) == ROWS_OF_SMALL_DATA and all(r["status"] == "ok" and r["score"] == 1.0 for r in records)
    assert not (out / JOURNAL_NAME).exists()  # every reply has its record: nothing left to keep


def test_a_full_backlog_holds_the_requests_back(small_data, tmp_path, api_key, monkeypatch):
    release = held_grading(monkeypatch)
    monkeypatch.setattr(_pipeline, "BACKLOG_CHARS", 1)  # room for one row waiting for its grade
    out = tmp_path / "run"
    with ChatServer("oracle") as server:
        run = Background(config(small_data, out, server, concurrency=2))
        try:
            # One reply waits for its grade; the two next ones wait, with their slots, for room.
            assert wait_for(lambda: server.total_requests == 3)
            time.sleep(1.0)
            assert server.total_requests == 3
        finally:
            release.set()
            run.join()
    assert run.error is None
    assert len(results(out)) == ROWS_OF_SMALL_DATA == server.total_requests


def test_replies_of_a_stopped_run_are_graded_by_the_next_without_sending_again(
    small_data, tmp_path, api_key, monkeypatch
):
    release = held_grading(monkeypatch)
    out, fresh = tmp_path / "run", tmp_path / "fresh"
    with ChatServer("first_needle") as server:
        run = Background(config(small_data, out, server, concurrency=3))
        assert wait_for(lambda: server.total_requests == ROWS_OF_SMALL_DATA)
        assert wait_for(lambda: len(read_journal(out / JOURNAL_NAME)) == ROWS_OF_SMALL_DATA)
        run.cancel()  # Ctrl-C: no grade was written
        assert isinstance(run.error, asyncio.CancelledError)
        assert results(out) == []
        assert len(read_journal(out / JOURNAL_NAME)) == ROWS_OF_SMALL_DATA
        with open(out / JOURNAL_NAME, "a", encoding="utf-8") as handle:
            handle.write('{"file": "x", "row": 3, "reply": {"te')  # a write torn by kill -9
        release.set()

        stats, summary = run_eval(config(small_data, out, server, concurrency=3))
        assert server.total_requests == ROWS_OF_SMALL_DATA  # nothing sent again
        assert stats.resumed == ROWS_OF_SMALL_DATA and stats.sent == 0
        _, fresh_summary = run_eval(config(small_data, fresh, server, concurrency=3))
    assert comparable(results(out)) == comparable(results(fresh))
    assert {k: v for k, v in summary.items() if k != "latency_s"} == {
        k: v for k, v in fresh_summary.items() if k != "latency_s"
    }
    assert 0 < summary["mean_score"] < 1  # first_needle: some rows ask for another needle
    assert not (out / JOURNAL_NAME).exists()


def test_the_journal_forgets_replies_whose_record_is_written(tmp_path):
    """A run killed between writing a record and rewriting the journal: that reply is not pending."""
    key = {"file": "/d.parquet", "row": 0, "digest": "abc", "settings": {"model": "m"}}
    other = key | {"row": 1}
    reply = ChatResult(text="XYZ tapirs", latency_s=0.1, attempts=1)
    journal = ReplyJournal(tmp_path, [])
    journal.write(key, reply)
    journal.write(other, reply)
    journal._writer.close()  # killed: close() never ran
    recorded = key | {"status": "ok", "response": "XYZ tapirs", "bin": "b", "n_needles": 2}
    reopened = ReplyJournal(tmp_path, [recorded])
    assert list(reopened.pending()) == [("/d.parquet", 1)]
    reopened.recorded(other)
    reopened.close()
    assert not (tmp_path / JOURNAL_NAME).exists()
    # A record of another reply text (an earlier send) does not make a newer reply obsolete.
    journal = ReplyJournal(tmp_path, [])
    journal.write(key, reply)
    journal.close()
    assert list(ReplyJournal(tmp_path, [recorded | {"response": "older"}]).pending()) == [("/d.parquet", 0)]


def test_small_data_has_the_rows_these_tests_count(small_data):
    assert len(list(iter_rows(small_data))) == ROWS_OF_SMALL_DATA


def grading_process(item, recipe, *more) -> int:
    """A grader that says which process ran it."""
    return os.getpid()


def test_a_deep_backlog_is_graded_in_worker_processes_and_a_short_one_in_a_thread():
    from mrcr_gen.recipes.openai_mrcr._recipe import RECIPE

    if _pipeline.available_cores() < 2:
        pytest.skip("one core: grading stays in a thread")

    async def grade(pool: _pipeline.GradePool, count: int) -> list[int]:
        return list(await asyncio.gather(*(pool.grade(grading_process, i, RECIPE) for i in range(count))))

    async def both() -> tuple[list[int], list[int]]:
        pool = _pipeline.GradePool()
        try:
            few = await grade(pool, _pipeline.PROCESSES_AFTER_WAITING - 4)
            many = await grade(pool, 4 * _pipeline.PROCESSES_AFTER_WAITING)
            return few, many
        finally:
            pool.close()

    few, many = asyncio.run(both())
    assert set(few) == {os.getpid()}
    # Only those that started before the others queued up ran here; the rest waited for the workers.
    assert many.count(os.getpid()) <= _pipeline.available_cores() < len(many)


def test_as_many_requests_in_flight_as_would_fill_the_backlog_start_the_worker_processes_before_their_replies():
    from mrcr_gen.recipes.openai_mrcr._recipe import RECIPE

    if _pipeline.available_cores() < 2:
        pytest.skip("one core: grading stays in a thread")

    async def graded_after(in_flight: int) -> int:
        pool = _pipeline.GradePool()
        try:
            for count in range(1, in_flight + 1):  # as the runner calls it, once per request sent
                pool.expect(count, grading_process, RECIPE)
            return await pool.grade(grading_process, 0, RECIPE)
        finally:
            pool.close()

    # Fewer: a short run, graded in this process's thread; as many: in a worker, started beforehand.
    assert asyncio.run(graded_after(_pipeline.PROCESSES_AFTER_WAITING - 1)) == os.getpid()
    assert asyncio.run(graded_after(_pipeline.PROCESSES_AFTER_WAITING)) != os.getpid()


def test_a_request_for_a_long_row_starts_the_worker_processes_before_its_reply():
    # Its grade alone takes tens of milliseconds: in this process's thread it would take them
    # from the requests, however few rows the run has.
    from types import SimpleNamespace

    from mrcr_gen.recipes.openai_mrcr._recipe import RECIPE

    if _pipeline.available_cores() < 2:
        pytest.skip("one core: grading stays in a thread")
    half = _pipeline.PROCESSES_FOR_ROW_CHARS // 2
    short = SimpleNamespace(messages=[{"role": "user", "content": "x" * half}, {"role": "assistant"}])
    long = SimpleNamespace(messages=[{"role": "user", "content": "x" * half}] * 2)

    async def graded_after(item: SimpleNamespace) -> int:
        pool = _pipeline.GradePool()
        try:
            pool.expect_row(item, grading_process, RECIPE)
            return await pool.grade(grading_process, item, RECIPE)
        finally:
            pool.close()

    assert asyncio.run(graded_after(short)) == os.getpid()
    assert asyncio.run(graded_after(long)) != os.getpid()


def test_the_worker_processes_start_in_a_thread_not_on_the_event_loop(monkeypatch):
    # Their start blocks for most of a second (the fork server imports the package): on the loop it
    # would stop every request in flight meanwhile.
    from mrcr_gen.recipes.openai_mrcr._recipe import RECIPE

    if _pipeline.available_cores() < 2:
        pytest.skip("one core: grading stays in a thread")
    started_in = []

    def process_workers(recipe, grader):
        started_in.append(threading.current_thread())
        raise OSError("no processes here")  # so the grade falls back to the thread

    monkeypatch.setattr(_pipeline, "_process_workers", process_workers)

    async def run() -> tuple[threading.Thread, int]:
        pool = _pipeline.GradePool()
        try:
            pool.expect(_pipeline.PROCESSES_AFTER_WAITING, grading_process, RECIPE)
            return threading.current_thread(), await pool.grade(grading_process, 0, RECIPE)
        finally:
            pool.close()

    loop_thread, graded_by = asyncio.run(run())
    assert len(started_in) == 1 and started_in[0] is not loop_thread
    assert graded_by == os.getpid()  # workers that cannot start: graded in this process's thread


HANGING_GRADES = """
import sys, threading
from mrcr_gen.eval import _session
_session.scored_record = lambda *args: threading.Event().wait()  # never graded
from mrcr_gen.cli import eval_main
sys.argv[0] = "mrcr-eval"
eval_main()
"""


def test_replies_survive_kill_9_before_their_grade(small_data, tmp_path, api_key):
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    args = [str(small_data), "--model", "test-model", "--out", str(out), "-c", "4", "--quiet"]
    with ChatServer("oracle") as server:
        args += ["--base-url", server.base_url]
        hung = subprocess.Popen([sys.executable, "-c", HANGING_GRADES, *args], env=env, stderr=subprocess.DEVNULL)
        try:
            assert wait_for(lambda: len(read_journal(out / JOURNAL_NAME)) == ROWS_OF_SMALL_DATA, timeout=120)
        finally:
            hung.send_signal(signal.SIGKILL)
            hung.wait()
        assert [r for r in results(out) if r.get("status") == "ok"] == []
        rerun = subprocess.run(
            [sys.executable, "-c", "from mrcr_gen.cli import eval_main; eval_main()", *args],
            env=env, capture_output=True, text=True, timeout=300,
        )
        assert rerun.returncode == 0, rerun.stderr
        assert server.total_requests == ROWS_OF_SMALL_DATA  # graded from the journal, not sent again
    records = results(out)
    assert len(records) == ROWS_OF_SMALL_DATA and all(r["status"] == "ok" and r["score"] == 1.0 for r in records)
    assert not (out / JOURNAL_NAME).exists()


def test_the_grading_processes_draw_the_report_plots_byte_for_byte_as_this_process(
    small_data, tmp_path, api_key, monkeypatch
):
    # A long run's grading processes draw them side by side at its end (matplotlib imported once,
    # by their fork server, not by this process after the last reply): the same files.
    from mrcr_gen import write_report
    from mrcr_gen.recipes.openai_mrcr._recipe import RECIPE

    if _pipeline.available_cores() < 2:
        pytest.skip("one core: no grading processes")
    out = tmp_path / "run"
    with ChatServer("first_needle") as server:  # scores of all sorts: every plot has something to draw
        run_eval(config(small_data, out, server))
    plots = ("plot.png", "plot_outcomes.png", "plot_ordinals.png", "plot_depth.png")
    monkeypatch.setattr(_pipeline, "_workers", None)  # none: drawn here
    here = write_report(out)
    drawn_here = {name: (out / name).read_bytes() for name in plots}
    for name in plots:
        (out / name).unlink()
    _pipeline._process_workers(RECIPE, real_scored_record)  # as a long run starts them
    sent = []

    class Executor(_pipeline.ProcessPoolExecutor):
        def submit(self, function, *args):
            sent.append(function)
            return super().submit(function, *args)

    monkeypatch.setattr(_pipeline, "ProcessPoolExecutor", Executor)
    assert write_report(out) == here
    assert len(sent) == len(plots)
    assert {name: (out / name).read_bytes() for name in plots} == drawn_here


def test_the_heap_is_frozen_for_the_run_only_and_a_program_s_own_freeze_is_left_alone():
    import gc

    if gc.get_freeze_count():
        pytest.skip("this test process froze its heap")
    with _pipeline.frozen_heap():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0  # thawed: what died in the run can be collected
    gc.freeze()
    try:
        with _pipeline.frozen_heap():
            pass
        assert gc.get_freeze_count() > 0  # the program's own: not thawed
    finally:
        gc.unfreeze()


def test_plots_whose_processes_cannot_start_are_drawn_here(tmp_path, monkeypatch):
    from mrcr_gen.recipes.openai_mrcr._recipe import RECIPE

    if _pipeline.available_cores() < 2:
        pytest.skip("one core: no grading processes")
    _pipeline._process_workers(RECIPE, real_scored_record)

    class Executor(_pipeline.ProcessPoolExecutor):
        def submit(self, function, *args):
            raise OSError("no processes here")

    monkeypatch.setattr(_pipeline, "ProcessPoolExecutor", Executor)
    drawn = tmp_path / "drawn"
    _pipeline.run_side_by_side([(drawn.mkdir, ()), ((drawn / "here").mkdir, ())])
    assert (drawn / "here").is_dir()
