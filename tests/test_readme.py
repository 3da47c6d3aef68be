"""Every command documented in README.md and in the docs (docs/**/*.md) is run (the rule typer's
docs follow).

The commands are read from the ```bash blocks of README.md and of every page under docs/:
continuation lines (ending in ``\\``) are joined, comments dropped, ``&&`` chains split, and
every command that starts with ``mrcr-gen``, ``mrcr-validate``, ``mrcr-grade``, ``mrcr-eval`` or
``inspect`` (Inspect's CLI, with this project's tasks) becomes one test, named by the file and line of every place it is written that way (an example
the README shares with the docs is one test: ``README.md:25 docs/generating.md:4 mrcr-gen ...``),
run with bash in a temporary working directory shared by the module (one per xdist worker), as a
reader following the README and the docs in one folder would. Setup
commands (``pip``, ``python3 -m venv``, ``.``, ``export``, ``vllm serve``, ``vllm run-batch``, ``huggingface-cli``,
``ls``, ``ray start``/``ray job submit``, ``inspect view``, ``export LOCAL_API_KEY=...``, the pytest line, the benchmarks' ``python bench/...``
and ``mkdocs serve``/``build``, which tests/test_docs.py runs) are recognised and not run;
anything else in a bash block fails `test_every_bash_line_is_classified`, so a new example can't
escape. Each command must match exactly one rule of `RULES`, which says what it needs first (a
setup below, or another documented command whose output it uses), its exit code and what it must
produce.

Scaling (`scale`) rewrites only these parts of a command, everything else is run verbatim:

============================================  ==============================================
documented text                               run as
============================================  ==============================================
``--samples N``                               ``--samples 1``
``--bin all`` / ``--bin N`` (any N)           ``--bin 8192`` (repeats collapsed to one)
``mrcr-gen`` generation without ``--bin``     ``... --bin 8192`` appended
(or ``--tokens``) / without ``--samples``     ``... --samples 1`` appended
``mrcr-gen pool build``/``export-requests``  ``... --entities 3`` appended (240 requests, not 4,600)
without ``--entities``
``--base-url http://localhost:8000/v1``       ``--base-url <the test chat server>``
``-T bins=N`` (``inspect eval``)              ``-T bins=8192``
============================================  ==============================================

What the examples assume is provided here: ``mrcr/`` in the official openai/mrcr layout
(``mrcr/{2,4,8}needle/{n}needle_{0,1}.parquet``, generated on the 8192 bin), ``other/*.parquet``,
``bad.parquet`` (a generated file with one row's answer swapped for a distractor writing),
``POOL.parquet`` (harvested from ``mrcr/``), ``responses.jsonl`` (the right answers of
``mrcr/2needle/2needle_0.parquet``), ``results.jsonl`` (what ``vllm run-batch`` writes for the
documented ``requests.jsonl``: the test server's answers as its output lines), ``pool-results.jsonl``
(the same for ``pool-requests.jsonl``). The Hugging Face Hub is a small fake Hub on 127.0.0.1
(tests/support/hub_server.py, through ``HF_ENDPOINT`` and a private ``HF_HOME``) serving ``mrcr/``
as the dataset ``openai/mrcr`` and, as the model ``Qwen/Qwen2.5-7B-Instruct``, a tokenizer trained
in the test (tests/support/tiny_tokenizer.py) with a chat template. Commands that call a model talk to the project's own
OpenAI-compatible server (tests/support/chat_server.py): it solves MRCR queries (``oracle``) and
answers plain asks with varied text (tests/pool/writer_server.py), through ``OPENAI_BASE_URL``
and a fake ``OPENAI_API_KEY``; ``MRCR_GEN_CACHE`` points into the temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.pool.writer_server import writer_policy
from tests.support.chat_server import ChatServer, memorized, oracle
from tests.support.hub_server import FakeHub
from tests.support.tiny_tokenizer import write_tiny_tokenizer

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DEFAULT_MRCR_REVISION = "f4c69fae7cf81f7ca26b9fee34b392a50f6b8a1d"  # what `inspect eval mrcr_gen/mrcr` reads by default
DOCS = ROOT / "docs"
CLIS = ("mrcr-gen", "mrcr-validate", "mrcr-grade", "mrcr-eval", "inspect")
API_KEY = "sk-readme-test-0f9e8d7c6b5a"
LOCAL_URL = "http://localhost:8000/v1"
TIMEOUT = 300

# Lines of a bash block that are setup, not mrcr-gen usage: recognised, never run.
IGNORED = (
    re.compile(r"^python3? -m venv\b"),
    re.compile(r"^(\.|source) \S*activate$"),
    re.compile(r"^pip install\b"),
    re.compile(r"^python -m pytest\b"),
    re.compile(r"^export OPENAI_API_KEY="),
    re.compile(r"^vllm (serve|run-batch)\b"),  # run-batch: results.jsonl is made by the `vllm-results` setup
    re.compile(r"^huggingface-cli download\b"),
    re.compile(r"^ls\b"),
    re.compile(r"^ray (start|job submit)\b"),  # a real cluster; --engine ray is tested in tests/engines
    re.compile(r"^python bench/bench_\w+\.py\b"),  # minutes on an idle machine: run by hand
    re.compile(r"^mkdocs (serve|build)\b"),  # tests/test_docs.py builds the site
    re.compile(r"^export LOCAL_API_KEY="),  # Inspect's openai-api/local provider: set by Workspace.env
    re.compile(r"^inspect view\b"),  # a web server; tests/inspect reads the logs it would show
)


# --------------------------------------------------------------------------- extraction


def _split_top_level(text: str, separator: str) -> list[str]:
    """Split at `separator` outside quotes; a `#` after whitespace outside quotes ends the text."""
    parts, current, quote, i = [], [], None, 0
    while i < len(text):
        char = text[i]
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or text[i - 1].isspace()):
            break
        elif text.startswith(separator, i):
            parts.append("".join(current))
            current, i = [], i + len(separator)
            continue
        elif char.isspace() and (not current or current[-1] == " "):
            i += 1
            continue
        current.append(" " if char.isspace() and not quote else char)
        i += 1
    parts.append("".join(current))
    return [p.strip() for p in parts]


@dataclass(frozen=True)
class Command:
    text: str  # as documented (one line, comments dropped), without a `| ...` pipe
    pipe: str | None  # e.g. "jq '.summary.by_check'"
    where: tuple[str, ...]  # "FILE:LINE" of its first line wherever it is documented, FILE relative to the repository

    @property
    def id(self) -> str:
        full = f"{' '.join(self.where)} {self.text if self.pipe is None else f'{self.text} | {self.pipe}'}"
        return full if len(full) <= 120 else full[:117] + "..."


def documents() -> dict[str, str]:
    """README.md and every page under docs/, by path relative to the repository."""
    paths = [README, *sorted(DOCS.rglob("*.md"))]
    return {str(path.relative_to(ROOT)): path.read_text() for path in paths}


def bash_lines(text: str, name: str) -> list[tuple[str, str]]:
    """("FILE:LINE", command) for every command of every ```bash block of one document."""
    found = []
    for match in re.finditer(r"^```bash\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        first = text.count("\n", 0, match.start(1)) + 1  # the line number of the block's first line
        pending, start = "", first
        for number, raw in enumerate(match.group(1).splitlines(), first):
            if not pending:
                start = number
            if raw.endswith("\\"):
                pending += raw[:-1] + " "
                continue
            line, pending = pending + raw, ""
            for part in _split_top_level(line, "&&"):
                part = part.strip()
                if part:
                    found.append((f"{name}:{start}", part))
    return found


