"""The leanest loops a user could write in ten lines: the baselines of `bench_counts_once.py`.

    python bench/minimal_loop.py eval --base-url http://127.0.0.1:PORT/v1 FILE.parquet ...
    python bench/minimal_loop.py v2 FILE.csv

`eval`: read the parquet with pandas, count each row's messages with tiktoken's o200k_base, POST
the JSON with urllib to the server (one request at a time), grade the reply as the dataset card
does. `v2`: read the CSV with pandas and count every row's `queries` (and its answer's writing)
with tiktoken, one thread. Each prints a RESULT line of JSON.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from difflib import SequenceMatcher

MODEL = "test-model"
WINDOW = 1048576


def o200k():
    import tiktoken

    try:
        return tiktoken.get_encoding("o200k_base")
    except Exception:  # offline: the same encoding from the vocabulary mrcr-gen ships
        from mrcr_gen import o200k

        return o200k()


def eval_loop(base_url: str, paths: list[str]) -> dict:
    import pandas as pd

    enc = o200k()
    scores = []
    for path in paths:
        for row in pd.read_parquet(path).itertuples():
            messages = json.loads(row.prompt)
            if sum(len(enc.encode(m["content"], disallowed_special=())) for m in messages) > WINDOW:
                continue
            body = json.dumps({"model": MODEL, "messages": messages}).encode()
            headers = {"Content-Type": "application/json", "Authorization": "Bearer EMPTY"}
            request = urllib.request.Request(f"{base_url}/chat/completions", data=body, headers=headers)
            with urllib.request.urlopen(request) as reply:
                text = json.loads(reply.read())["choices"][0]["message"]["content"]
            prefix = row.random_string_to_prepend
            ok = text.startswith(prefix)
            scores.append(SequenceMatcher(None, text[len(prefix) :], row.answer[len(prefix) :]).ratio() if ok else 0.0)
    return {"rows": len(scores), "mean_score": sum(scores) / max(len(scores), 1)}


def v2_loop(path: str) -> dict:
    import pandas as pd

    enc = o200k()
    frame = pd.read_csv(path)
    context = [len(enc.encode(q, disallowed_special=())) for q in frame["queries"]]
    answers = [len(enc.encode(a[12:], disallowed_special=())) for a in frame["answer"]]
    return {"context_len": context, "answer_token_count": answers, "rows": len(frame)}


if __name__ == "__main__":
    kind, *rest = sys.argv[1:]
    if kind == "eval":
        result = eval_loop(rest[1], rest[2:]) if rest[:1] == ["--base-url"] else sys.exit("eval needs --base-url URL")
    else:
        result = v2_loop(rest[0])
    print("RESULT " + json.dumps(result), flush=True)
