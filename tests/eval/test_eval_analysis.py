"""The failure analysis through the commands: stored per row by mrcr-eval, added to older runs by
`mrcr-eval report`, summed up in summary.json with its plots, and shown by `mrcr-eval view`,
`compare --html` and `mrcr-grade --html`."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq

from mrcr_gen import iter_rows, run_eval
from mrcr_gen.cli._eval import eval_main
from mrcr_gen.cli._grade import grade_main
from mrcr_gen.eval import EvalConfig
from mrcr_gen.recipes.openai_mrcr._models import QUERY_PATTERN
from tests.support.chat_server import ChatServer, oracle, parse_query

PNG = b"\x89PNG\r\n\x1a\n"


def config(data, out, server, **kwargs) -> EvalConfig:
    return EvalConfig(data=[str(p) for p in data], model="test-model", out=str(out), base_url=server.base_url, **kwargs)


def results(out) -> list[dict]:
    """The records in file order (rows finish in any order)."""
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def by_row(out) -> list[dict]:
    return sorted(results(out), key=lambda r: r["row"])


def call(main, args, capsys) -> tuple[int, str, str]:
    try:
        main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    else:
        code = 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def embedded_samples(html: str) -> list[dict]:
    start = html.index('<script type="application/json"')
    start = html.index(">", start) + 1
    return json.loads(html[start : html.index("</script>", start)])


def test_each_row_stores_what_the_reply_returned(small_data, tmp_path, api_key):
    with ChatServer("first_needle") as server:
        _, summary = run_eval(config([small_data], tmp_path / "run", server))
    for record, row in zip(by_row(tmp_path / "run"), iter_rows(small_data), strict=True):
        asked = int(QUERY_PATTERN.match(json.loads(row.prompt)[-1]["content"])["ordinal"])
        analysis = record["analysis"]
        assert (analysis["prefix"], analysis["target_ordinal"], analysis["returned_ordinal"]) == ("ok", asked, 1)
        assert analysis["returned"] == ("target" if asked == 1 else "other_needle")
        assert analysis["match_ratio"] == 1.0 and 0 < analysis["target_depth"] < 1
    failures = summary["failures"]
    assert failures["analysed_rows"] == 12
    for matrix in failures["ordinal_confusion"]:  # every reply returned the first needle
        assert all(row[1:] == [0] * len(row[1:]) for row in matrix["counts"])
        assert sum(row[0] for row in matrix["counts"]) == 4
    for name in ("plot_depth.png", "plot_ordinals.png", "plot_outcomes.png"):
        assert (tmp_path / "run" / name).read_bytes()[:8] == PNG


def test_report_adds_the_analysis_to_an_older_run_once(small_data, tmp_path, api_key, capsys):
    run = tmp_path / "run"
    with ChatServer("first_needle") as server:
        _, fresh = run_eval(config([small_data], run, server))
    stored = results(run)
    older = [{k: v for k, v in r.items() if k != "analysis"} for r in stored]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in older))
    code, _, _ = call(eval_main, ["report", str(run)], capsys)
    assert code == 0
    after = results(run)
    assert len(after) == 2 * len(stored)
    assert [r["analysis"] for r in after[len(stored) :]] == [r["analysis"] for r in stored]
    assert json.loads((run / "summary.json").read_text()) == fresh  # what the fresh run reported
    assert call(eval_main, ["report", str(run)], capsys)[0] == 0
    assert len(results(run)) == len(after)  # nothing more to add


def test_view_writes_one_page_with_every_row(small_data, tmp_path, api_key, capsys):
    run = tmp_path / "run"
    with ChatServer("first_needle") as server:
        run_eval(config([small_data], run, server))
    code, out, _ = call(eval_main, ["view", str(run)], capsys)
    assert code == 0 and out.strip() == str(run / "report.html")
    page = (run / "report.html").read_text()
    samples = embedded_samples(page)
    rows = list(iter_rows(small_data))
    assert [s["row"] for s in samples] == list(range(len(rows)))
    for sample, row in zip(samples, rows, strict=True):
        assert sample["expected"] == row.answer and sample["query"] == json.loads(row.prompt)[-1]["content"]
        assert sample["outcome"] in ("target", "other_needle") and sample["reply"].startswith(row.random_string_to_prepend)
    assert "http://" not in page.split('<script type="application/json"')[0]
    assert call(eval_main, ["compare", str(run), str(run), "--html", str(tmp_path / "c.html")], capsys)[0] == 0
    assert (tmp_path / "c.html").read_text().count("data:image/png;base64,") >= 8
    assert call(eval_main, ["view", str(tmp_path / "nowhere")], capsys)[0] == 2


def test_grade_html_shows_the_graded_replies(small_data, tmp_path, capsys):
    rows = list(iter_rows(small_data))
    responses = tmp_path / "r.jsonl"
    lines = [{"row": i, "response": r.answer if i % 2 else "not in the conversation"} for i, r in enumerate(rows)]
    responses.write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, _, _ = call(grade_main, [str(small_data), str(responses), "--html", str(tmp_path / "g.html")], capsys)
    assert code == 0
    samples = embedded_samples((tmp_path / "g.html").read_text())
    assert [s["outcome"] for s in samples] == ["not_in_context" if i % 2 == 0 else "target" for i in range(len(rows))]
    assert [s["expected"] for s in samples] == [r.answer for r in rows]


def test_bad_run_folders_are_one_line_and_exit_2(tmp_path, capsys):
    shapes = {"other-json": '{"x": 1}\n', "no-bin": '{"file": "f", "row": 0, "status": "ok"}\n', "text": "not json\n"}
    for name, text in shapes.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.jsonl").write_text(text)
        for command in ("view", "report"):
            code, out, err = call(eval_main, [command, str(tmp_path / name)], capsys)
            assert code == 2 and err.count("\n") == 1 and "holds no result records" in err, (name, command, err)
    (tmp_path / "empty").mkdir()
    code, _, err = call(eval_main, ["view", str(tmp_path / "empty")], capsys)
    assert code == 2 and "no results.jsonl" in err and "Traceback" not in err


def run_on_a_copy(small_data, tmp_path):
    """(the copy of the data, the run folder) of an oracle run on a copy of `small_data`."""
    data = tmp_path / "data.parquet"
    shutil.copy(small_data, data)
    run = tmp_path / "run"
    with ChatServer("oracle") as server:
        run_eval(config([data], run, server))
    return data, run


def test_a_run_whose_data_is_gone_is_still_shown(small_data, tmp_path, api_key, capsys):
    data, run = run_on_a_copy(small_data, tmp_path)
    older = [{k: v for k, v in r.items() if k != "analysis"} for r in results(run)]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in older))
    data.unlink()
    assert call(eval_main, ["view", str(run)], capsys)[0] == 0
    samples = embedded_samples((run / "report.html").read_text())
    assert len(samples) == 12 and {s["outcome"] for s in samples} == {"unanalysed"}
    assert all(s["expected"] == "" and s["reply"] for s in samples)
    assert call(eval_main, ["report", str(run)], capsys)[0] == 0  # nothing can be added: still a report


def upper_late_or_repeated(messages: list, body: dict) -> str:
    """Messy but right replies: the target in upper case, with its prefix written last, or twice."""
    right = oracle(messages, body)
    prefix = parse_query(messages)[0]
    text = right[len(prefix) :]
    return [prefix + text.upper(), text + "\n" + prefix, prefix + text + "\n" + text][len(messages) % 3]


def test_messy_right_replies_are_the_target_and_the_score_stays_official(small_data, tmp_path, api_key):
    with ChatServer(upper_late_or_repeated) as server:
        _, summary = run_eval(config([small_data], tmp_path / "run", server))
    records = by_row(tmp_path / "run")
    assert {r["analysis"]["returned"] for r in records} == {"target"}
    flags = {(r["analysis"]["prefix"], r["analysis"]["case_changed"], r["analysis"]["repeated"]) for r in records}
    assert flags <= {("ok", True, False), ("late", False, False), ("ok", False, True)}
    late = [r for r in records if r["analysis"]["prefix"] == "late"]
    assert all(r["score"] == 0.0 and r["analysis"]["before_prefix"] for r in late)  # the official rule: 0
    cells = summary["failures"]["outcomes"]
    assert sum(c["crossed"]["target"]["late"] for c in cells) == len(late)


def test_a_run_without_prefixes_is_told_from_a_right_one(small_data, tmp_path, api_key, capsys):
    """The commonest real failure: the right writing without its random string (score 0)."""
    for policy in ("oracle", "no_prefix"):
        with ChatServer(policy) as server:
            run_eval(config([small_data], tmp_path / policy, server))
    code, out, _ = call(eval_main, ["compare", str(tmp_path / "oracle"), str(tmp_path / "no_prefix"), "--json"], capsys)
    right, dropped = json.loads(out)
    assert (right["prefix_kept"], right["target_with_prefix"], right["target"]) == (1.0, 1.0, 1.0)
    assert (dropped["prefix_kept"], dropped["target_with_prefix"], dropped["target"]) == (0.0, 0.0, 1.0)
    code, out, _ = call(eval_main, ["report", str(tmp_path / "no_prefix")], capsys)
    assert code == 0 and "What the replies returned" in out and "tgt-pfx" in out
    page_path = tmp_path / "c.html"
    args = ["compare", str(tmp_path / "oracle"), str(tmp_path / "no_prefix"), "--html", str(page_path)]
    assert call(eval_main, args, capsys)[0] == 0
    page = page_path.read_text()
    assert 'id="leaderboard"' in page and "beyond noise" in page and "100.0%" in page and "0.0%" in page
    assert "12 rows changed" in page  # every row: target with its prefix -> target without it
    assert 'alt="overlay"' in page


def test_view_and_compare_warn_when_data_is_moved_or_changed(small_data, tmp_path, api_key, capsys):
    data, run = run_on_a_copy(small_data, tmp_path)
    data.rename(tmp_path / "moved.parquet")
    code, _, err = call(eval_main, ["view", str(run)], capsys)
    assert code == 0 and err.count("warning: ") == 1 and f"data file {data} is missing: rows 0, 1, 2" in err
    page = (run / "report.html").read_text()
    assert 'id="warnings"' in page and "is missing: rows 0, 1, 2" in page
    assert all(s["context_lost"] for s in embedded_samples(page))
    table = pq.read_table(small_data)
    pq.write_table(table.take(list(reversed(range(table.num_rows)))), data)  # the same path, rows changed
    code, _, err = call(eval_main, ["compare", str(run), str(run), "--html", str(tmp_path / "c.html")], capsys)
    assert code == 0 and err.count("warning: ") == 2 and f"data file {data} changed since the run" in err
    compare_page = (tmp_path / "c.html").read_text()
    assert compare_page.count('class="banner"') >= 2 and "changed since the run" in compare_page