def all_bash_lines() -> list[tuple[str, str]]:
    return [found for name, text in documents().items() for found in bash_lines(text, name)]


def is_ignored(text: str) -> bool:
    return any(p.search(text) for p in IGNORED)


def documented_commands() -> list[Command]:
    """Every distinct command, with the places it is documented (written the same way)."""
    places: dict[tuple[str, str | None], list[str]] = {}
    for where, text in all_bash_lines():
        if text.split()[0] in CLIS and not is_ignored(text):
            left, *pipes = _split_top_level(text, "|")
            assert len(pipes) <= 1, f"{where}: more than one pipe in {text!r}"
            places.setdefault((left.strip(), pipes[0].strip() if pipes else None), []).append(where)
    return [Command(text, pipe, tuple(where)) for (text, pipe), where in places.items()]


COMMANDS = documented_commands()


# --------------------------------------------------------------------------- scaling


def _has(text: str, option: str) -> bool:
    return re.search(rf"(^| ){re.escape(option)}( |=|$)", text) is not None


def scale(text: str, server_url: str) -> str:
    """The documented command, scaled down (see the table in the module docstring)."""
    text = re.sub(r"--samples \d+", "--samples 1", text)
    # The test tokenizer standing in for a Hugging Face one counts more tokens than o200k: 4 and 8
    # needles do not fit its smallest bin, and mrcr-gen refuses them there.
    smallest = "16384" if "--tokenizer hf:" in text else "8192"
    text = re.sub(r"--bin (?:all|\d+)", f"--bin {smallest}", text)
    while f"--bin {smallest} --bin {smallest}" in text:
        text = text.replace(f"--bin {smallest} --bin {smallest}", f"--bin {smallest}")
    text = text.replace(f"--base-url {LOCAL_URL}", f"--base-url {server_url}")
    text = re.sub(r"-T bins=\d+", "-T bins=8192", text)
    words = shlex.split(text)
    if words[0] == "mrcr-gen" and (len(words) == 1 or words[1] not in ("pool", "schemas")):
        if not _has(text, "--bin") and not _has(text, "--tokens"):
            text += " --bin 8192"
        if not _has(text, "--samples"):
            text += " --samples 1"
    planning = words[:2] == ["mrcr-gen", "pool"] and len(words) > 2 and words[2] in ("build", "export-requests")
    if planning and not _has(text, "--entities"):
        text += " --entities 3"
    return text


def option(text: str, name: str, default: str | None = None) -> str | None:
    words = shlex.split(text)
    return words[words.index(name) + 1] if name in words else default


def options(text: str, name: str) -> list[str]:
    words = shlex.split(text)
    return [words[i + 1] for i, w in enumerate(words) if w == name]


def jq_path(value, program: str):
    """The subset of jq the docs use: `.a.b.c`."""
    assert re.fullmatch(r"(\.[A-Za-z_][A-Za-z0-9_]*)+", program), f"unsupported jq program {program!r}"
    for key in program.split(".")[1:]:
        assert isinstance(value, dict) and key in value, f"jq {program}: no key {key!r}"
        value = value[key]
    return value


# --------------------------------------------------------------------------- workspace


@dataclass
class Run:
    command: str
    returncode: int
    stdout: str
    stderr: str

    def explain(self) -> str:
        return (
            f"$ {self.command}\nexit {self.returncode}\n"
            f"--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"
        )


