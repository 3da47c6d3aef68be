"""Issue 34 items 1, 4, 8, 9 and 11 (files): `mrcr-eval --batch` reruns never pay twice nor lose a
paid reply, recover from batches and files the server no longer has, refuse an unknown model
before anything is uploaded, and say when batches are still running (summary.json, `report`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mrcr_gen.cli import eval_main
from mrcr_gen.cli._common import EXIT_PENDING
from tests.support.chat_server import BatchBehaviour, ChatServer, Fault

from .test_eval_cli import call

NARROWER = {"needles": ["--needles", "2"], "per-bin": ["--per-bin", "1"], "limit": ["--limit", "3"]}


def command(data: Path, out: Path, server: ChatServer, *more: str) -> list[str]:
    return [str(data), "-m", "test-model", "--base-url", server.base_url, "-o", str(out), "--batch",
            "--poll-interval", "0.01", "--price-in", "1", "--price-out", "4", "-q", *more]  # fmt: skip


def summary_of(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def online_summary(data: Path, tmp_path: Path, capsys) -> dict:
    out = tmp_path / "online"
    with ChatServer("oracle", cached_share=0.5) as server:
        args = [str(data), "-m", "test-model", "--base-url", server.base_url, "-o", str(out), "-q"]
        assert call(eval_main, [*args, "--price-in", "1", "--price-out", "4"], capsys)[0] == 0
    return summary_of(out)


def same_scores(summary: dict, reference: dict) -> None:
    for key in ("mean_score", "n_rows", "n_scored", "cells", "complete"):
        assert summary[key] == reference[key], key
    assert summary["usage"]["prompt_tokens"] == reference["usage"]["prompt_tokens"]
    assert summary["usage"]["completion_tokens"] == reference["usage"]["completion_tokens"]


@pytest.mark.parametrize("narrower", sorted(NARROWER))
def test_a_narrower_rerun_keeps_the_replies_it_does_not_select(narrower, small_data, tmp_path, capsys, api_key):
    """Item 1: `--no-wait` of every row, then a narrower rerun collects the batch and grades its own
    rows; the replies of the other rows stay in the folder, and the full rerun grades them, sending
    nothing again: 12 requests billed for 12 rows."""
    out = tmp_path / "run"
    with ChatServer("oracle", cached_share=0.5, batches=BatchBehaviour(hold=True)) as server:
        assert call(eval_main, command(small_data, out, server, "--no-wait"), capsys)[0] == 1
        server.release_batches()
        code, _, err = call(eval_main, command(small_data, out, server, *NARROWER[narrower]), capsys)
        assert code == 0, err
        narrow = summary_of(out)
        assert narrow["complete"] and narrow["n_rows"] < 12
        code, _, err = call(eval_main, command(small_data, out, server), capsys)
        assert code == 0, err
        assert server.stats()["batch_requests"] == 12 and server.stats()["batches_created"] == 1
    same_scores(summary_of(out), online_summary(small_data, tmp_path, capsys))


def test_a_narrower_rerun_after_a_run_that_never_uploaded_sends_only_its_rows(small_data, tmp_path, capsys, api_key):
    """Item 1: a run that wrote its batch file and stopped before the upload (here: the upload refused
    and no retry), rerun with `--limit 3`, uploads its own 3 rows, not the stale 12-row file; the
    full rerun then sends the other 9. Every row billed once."""
    out = tmp_path / "run"
    stop = BatchBehaviour(api_faults={"upload": {1: Fault.server_error()}})
    with ChatServer("oracle", batches=stop) as server:
        code, _, err = call(eval_main, command(small_data, out, server, "--max-retries", "0"), capsys)
        assert code == 2 and "rerun to continue" in err
        assert server.stats()["batches_created"] == 0
        server.batch_behaviour = BatchBehaviour()
        assert call(eval_main, command(small_data, out, server, "--limit", "3"), capsys)[0] == 0
        assert server.stats()["batch_requests"] == 3
        assert call(eval_main, command(small_data, out, server), capsys)[0] == 0
        assert server.stats()["batch_requests"] == 12
    assert summary_of(out)["complete"] and summary_of(out)["n_rows"] == 12


def test_a_vanished_batch_is_sent_again_once_with_one_warning(small_data, tmp_path, capsys, api_key):
    """Item 4: the server no longer has a batch the folder records (404): the rerun says so in one
    warning line, sends its rows again in a new batch (once) and completes."""
    out = tmp_path / "run"
    with ChatServer("oracle", batches=BatchBehaviour(hold=True)) as server:
        assert call(eval_main, command(small_data, out, server, "--no-wait"), capsys)[0] == 1
        server.batches.clear()
        server.files.clear()
        server.release_batches()
        code, _, err = call(eval_main, command(small_data, out, server), capsys)
        assert code == 0, err
        warnings = [line for line in err.splitlines() if "gone from the server" in line]
        assert len(warnings) == 1 and warnings[0].startswith("warning: part-0001: batch batch_1 is gone")
        assert server.stats()["batch_requests"] == 24 and server.api_calls["create"] == 2
        assert call(eval_main, command(small_data, out, server), capsys)[0] == 0
        assert server.stats()["batch_requests"] == 24
    assert summary_of(out)["complete"] and summary_of(out)["mean_score"] == 1.0


def test_an_uploaded_file_that_vanished_before_its_batch_is_uploaded_again(small_data, tmp_path, capsys, api_key):
    """Item 4: a run stopped between the upload and the batch; the file is gone when it is rerun:
    the part is uploaded again from the folder and made a batch, not an exit 2 on every rerun."""
    out = tmp_path / "run"
    stop = BatchBehaviour(api_faults={"create": {1: Fault.server_error()}})
    with ChatServer("oracle", batches=stop) as server:
        assert call(eval_main, command(small_data, out, server, "--max-retries", "0"), capsys)[0] == 2
        server.files.clear()
        server.batch_behaviour = BatchBehaviour()
        code, _, err = call(eval_main, command(small_data, out, server), capsys)
        assert code == 0, err
        assert "is gone (404); uploaded again" in err
        assert server.stats()["batch_requests"] == 12
    assert summary_of(out)["complete"]


def test_an_unknown_model_is_refused_before_anything_is_uploaded(small_data, tmp_path, capsys, api_key):
    """Item 8: as online, one line and exit 2, and nothing uploaded (the account's model list)."""
    out = tmp_path / "run"
    with ChatServer("oracle", known_models=["test-model"]) as server:
        args = command(small_data, out, server)
        args[args.index("test-model")] = "no-such-model"
        code, _, err = call(eval_main, args, capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "no-such-model" in err
        assert server.api_calls["upload"] == 0 and not server.batch_requests


def test_batch_lines_refused_for_good_stop_the_run_and_are_not_sent_again(small_data, tmp_path, capsys, api_key):
    """Item 8: a server whose model list says nothing, whose batch lines refuse the model (HTTP 400
    naming it): exit 2 with one line, nothing recorded; a rerun says so again and submits nothing."""
    out = tmp_path / "run"
    refuse = BatchBehaviour(faults=lambda number, body: Fault("unknown_model"))
    with ChatServer("oracle", batches=refuse) as server:
        for _ in range(2):
            code, _, err = call(eval_main, command(small_data, out, server), capsys)
            assert code == 2 and "refused" in err, err
            assert server.stats()["batches_created"] == 1 and server.stats()["batch_requests"] == 12


def test_pending_batches_are_in_the_summary_and_report_exits_3(small_data, tmp_path, capsys, api_key):
    """Item 9: while batches run, summary.json says how many rows of each bin are still out and is
    not complete; `mrcr-eval report` says so and exits with EXIT_PENDING (3)."""
    out = tmp_path / "run"
    with ChatServer("oracle", batches=BatchBehaviour(hold=True)) as server:
        assert call(eval_main, command(small_data, out, server, "--no-wait"), capsys)[0] == 1
        summary = summary_of(out)
        assert summary["complete"] is False and summary["n_rows"] == 0
        assert summary["pending"]["rows"] == 12 and summary["pending"]["batches"] == 1
        assert sum(summary["pending"]["by_bin"].values()) == 12
        code, _, err = call(eval_main, ["report", str(out)], capsys)
        assert code == EXIT_PENDING == 3 and "12 rows are in 1 Batch API batches still running" in err
        server.release_batches()
        assert call(eval_main, command(small_data, out, server), capsys)[0] == 0
        assert summary_of(out)["pending"] is None and summary_of(out)["complete"]
        assert call(eval_main, ["report", str(out)], capsys)[0] == 0


def test_the_batches_files_are_deleted_from_the_account_once_downloaded(small_data, tmp_path, capsys, api_key):
    """Item 11: input, output and error files are deleted once the run folder holds them;
    `--keep-batch-files` keeps them; the option is refused without --batch."""
    with ChatServer("oracle", batches=BatchBehaviour(expire_after=6)) as server:
        assert call(eval_main, command(small_data, tmp_path / "run", server), capsys)[0] == 1
        assert all(f.get("_gone") for f in server.files.values()) and server.api_calls["delete"] == 3
        assert (tmp_path / "run" / "batches" / "part-0001.output.jsonl").is_file()
        args = command(small_data, tmp_path / "kept", server, "--keep-batch-files")
        assert call(eval_main, args, capsys)[0] == 1
        assert sum(not f.get("_gone") for f in server.files.values()) == 3 and server.api_calls["delete"] == 3
        # a rerun without the option (or after a kill between collecting and deleting) deletes them
        kept = [f for f in server.files if not server.files[f].get("_gone")]
        assert call(eval_main, command(small_data, tmp_path / "kept", server), capsys)[0] == 0  # expired rows resent
        assert all(f.get("_gone") for f in server.files.values()) and all(f in server.files for f in kept)
        deleted = server.api_calls["delete"]
        assert call(eval_main, command(small_data, tmp_path / "kept", server), capsys)[0] == 0
        assert server.api_calls["delete"] == deleted  # each file once
    online = [str(small_data), "-m", "test-model", "-o", str(tmp_path / "x"), "--keep-batch-files"]
    code, _, err = call(eval_main, online, capsys)
    assert code == 2 and "--keep-batch-files needs --batch" in err
