"""The per-row failure analysis on MRCR v2 rows, against the tests' own re-solver."""

from __future__ import annotations

from mrcr_gen.eval._analysis import analyse_reply
from mrcr_gen.recipes.mrcr_v2._analysis import transcript_of as v2_transcript_of
from mrcr_gen.recipes.mrcr_v2._rows import iter_records
from tests.support.v2_resolve import solve


def test_mrcr_v2_needles_target_and_distractors_agree_with_the_resolver(v2_data):
    for path in sorted(v2_data.rglob("*.csv")):
        for record in list(iter_records(path))[:3]:
            queries = record["queries"]
            solved = solve(queries)
            transcript = v2_transcript_of(queries)
            assert transcript is not None and transcript.prefix == solved.hash
            assert [transcript.writings[k].index for k in transcript.needles] == solved.needle_turns
            assert [w.text for w in transcript.writings] == [t[1] for t in solved.turns]
            for ordinal, writing in enumerate(solved.writings, start=1):
                analysis = analyse_reply(solved.hash + writing, transcript)
                assert analysis.returned_ordinal == ordinal and analysis.match_ratio == 1.0
                assert analysis.returned == ("target" if ordinal == solved.ordinal else "other_needle")
            offset = solved.turns[solved.needle_turns[solved.ordinal - 1]][2]
            assert analyse_reply(record["answer"], transcript).target_depth == round(offset / len(queries), 4)
            filler = next(i for i in range(len(solved.turns)) if i not in solved.needle_turns)
            analysis = analyse_reply(solved.hash + solved.turns[filler][1], transcript)
            assert (analysis.returned, analysis.returned_index) == ("distractor", filler)


def test_an_mrcr_v2_run_stores_the_analysis_of_each_reply(v2_csv, tmp_path, monkeypatch):
    import json

    from mrcr_gen import run_eval
    from mrcr_gen.eval import EvalConfig
    from tests.support.chat_server import ChatServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-v2")
    with ChatServer("first_needle") as server:
        _, summary = run_eval(EvalConfig(data=[str(v2_csv)], model="m", out=str(tmp_path / "run"), base_url=server.base_url))
    records = {r["row"]: r for r in map(json.loads, (tmp_path / "run" / "results.jsonl").read_text().splitlines())}
    for index, record in enumerate(iter_records(v2_csv)):
        solved = solve(record["queries"])
        analysis = records[index]["analysis"]
        assert (analysis["prefix"], analysis["returned_ordinal"], analysis["target_ordinal"]) == ("ok", 1, solved.ordinal)
        assert analysis["returned"] == ("target" if solved.ordinal == 1 else "other_needle")
    assert summary["failures"]["analysed_rows"] == len(records)