@dataclass
class Workspace:
    root: Path
    server: ChatServer
    hub: FakeHub
    runs: dict[str, Run] = field(default_factory=dict)  # documented command text -> its run
    provided: set[str] = field(default_factory=set)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MRCR_GEN_"))}
        env |= {
            "OPENAI_API_KEY": API_KEY,
            "OPENAI_BASE_URL": self.server.base_url,
            "MRCR_GEN_CACHE": str(self.root / ".cache" / "mrcr-gen"),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "COLUMNS": "200",
            # Inspect's openai-api/local provider, as docs/inspect.md exports them
            "LOCAL_API_KEY": API_KEY,
            "LOCAL_BASE_URL": self.server.base_url,
            "INSPECT_DISPLAY": "none",
        }
        env = {k: v for k, v in env.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
        env |= {"HF_ENDPOINT": self.hub.url, "HF_HOME": str(self.root / ".hf"), "HF_HUB_DISABLE_TELEMETRY": "1"}
        return env

    def sh(self, text: str) -> Run:
        """Run one command line with bash in the workspace (globs expand as for a reader)."""
        proc = subprocess.run(
            ["bash", "-c", f"shopt -s failglob\n{text}"],
            cwd=self.root, env=self.env(), capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )
        return Run(text, proc.returncode, proc.stdout, proc.stderr)

    def run(self, command: Command) -> Run:
        """Run a documented command (scaled) once per workspace."""
        if command.text not in self.runs:
            self.runs[command.text] = self.sh(scale(command.text, self.server.base_url))
        return self.runs[command.text]

    def provide(self, need: str) -> None:
        if need in self.provided:
            return
        if need in SETUPS:
            SETUPS[need](self)
        else:  # another documented command whose output this one uses
            rule = RULES[need]
            command = the_command(need)
            for sub in rule.needs:
                self.provide(sub)
            run = self.run(command)
            assert run.returncode == rule.exit, f"needed command {command.where[0]} failed:\n{run.explain()}"
        self.provided.add(need)


# --------------------------------------------------------------------------- setups


def setup_mrcr(ws: Workspace) -> None:
    """`mrcr/` as `huggingface-cli download openai/mrcr ... --local-dir mrcr` lays it out."""
    run = ws.sh(
        "mrcr-gen --out mrcr --needles 2 --needles 4 --needles 8 --bin 8192 --samples 2 --rows-per-file 1 --seed 3"
    )
    assert run.returncode == 0, run.explain()
    for extra in [ws.root / "mrcr" / "README.md", *ws.root.glob("mrcr/*/*.samples.jsonl")]:
        extra.unlink()
    assert sorted(str(p.relative_to(ws.root)) for p in ws.root.rglob("mrcr/**/*") if p.is_file()) == [
        f"mrcr/{n}needle/{n}needle_{k}.parquet" for n in (2, 4, 8) for k in (0, 1)
    ]


def setup_other(ws: Workspace) -> None:
    ws.provide("mrcr")
    (ws.root / "other").mkdir(exist_ok=True)
    shutil.copy(ws.root / "mrcr/4needle/4needle_1.parquet", ws.root / "other/some.parquet")


def setup_bad(ws: Workspace) -> None:
    """Two generated rows; row 0's answer is the random string + a distractor's writing."""
    from mrcr_gen import iter_rows, write_rows

    ws.provide("mrcr")
    rows = list(iter_rows(ws.root / "mrcr/2needle/2needle_0.parquet"))
    rows += iter_rows(ws.root / "mrcr/2needle/2needle_1.parquet")
    row = rows[0]
    messages = json.loads(row.prompt)
    wrong = next(
        m["content"] for i, m in enumerate(messages[1:-1], 1)
        if m["role"] == "assistant" and m["content"] != messages[row.desired_msg_index + 1]["content"]
    )
    rows[0] = row.model_copy(update={"answer": row.random_string_to_prepend + wrong})
    write_rows(rows, ws.root / "bad.parquet")


def setup_pool(ws: Workspace) -> None:
    """The docs' POOL.parquet placeholder: any pool; here the writings of `mrcr/`."""
    from mrcr_gen.recipes.openai_mrcr._harvest import harvest

    ws.provide("mrcr")
    harvest(sorted(ws.root.glob("mrcr/*/*.parquet")), ws.root / "POOL.parquet")


def setup_responses(ws: Workspace) -> None:
    """responses.jsonl: the right reply to every row of mrcr/2needle/2needle_0.parquet."""
    from mrcr_gen import iter_rows

    ws.provide("mrcr")
    rows = iter_rows(ws.root / "mrcr/2needle/2needle_0.parquet")
    lines = [json.dumps({"row": i, "response": row.answer}) for i, row in enumerate(rows)]
    (ws.root / "responses.jsonl").write_text("\n".join(lines) + "\n")


def setup_v2_responses(ws: Workspace) -> None:
    """v2-responses.jsonl: the right reply to every row of the 8-needle (4096, 8192] v2 file."""
    from mrcr_gen.recipes.mrcr_v2 import iter_records

    rows = iter_records(ws.root / "v2-data/8needle/mrcr_v2_8needle_in_(4096,8192).csv")
    lines = [json.dumps({"row": i, "response": row["answer"]}) for i, row in enumerate(rows)]
    (ws.root / "v2-responses.jsonl").write_text("\n".join(lines) + "\n")


def setup_hub(ws: Workspace) -> None:
    """The fake Hub serves `mrcr/` as openai/mrcr and a trained tokenizer as Qwen/Qwen2.5-7B-Instruct."""
    ws.provide("mrcr")
    mrcr = ws.root / "mrcr"
    files = {str(p.relative_to(mrcr)): p.read_bytes() for p in mrcr.rglob("*.parquet")}
    ws.hub.add_commit("datasets", "openai/mrcr", files)
    # the same files at the revision the Inspect task reads by default (`-T data` absent)
    ws.hub.add_commit("datasets", "openai/mrcr", files, ref=None, sha=DEFAULT_MRCR_REVISION)
    # A larger vocabulary than the unit tests' tokenizer: it counts close to o200k, as a real model's does.
    folder = write_tiny_tokenizer(ws.root / ".model-tokenizer", vocab_size=8000, writings=400)
    files = {name: (folder / name).read_bytes() for name in ("tokenizer.json", "tokenizer_config.json")}
    ws.hub.add_commit("models", "Qwen/Qwen2.5-7B-Instruct", files)


def setup_vllm_results(ws: Workspace, requests: str = "requests.jsonl", results: str = "results.jsonl") -> None:
    """results.jsonl: `vllm run-batch -i requests.jsonl -o results.jsonl`'s output, the test server answering."""
    import urllib.request

    lines = []
    for n, text in enumerate((ws.root / requests).read_text().splitlines()):
        request = json.loads(text)
        post = urllib.request.Request(
            ws.server.base_url + "/chat/completions", json.dumps(request["body"]).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(post) as answer:
            body = json.loads(answer.read())
        response = {"status_code": 200, "request_id": f"vllm-batch-{n}", "body": body}
        lines.append(json.dumps({"id": f"vllm-{n}", "custom_id": request["custom_id"], "response": response, "error": None}))
    (ws.root / results).write_text("\n".join(lines) + "\n")


def setup_vllm_pool_results(ws: Workspace) -> None:
    """pool-results.jsonl: `vllm run-batch -i pool-requests.jsonl -o pool-results.jsonl`'s output."""
    setup_vllm_results(ws, "pool-requests.jsonl", "pool-results.jsonl")


SETUPS: dict[str, Callable[[Workspace], None]] = {
    "vllm-results": setup_vllm_results,
    "vllm-pool-results": setup_vllm_pool_results,
    "hub": setup_hub,
    "v2-responses": setup_v2_responses,
    "mrcr": setup_mrcr,
    "other": setup_other,
    "bad": setup_bad,
    "POOL": setup_pool,
    "responses": setup_responses,
}


# --------------------------------------------------------------------------- checks


def rows_in(path: Path) -> int:
    return pq.read_metadata(path).num_rows


def check_generated(ws: Workspace, command: Command, run: Run) -> None:
    text = scale(command.text, ws.server.base_url)
    out = ws.root / option(text, "--out", "mrcr-data")
    bins = options(text, "--bin")
    samples = int(option(text, "--samples"))
    for n in options(text, "--needles") or ["4"]:
        files = sorted(out.glob(f"{n}needle/{n}needle_*.parquet"))
        assert files and files[0].name == f"{n}needle_0.parquet", f"no {n}-needle files in {out}"
        assert sum(rows_in(f) for f in files) == samples * len(bins), files
    assert (out / "README.md").is_file()  # the dataset card
    assert "Rows written to" in run.stdout


def check_v2_generated(ws: Workspace, command: Command, run: Run) -> None:
    from mrcr_gen.recipes.mrcr_v2 import iter_v2_rows

    text = scale(command.text, ws.server.base_url)
    out = ws.root / option(text, "--out")
    suffix = option(text, "--format", "csv")
    for n in options(text, "--needles"):
        files = sorted(out.glob(f"{n}needle/mrcr_v2_{n}needle_*.{suffix}"))
        assert len(files) == 1, files
        assert len(list(iter_v2_rows(files[0]))) == int(option(text, "--samples"))
    assert (out / "README.md").is_file() and "MRCR v2 rows written to" in run.stdout


def check_validated(ws: Workspace, command: Command, run: Run) -> None:
    assert "rows checked" in run.stdout


def check_shortcuts(ws: Workspace, command: Command, run: Run) -> None:
    assert "shortcut probes" in run.stdout and "rows checked" in run.stdout  # 2 rows a cell: no finding


def check_health(ws: Workspace, command: Command, run: Run) -> None:
    report = json.loads((ws.root / "health.json").read_text())
    assert report["data"]["rows"] == rows_in(ws.root / "mrcr/2needle/2needle_0.parquet") * 2
    assert report["reference"]["needle_depth"]["count"] == report["reference"]["rows"] * 8
    assert "health report" in run.stdout


def check_validate_json(ws: Workspace, command: Command, run: Run) -> None:
    report = json.loads(run.stdout)  # stdout holds the JSON alone
    assert report["summary"]["rows"] == rows_in(ws.root / "mrcr/8needle/8needle_0.parquet")
    program = shlex.split(command.pipe)
    assert program[0] == "jq" and len(program) == 2, command.pipe
    assert isinstance(jq_path(report, program[1]), dict)


def check_fixed(ws: Workspace, command: Command, run: Run) -> None:
    from mrcr_gen import validate_paths

    assert "ground_truth" in run.stdout and "1 fixed" in run.stdout
    fixed = ws.root / "fixed.parquet"
    assert rows_in(fixed) == rows_in(ws.root / "bad.parquet")
    assert validate_paths([str(fixed)], workers=1).exit_code == 0


def check_cleaned_folder(ws: Workspace, command: Command, run: Run) -> None:
    inputs = [*sorted((ws.root / "mrcr").rglob("*.parquet")), ws.root / "bad.parquet"]
    for source in inputs:
        cleaned = ws.root / "clean" / source.relative_to(ws.root)
        assert pq.read_schema(cleaned).equals(pq.read_schema(source), check_metadata=False)
        assert rows_in(cleaned) == rows_in(source) - (source.name == "bad.parquet")
    assert "bad.parquet:0: dropped (ground_truth)" in run.stderr
    assert "rows per file" in run.stdout


def check_pool_built(ws: Workspace, command: Command, run: Run) -> None:
    from mrcr_gen.pool import read_pool

    out = ws.root / option(command.text, "--out")
    pool = read_pool(out)
    # Every writing names the model and the server that wrote it (the test server, whatever URL the docs show).
    assert len(pool) >= 30 and {w.source for w in pool} == {f"{option(command.text, '--model')} @ {ws.server.base_url}"}
    assert len({w.text for w in pool}) == len(pool)
    built = json.loads(out.with_name(out.name.removesuffix(".parquet") + ".build.json").read_text())
    assert built["endpoint"] == ws.server.base_url and built["written"] + built["cached"] == built["requested"]
    assert_no_key(ws)


def check_pool_built_by_batch(ws: Workspace, command: Command, run: Run) -> None:
    check_pool_built(ws, command, run)
    out = ws.root / option(command.text, "--out")
    built = json.loads(out.with_name(out.name.removesuffix(".parquet") + ".build.json").read_text())
    # Every writing the cache lacked went through the Batch API (none, if the online example of the
    # same model ran first: the batch build reuses its writings), each line billed once.
    model = option(command.text, "--model")
    asks = [r for r in ws.server.batch_requests if r["messages"][0]["content"].startswith("write a ")]
    sent = [r for r in asks if r["model"] == model]
    assert built["batch"]["lines"] == len(sent) <= built["requested"]
    assert built["batch"]["price_per_1m"]["batch_discount"] == 0.5
    assert (out.with_name(out.name.removesuffix(".parquet") + ".batches") / "writings.json").is_file()


def check_harvested(ws: Workspace, command: Command, run: Run) -> None:
    from mrcr_gen.pool import read_pool
    from mrcr_gen.recipes.openai_mrcr._harvest import catalog_path

    out = ws.root / option(command.text, "--out")
    assert len(read_pool(out)) > 0 and catalog_path(out).is_file()


def check_pool_requests(ws: Workspace, command: Command, run: Run) -> None:
    lines = [json.loads(line) for line in (ws.root / option(command.text, "--out")).read_text().splitlines()]
    model = option(command.text, "--model")
    assert len(lines) >= 30 and {line["url"] for line in lines} == {"/v1/chat/completions"}
    assert {line["body"]["model"] for line in lines} == {model}
    assert len({line["custom_id"] for line in lines}) == len(lines)


def check_pool_imported(ws: Workspace, command: Command, run: Run) -> None:
    from mrcr_gen.pool import read_pool
    from mrcr_gen.pool._quality import quality_report_path

    out = ws.root / option(command.text, "--out")
    requests = (ws.root / option(command.text, "--requests")).read_text().splitlines()
    pool = read_pool(out)
    assert len(pool) == len(requests) and {w.source for w in pool} == {"Qwen/Qwen2.5-7B-Instruct @ run-batch"}
    assert quality_report_path(out).is_file()


def check_pool_quality(ws: Workspace, command: Command, run: Run) -> None:
    from mrcr_gen.pool._quality import quality_report_path

    pool = ws.root / shlex.split(command.text)[3]
    report = json.loads(quality_report_path(pool).read_text())
    assert report["reference"] == f"pool {option(command.text, '--compare')}" and "reference" in run.stderr


def check_eval(ws: Workspace, command: Command, run: Run) -> None:
    out = ws.root / option(command.text, "--out")
    for name in ("results.jsonl", "run.json", "summary.json", "plot.png"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean_score"] == 1.0  # the server's oracle answers every row right
    model = option(command.text, "--model")
    sent = [r for r in ws.server.requests if r.get("model") == model]
    assert sent
    for name in ("--temperature", "--max-output-tokens"):
        if option(command.text, name) is not None:
            tokens_field = option(command.text, "--max-tokens-field", "max_completion_tokens")
            field_name = {"--temperature": "temperature"}.get(name, tokens_field)
            assert all(float(r[field_name]) == float(option(command.text, name)) for r in sent), field_name
    if option(command.text, "--reasoning-effort") is not None:
        assert all(r["reasoning_effort"] == option(command.text, "--reasoning-effort") for r in sent)
    if option(command.text, "--extra-body") is not None:
        extra = json.loads(option(command.text, "--extra-body"))
        assert all(r[key] == value for r in sent for key, value in extra.items())
    assert summary["complete"] and summary["official"]
    assert_no_key(ws)


def check_eval_batch(ws: Workspace, command: Command, run: Run) -> None:
    out = ws.root / option(command.text, "--out")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean_score"] == 1.0 and summary["complete"] and summary["settings"]["batch"] == "api"
    assert summary["price_per_1m"]["batch_discount"] == 0.5
    assert any(r["model"] == option(command.text, "--model") for r in ws.server.batch_requests)
    assert (out / "batches" / "batches.json").is_file()
    assert_no_key(ws)


def check_batch_export(ws: Workspace, command: Command, run: Run) -> None:
    lines = [json.loads(line) for line in (ws.root / option(command.text, "-o")).read_text().splitlines()]
    assert len(lines) == sum(rows_in(p) for p in ws.root.glob("mrcr/2needle/*.parquet"))
    assert all(line["url"] == "/v1/chat/completions" and line["body"]["model"] == option(command.text, "--model")
               for line in lines)
    assert all(line["body"]["max_tokens"] == int(option(command.text, "--max-output-tokens")) for line in lines)


def check_batch_import(ws: Workspace, command: Command, run: Run) -> None:
    summary = json.loads((ws.root / option(command.text, "--out") / "summary.json").read_text())
    assert summary["mean_score"] == 1.0 and summary["complete"] and summary["settings"]["base_url"] == "offline"
    assert summary["n_rows"] == sum(rows_in(p) for p in ws.root.glob("mrcr/2needle/*.parquet"))


def check_compare(ws: Workspace, command: Command, run: Run) -> None:
    words = shlex.split(command.text)
    runs = [w for w in words[2:] if w.startswith("runs/")][:2]
    plot = option(command.text, "--plot")
    assert len(runs) == 2 and all(name in run.stdout for name in runs)
    assert "AUC@128k" in run.stdout and "1.000" in run.stdout  # the oracle's mean
    assert (ws.root / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def check_eval_cached_price(ws: Workspace, command: Command, run: Run) -> None:
    check_eval(ws, command, run)
    summary = json.loads((ws.root / option(command.text, "--out") / "summary.json").read_text())
    price = {"input": "--price-in", "cached_input": "--price-cached", "output": "--price-out"}
    assert summary["price_per_1m"] == {key: float(option(command.text, flag)) for key, flag in price.items()}
    usage, per_1m = summary["usage"], summary["price_per_1m"]
    uncached = usage["prompt_tokens"] - usage["cached_tokens"]
    cost = uncached * per_1m["input"] + usage["cached_tokens"] * per_1m["cached_input"]
    cost += usage["completion_tokens"] * per_1m["output"]
    assert summary["cost_usd"] == pytest.approx(cost / 1e6) and summary["cost_usd"] > 0
    assert summary["cache_saved_usd"] == pytest.approx(summary["cost_without_cache_usd"] - summary["cost_usd"])


def check_eval_per_bin(ws: Workspace, command: Command, run: Run) -> None:
    check_eval(ws, command, run)
    run_record = json.loads((ws.root / option(command.text, "--out") / "run.json").read_text())
    assert run_record["selection"]["per_bin"]["k"] == int(option(command.text, "--per-bin"))
    summary = json.loads((ws.root / option(command.text, "--out") / "summary.json").read_text())
    assert summary["n_rows"] > 0 and all(c["count"] <= int(option(command.text, "--per-bin")) for c in summary["cells"])


def check_eval_control(ws: Workspace, command: Command, run: Run) -> None:
    summary = json.loads((ws.root / option(command.text, "--out") / "summary.json").read_text())
    assert summary["control"] == "query-only" and not summary["official"] and summary["complete"]
    sent = [r for r in ws.server.requests if len(r["messages"]) == 2 and r.get("model") == option(command.text, "--model")]
    assert len(sent) == summary["n_rows"] > 0  # the preamble and the final query, nothing between
    # fresh generated rows: the model cannot have seen them, the control stays at the floor
    assert not summary["memorization"]["memorized"] and summary["mean_score"] < 0.5
    assert_no_key(ws)


def check_compare_control(ws: Workspace, command: Command, run: Run) -> None:
    full, control = shlex.split(command.text)[2:4]
    assert "Memorization controls" in run.stdout and f"{control} (query-only)" in run.stdout
    assert "MEMORIZED" not in run.stdout and full in run.stdout


def before_report(ws: Workspace, command: Command) -> None:
    out = ws.root / shlex.split(command.text)[2]
    for name in ("summary.json", "plot.png"):
        (out / name).unlink()


def check_report(ws: Workspace, command: Command, run: Run) -> None:
    out = ws.root / shlex.split(command.text)[2]
    assert (out / "summary.json").is_file() and (out / "plot.png").is_file()
    assert "mean_score" in json.loads((out / "summary.json").read_text())


def check_view(ws: Workspace, command: Command, run: Run) -> None:
    out = ws.root / shlex.split(command.text)[2]
    page = (out / "report.html").read_text()
    assert run.stdout.strip().endswith("report.html") and page.startswith("<!DOCTYPE html>")
    assert len(page) > 10000 and "samples-data" in page


def _inspect_log_of(ws: Workspace, command: Command):
    """The one Inspect log the documented `inspect eval ... --log-dir DIR` wrote, read."""
    from inspect_ai.log import read_eval_log

    [path] = sorted((ws.root / option(command.text, "--log-dir")).glob("*.eval"))
    return read_eval_log(str(path))


def check_inspect_eval(ws: Workspace, command: Command, run: Run) -> None:
    log = _inspect_log_of(ws, command)
    assert log.status == "success" and log.samples, run.explain()
    metrics = {name: m.value for name, m in log.results.scores[0].metrics.items()}
    assert {"mean", "stderr", "bin_8192"} <= set(metrics)  # no AUC: one bin of the 128k range has rows
    if "mockllm/" not in command.text:  # the server's oracle answers every row right
        assert metrics["mean"] == 1.0
        assert all(s.metadata["status"] == "ok" for s in log.samples)


def check_export_inspect(ws: Workspace, command: Command, run: Run) -> None:
    from inspect_ai.log import read_eval_log

    from mrcr_gen._api import summarize_run

    log = read_eval_log(str(ws.root / option(command.text, "-o")))
    run_dir = ws.root / shlex.split(command.text)[2]
    assert len(log.samples) == summarize_run(run_dir)["n_rows"]


def check_inspect_default(ws: Workspace, command: Command, run: Run) -> None:
    """Without -T data: openai/mrcr at the pinned revision, each row in two epochs, ids FILE:ROW."""
    log = _inspect_log_of(ws, command)
    check_inspect_eval(ws, command, run)
    assert log.eval.config.epochs == 2 and len(log.samples) % 2 == 0
    assert {s.id.split(":")[0] for s in log.samples} <= {f"8needle/8needle_{i}.parquet" for i in (0, 1)}
    assert all(f"/snapshots/{DEFAULT_MRCR_REVISION}/" in entry["path"] for entry in log.eval.metadata["data"])


def check_inspect_report_folder(ws: Workspace, command: Command, run: Run) -> None:
    assert "AUC@128k" in run.stdout and "2 epochs: each row's score" in " ".join(run.stdout.split()), run.explain()


def check_inspect_report(ws: Workspace, command: Command, run: Run) -> None:
    assert "AUC@128k" in run.stdout and "1.000" in run.stdout
    assert sorted(p.name for p in (ws.root / "logs/gpt-4.1").iterdir())[-1].endswith(".eval")  # nothing written beside


def check_inspect_compare(ws: Workspace, command: Command, run: Run) -> None:
    assert "runs/mini-generated" in run.stdout and "logs/offline/" in run.stdout and "AUC@128k" in run.stdout
    assert (ws.root / option(command.text, "--plot")).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def check_inspect_view(ws: Workspace, command: Command, run: Run) -> None:
    page = (ws.root / option(command.text, "-o")).read_text()
    assert page.startswith("<!DOCTYPE html>") and "samples-data" in page


def check_grade(ws: Workspace, command: Command, run: Run) -> None:
    n = rows_in(ws.root / "mrcr/2needle/2needle_0.parquet")
    if "--json" in shlex.split(command.text):
        result = json.loads(run.stdout)
        assert result["mean"] == 1.0 and len(result["rows"]) == n
        assert set(result["rows"][0]) >= {"row", "score", "bin", "n_needles"}
    else:
        assert f"mean score 1.0000 over {n} rows" in run.stdout


def check_grade_v2(ws: Workspace, command: Command, run: Run) -> None:
    assert "MRCR v2: mean score 1.0000 over 1 rows" in run.stdout and "up to 128K" in run.stdout


def check_generated_with_tokenizer(ws: Workspace, command: Command, run: Run) -> None:
    from mrcr_gen._card import card_tokenizer

    check_generated(ws, command, run)
    out = ws.root / option(command.text, "--out")
    assert card_tokenizer((out / "README.md").read_text()) == option(command.text, "--tokenizer")
    records = [json.loads(line) for path in out.rglob("*.samples.jsonl") for line in path.read_text().splitlines()]
    assert records and {r["tokenizer"] for r in records} == {option(command.text, "--tokenizer")}


def check_validated_with_card_tokenizer(ws: Workspace, command: Command, run: Run) -> None:
    check_validated(ws, command, run)
    report = ws.sh(command.text + " --json -")  # in the workspace: the tokenizer comes from the fake Hub's cache
    summary = json.loads(report.stdout)["summary"]
    assert summary["rows_with_errors"] == 0 and set(summary["tokenizers"].values()) == {"hf:Qwen/Qwen2.5-7B-Instruct"}


def check_v2_generated_with_tokenizer(ws: Workspace, command: Command, run: Run) -> None:
    from mrcr_gen._card import card_tokenizer

    check_v2_generated(ws, command, run)
    out = ws.root / option(command.text, "--out")
    assert card_tokenizer((out / "README.md").read_text()) == option(command.text, "--tokenizer")
    records = [json.loads(line) for path in out.rglob("*.samples.jsonl") for line in path.read_text().splitlines()]
    assert records and {r["tokenizer"] for r in records} == {option(command.text, "--tokenizer")}


def check_eval_counted(ws: Workspace, command: Command, run: Run) -> None:
    check_eval(ws, command, run)
    options = json.loads((ws.root / option(command.text, "--out") / "run.json").read_text())["options"]
    assert options["chat_template"] == ("--chat-template" in command.text)
    assert options["count_with_server"] == ("--count-with-server" in command.text)
    if options["count_with_server"]:
        assert ws.server.tokenize_requests > 0
    assert "row(s) over --max-context-window" in run.stderr  # listed before the requests


def check_hub_validated(ws: Workspace, command: Command, run: Run) -> None:
    check_validated(ws, command, run)
    report = ws.sh(scale(command.text, ws.server.base_url) + " --json - --no-tokens")
    sources = json.loads(report.stdout)["summary"]["hub_sources"]
    assert sources and all(s.startswith("hf://datasets/openai/mrcr@") for s in sources.values())


def check_hub_eval(ws: Workspace, command: Command, run: Run) -> None:
    check_eval(ws, command, run)
    record = json.loads((ws.root / option(command.text, "--out") / "run.json").read_text())
    sources = record["hub_sources"]
    assert sources and all(s.startswith("hf://datasets/openai/mrcr@") for s in sources.values())


def check_hub_harvested(ws: Workspace, command: Command, run: Run) -> None:
    from mrcr_gen.recipes.openai_mrcr._harvest import catalog_path

    check_harvested(ws, command, run)
    catalog = json.loads(catalog_path(ws.root / option(command.text, "--out")).read_text())
    assert len(catalog["hub_sources"]) == 6


def check_schemas(ws: Workspace, command: Command, run: Run) -> None:
    written = {p.name: p.read_text() for p in (ws.root / "schemas").glob("*.schema.json")}
    assert written and written == {p.name: p.read_text() for p in (ROOT / "schemas").glob("*.schema.json")}


def check_schemas_current(ws: Workspace, command: Command, run: Run) -> None:
    assert "out of date" not in run.stdout + run.stderr  # and exit code 0 (the rule's)


def assert_no_key(ws: Workspace) -> None:
    for path in ws.root.rglob("*"):
        if path.is_file() and path.suffix != ".png":
            assert API_KEY.encode() not in path.read_bytes(), path


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Rule:
    pattern: str  # re.search against the documented command text
    needs: tuple[str, ...] = ()  # SETUPS names or RULES names (documented commands run first)
    exit: int = 0
    check: Callable[[Workspace, Command, Run], None] | None = None
    before: Callable[[Workspace, Command], None] | None = None


RULES: dict[str, Rule] = {
    "gen-quickstart": Rule(r"^mrcr-gen --needles 4 --bin 65536$", check=check_generated),
    "gen-mrcr-full": Rule(r"^mrcr-gen .*--out mrcr-full$", check=check_generated),
    "validate-dirs": Rule(
        r"^mrcr-validate mrcr/ mrcr-full/ ", needs=("mrcr", "other", "gen-mrcr-full"), check=check_validated
    ),
    "validate-json": Rule(r"^mrcr-validate \S+ --json -$", needs=("mrcr",), check=check_validate_json),
    # docs: "1 when any row has an error" - bad.parquet has one, --fix repairs it in fixed.parquet
    "validate-fix": Rule(
        r"^mrcr-validate bad\.parquet --fix fixed\.parquet$", needs=("bad",), exit=1, check=check_fixed
    ),
    "validate-clean-folder": Rule(
        r"^mrcr-validate mrcr/ bad\.parquet --clean clean/$", needs=("mrcr", "bad"), exit=1, check=check_cleaned_folder
    ),
    "validate-shortcuts": Rule(r"^mrcr-validate mrcr/ --shortcuts$", needs=("mrcr",), check=check_shortcuts),
    "validate-compare": Rule(
        r"^mrcr-validate mrcr/2needle/ --compare mrcr/8needle/ --json health\.json$", needs=("mrcr",), check=check_health
    ),
    "gen-pool": Rule(r"^mrcr-gen --writer pool --pool POOL\.parquet ", needs=("POOL",), check=check_generated),
    "pool-build-openai": Rule(r"^mrcr-gen pool build --writer openai --model gpt-4o ", check=check_pool_built),
    "gen-openai": Rule(r"^mrcr-gen --writer openai ", check=check_generated),
    "pool-build-vllm": Rule(r"^mrcr-gen pool build .*--base-url ", check=check_pool_built),
    "gen-qwen-pool": Rule(
        r"^mrcr-gen --writer pool --pool qwen-pool\.parquet", needs=("pool-build-vllm",), check=check_generated
    ),
    "harvest": Rule(r"^mrcr-gen pool harvest mrcr/", needs=("mrcr",), check=check_harvested),
    "pool-build-batch": Rule(r"^mrcr-gen pool build --batch ", check=check_pool_built_by_batch),
    "pool-export": Rule(r"^mrcr-gen pool export-requests ", check=check_pool_requests),
    "pool-import": Rule(
        r"^mrcr-gen pool import-results pool-results\.jsonl ",
        needs=("pool-export", "vllm-pool-results"),
        check=check_pool_imported,
    ),
    "pool-quality": Rule(r"^mrcr-gen pool quality ", needs=("pool-import", "harvest"), check=check_pool_quality),
    "gen-remix": Rule(
        r"^mrcr-gen --writer pool --pool gpt4o-remix\.parquet", needs=("harvest",), check=check_generated
    ),
    "eval-official": Rule(
        r"^mrcr-eval mrcr/8needle/(?!.*(--reasoning-effort|--per-bin|--control))", needs=("mrcr",), check=check_eval
    ),
    "eval-per-bin": Rule(r"^mrcr-eval mrcr/8needle/.*--per-bin ", needs=("mrcr",), check=check_eval_per_bin),
    "eval-control": Rule(r"^mrcr-eval mrcr/8needle/.*--control query-only ", needs=("mrcr",), check=check_eval_control),
    "eval-compare-control": Rule(
        r"^mrcr-eval compare \S+ \S+-control$", needs=("eval-official", "eval-control"), check=check_compare_control
    ),
    "eval-cached-price": Rule(
        r"^mrcr-eval mrcr/2needle/.*--price-cached ", needs=("mrcr",), check=check_eval_cached_price
    ),
    "eval-reasoning": Rule(r"^mrcr-eval mrcr/8needle/.*--reasoning-effort ", needs=("mrcr",), check=check_eval),
    "eval-vllm": Rule(
        r"^mrcr-eval mrcr/2needle/(?!.*(--extra-body|--price-cached)).*--base-url ", needs=("mrcr",), check=check_eval
    ),
    "eval-extra-body": Rule(r"^mrcr-eval mrcr/2needle/.*--extra-body ", needs=("mrcr",), check=check_eval),
    "eval-batch": Rule(r"^mrcr-eval mrcr/4needle/\S+ .*--batch ", needs=("mrcr",), check=check_eval_batch),
    "batch-export": Rule(r"^mrcr-eval batch export ", needs=("mrcr",), check=check_batch_export),
    "batch-import": Rule(
        r"^mrcr-eval batch import ", needs=("batch-export", "vllm-results"), check=check_batch_import
    ),
    "eval-compare": Rule(
        r"^mrcr-eval compare runs/gpt(?!\S* \S+-control$)", needs=("eval-official", "eval-reasoning"), check=check_compare
    ),
    "gen-data": Rule(r"^mrcr-gen .*--out data/$", check=check_generated),
    "gen-workers": Rule(r"^mrcr-gen .*--workers 8 --out mrcr-1m$", check=check_generated),
    "validate-workers": Rule(r"^mrcr-validate mrcr-1m/ --workers 8$", needs=("gen-workers",), check=check_validated),
    "eval-generated": Rule(r"^mrcr-eval data/", needs=("gen-data",), check=check_eval),
    "eval-report": Rule(r"^mrcr-eval report runs/", needs=("eval-generated",), check=check_report, before=before_report),
    "eval-view": Rule(r"^mrcr-eval view runs/", needs=("eval-generated",), check=check_view),
    "inspect-hub": Rule(
        r"^inspect eval mrcr_gen/mrcr --model openai/\S+ -T data=", needs=("hub",), check=check_inspect_eval
    ),
    "inspect-default": Rule(
        r"^inspect eval mrcr_gen/mrcr --model openai/\S+ --epochs 2 ", needs=("hub",), check=check_inspect_default
    ),
    "inspect-v2": Rule(r"^inspect eval mrcr_gen/mrcr_v2 ", needs=("gen-v2",), check=check_inspect_eval),
    "inspect-offline": Rule(r"^inspect eval mrcr_gen/mrcr --model mockllm/", needs=("gen-data",), check=check_inspect_eval),
    "inspect-local": Rule(
        r"^inspect eval mrcr_gen/mrcr --model openai-api/local/", needs=("gen-data",), check=check_inspect_eval
    ),
    "export-inspect": Rule(r"^mrcr-eval export-inspect runs/", needs=("eval-generated",), check=check_export_inspect),
    "inspect-report": Rule(r"^mrcr-eval report logs/\S+\.eval$", needs=("inspect-hub",), check=check_inspect_report),
    "inspect-report-folder": Rule(
        r"^mrcr-eval report logs/default$", needs=("inspect-default",), check=check_inspect_report_folder
    ),
    "inspect-compare": Rule(
        r"^mrcr-eval compare runs/mini-generated logs/", needs=("eval-generated", "inspect-offline"),
        check=check_inspect_compare,
    ),
    "inspect-view": Rule(r"^mrcr-eval view logs/", needs=("inspect-hub",), check=check_inspect_view),
    "gen-v2": Rule(r"^mrcr-gen --recipe mrcr-v2 .*--out v2-data$", check=check_v2_generated),
    "gen-v2-tokens": Rule(r"^mrcr-gen --recipe mrcr-v2 .*--tokens ", check=check_v2_generated),
    "validate-v2": Rule(r"^mrcr-validate v2-data/$", needs=("gen-v2",), check=check_validated),
    "eval-v2": Rule(r"^mrcr-eval v2-data/", needs=("gen-v2",), check=check_eval),
    "gen-v2-tokenizer": Rule(
        r"^mrcr-gen --recipe mrcr-v2 .*--tokenizer hf:Qwen/\S+ --out v2-qwen$",
        needs=("hub",),
        check=check_v2_generated_with_tokenizer,
    ),
    "validate-v2-tokenizer": Rule(
        r"^mrcr-validate v2-qwen/$", needs=("gen-v2-tokenizer",), check=check_validated_with_card_tokenizer
    ),
    "grade-v2": Rule(r"^mrcr-grade 'v2-data/", needs=("gen-v2", "v2-responses"), check=check_grade_v2),
    "gen-tokenizer": Rule(
        r"^mrcr-gen .*--tokenizer hf:Qwen/\S+ --out qwen-data$", needs=("hub",), check=check_generated_with_tokenizer
    ),
    "validate-tokenizer": Rule(
        r"^mrcr-validate qwen-data/$", needs=("gen-tokenizer",), check=check_validated_with_card_tokenizer
    ),
    "eval-chat-template": Rule(
        r"^mrcr-eval qwen-data/.* --chat-template ", needs=("gen-tokenizer",), check=check_eval_counted
    ),
    "eval-count-with-server": Rule(
        r"^mrcr-eval qwen-data/.* --count-with-server ", needs=("gen-tokenizer",), check=check_eval_counted
    ),
    "validate-hub": Rule(r"^mrcr-validate 'hf://", needs=("hub",), check=check_hub_validated),
    "eval-hub": Rule(r"^mrcr-eval 'hf://", needs=("hub",), check=check_hub_eval),
    "harvest-hub": Rule(r"^mrcr-gen pool harvest 'hf://", needs=("hub",), check=check_hub_harvested),
    "grade": Rule(
        r"^mrcr-grade mrcr/2needle/2needle_0\.parquet responses\.jsonl", needs=("mrcr", "responses"), check=check_grade
    ),
    "schemas": Rule(r"^mrcr-gen schemas$", check=check_schemas),
    "schemas-check": Rule(r"^mrcr-gen schemas --check$", needs=("schemas",), check=check_schemas_current),
}


def rules_for(command: Command) -> list[str]:
    return [name for name, rule in RULES.items() if re.search(rule.pattern, command.text)]


def the_command(rule_name: str) -> Command:
    """The one command (written the same way wherever it is documented) a needed rule matches."""
    matching = {c.text: c for c in COMMANDS if rules_for(c) == [rule_name]}
    assert len(matching) == 1, f"rule {rule_name} is needed by another command but matches {len(matching)} commands"
    return next(iter(matching.values()))


# --------------------------------------------------------------------------- fixtures and tests


def server_policy(messages: list, request_json: dict) -> str:
    """MRCR queries are solved (oracle), or without their conversation answered as by a model that
    never saw them; plain asks get varied writings (pool building)."""
    try:
        return oracle(messages, request_json)
    except IndexError:  # an MRCR query without its conversation (--control query-only): nothing to solve
        return memorized({})(messages, request_json)
    except ValueError:
        return writer_policy(messages, request_json)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    with ChatServer(server_policy) as server, FakeHub() as hub:
        yield Workspace(tmp_path_factory.mktemp("readme"), server, hub)


def test_every_bash_line_is_classified():
    """Each command of a ```bash block is either run here or a known setup step."""
    lines = all_bash_lines()
    unknown = [(where, text) for where, text in lines if text.split()[0] not in CLIS and not is_ignored(text)]
    assert unknown == [], "documented commands neither run by tests/test_readme.py nor known setup steps"


def test_every_command_has_exactly_one_rule():
    # today's counts: a lost example shows up here
    assert sum(w.startswith("README.md:") for c in COMMANDS for w in c.where) >= 13
    assert len(COMMANDS) >= 41
    assert {c.where: (c.text, rules_for(c)) for c in COMMANDS if len(rules_for(c)) != 1} == {}
    used = {name for c in COMMANDS for name in rules_for(c)}
    assert set(RULES) - used == set(), "rules whose documented command is gone"


def test_the_docs_are_read():
    names = {w.split(":")[0] for c in COMMANDS for w in c.where}
    assert {"README.md", "docs/generating.md", "docs/evaluating.md", "docs/mrcr-v2.md"} <= names


def test_extraction_handles_continuations_comments_and_chains():
    text = (
        "x\n```bash\n# a comment\na && mrcr-gen --x 1 \\\n    --y 'a b' # tail\n"
        "mrcr-validate f --json - | jq '.s'\n```\n"
    )
    assert bash_lines(text, "docs/x.md") == [
        ("docs/x.md:4", "a"),
        ("docs/x.md:4", "mrcr-gen --x 1 --y 'a b'"),
        ("docs/x.md:6", "mrcr-validate f --json - | jq '.s'"),
    ]


def test_scaling_keeps_options():
    url = "http://127.0.0.1:1/v1"
    assert scale("mrcr-gen --needles 8 --bin 8192 --bin 65536 --samples 50 --out data/", url) == (
        "mrcr-gen --needles 8 --bin 8192 --samples 1 --out data/"
    )
    assert scale("mrcr-gen --writer pool --pool p.parquet --needles 2", url) == (
        "mrcr-gen --writer pool --pool p.parquet --needles 2 --bin 8192 --samples 1"
    )
    assert scale(f"mrcr-gen pool build --model m --base-url {LOCAL_URL} --out q.parquet", url) == (
        f"mrcr-gen pool build --model m --base-url {url} --out q.parquet --entities 3"
    )
    assert scale("mrcr-eval a.parquet --model m --out r --max-context-window 250000", url).endswith("250000")


@pytest.mark.parametrize("command", COMMANDS, ids=[c.id for c in COMMANDS])
def test_readme_command(command: Command, workspace: Workspace):
    (name,) = rules_for(command)
    rule = RULES[name]
    for need in rule.needs:
        workspace.provide(need)
    if rule.before is not None and command.text not in workspace.runs:
        rule.before(workspace, command)
    run = workspace.run(command)
    assert run.returncode == rule.exit, run.explain()
    if rule.check is not None:
        rule.check(workspace, command, run)
