#!/usr/bin/env python3
"""Digests of mrcr-gen's outputs, to prove that a refactor changed no behaviour.

What it proves
--------------
For each ``--source TREE`` (a checkout of this repository) the script runs a FIXED set of commands
of
that tree's ``mrcr-gen``, ``mrcr-validate``, ``mrcr-grade`` and ``mrcr-eval`` in a fresh temporary
folder and prints one line per output, ``<sha256>  <name>``. Two trees with the same lines produced
the same files, dataset cards, sidecars, validation reports, cleaned/fixed files, grades, eval run
folders, stdout, stderr and exit codes for these commands. The outputs covered:

* generation, openai/mrcr recipe: needles 2/4/8 x bins 8192/16384 with ``--workers 1`` and with the
  default workers (all cores); needles 2/8 in the 65536 bin (one file per row, so files are cut
  into units across workers); ``--tokens 20000``; ``--shard 2/3`` with ``--date-added``; a rerun
  of a finished command (nothing to write); two refused commands (exit 2). Every parquet file,
  ``*.samples.jsonl`` sidecar and dataset card (``README.md``) is hashed;
* generation, MRCR v2: CSV (needles 2/8, buckets 8192/16384), parquet (needles 4, buckets
  8192/65536), ``--tokens`` with ``--rows-per-transcript 1``; files, ``*.build.json`` and cards;
* ``mrcr-validate``: ``--json`` on every generated folder (``--workers 1`` and default workers), the
  tables (stdout, or stderr beside ``--json -``), and on mutated inputs: generated openai/mrcr rows
  with a swapped answer, an extra needle, a wrong ``desired_msg_index`` (another needle / a
  distractor) and a removed prefix; every mutation of tests/support/rowkit.py (on handmade rows long
  enough for a bin, plus a wrong column type); v2 CSV rows with a wrong answer and a wrong
  ``context_len``; a v2 parquet row with a wrong answer and one with a broken ``view_ops``. Also
  ``--strict --no-tokens``, ``--clean`` (folder output, v2 CSV and parquet) and ``--fix``;
* ``mrcr-grade``: table and ``--json`` on openai/mrcr and v2 responses (exact, truncated, no
  prefix, leading space, trailing text), ``--allow-missing``, and the refusal without it;
* ``mrcr-eval`` against the test suite's OpenAI-compatible server (policies ``oracle`` and
  ``first_needle``): openai/mrcr and v2 CSV / parquet runs (``results.jsonl``, ``run.json``,
  ``summary.json``, ``plot.png``, stdout/stderr), a resumed rerun, a concurrent run with
  ``--max-context-window`` (skipped rows) and ``--needles`` filters, a run over the rowkit
  mutations (error rows, exit 1), ``mrcr-eval report`` and ``mrcr-eval compare`` (JSON, table,
  plot).

The inputs the script builds itself (mutated files, responses) are hashed too (``mut/``,
``responses/``), and so are each command's stdout, stderr and exit code (``cli/NAME.*``).

The instruments are fixed: the chat server and the row kit are ``tests/support/{chat_server,
v2_resolve,rowkit}.py`` as of commit ``SUPPORT_REF`` (558094b), read with ``git show`` from the
repository this script lives in, so the trees being compared are driven by byte-identical
servers and mutations however the refactor moves ``tests/``. Only rowkit imports mrcr_gen (its
public ``MRCR_SCHEMA`` and ``ordinal``), from the tree being measured.

Which code runs
---------------
Every command runs as ``python -c RUNNER ENTRY PROG ARGS`` (RUNNER calls ``mrcr_gen.cli.ENTRY()``
with ``sys.argv = [PROG, *ARGS]``, as the console script does) with ``PYTHONPATH=TREE`` (or
``TREE/src``), which wins over the editable install's path, in a fixed environment: ``COLUMNS=120``,
``TERM=dumb``, ``LC_ALL=C.UTF-8``, ``TZ=UTC``, a fake ``OPENAI_API_KEY``,
``MRCR_GEN_CACHE``/``HF_HOME`` in the temporary folder, no proxies, ``PYTHONDONTWRITEBYTECODE=1``
(nothing is written into the trees) and ``PYTHONHASHSEED`` unset (random per process: outputs proved
independent of it).

A ``sitecustomize`` placed on ``PYTHONPATH`` adds an audit hook to every Python process the commands
start (workers and fork servers included); it logs each file opened below a ``mrcr_gen`` folder and
each catalog data file (``entities.txt``, ``formats.json``, ...). The script fails unless all of
them lie inside TREE, and reports where ``mrcr_gen`` and the data files came from (the venv's
site-packages holds a stale copy of the data in ``mrcr_gen/_data``: reading it would be caught).

Normalisation (the only changes made before hashing; everything else is hashed byte for byte)
---------------------------------------------------------------------------------------------
* text outputs (everything but parquet and PNG), stdout and stderr: the temporary folder's path
  becomes ``<WORK>`` (eval records absolute input paths), the source tree's path ``<SOURCE>`` (only
  tracebacks would hold it), and ``127.0.0.1:<port>`` of each test server
  ``127.0.0.1:<PORT-policy>``
  (the port is chosen by the OS);
* eval run folders: the settings ``fingerprint`` (in ``run.json`` and every ``results.jsonl`` line)
  is a sha256 of the settings, which hold the base URL with its port. The script first checks that
  it equals ``sha256(json.dumps(settings, sort_keys=True))`` of the recorded settings, then replaces
  it with the same hash of the settings with the port normalised. If the check fails it is left as
  it is (so the difference shows);
* ``run.lock`` of an eval run: its ``pid``, ``host`` and ``started`` values become ``"<pid>"``, ...;
* ``latency_s`` values (per row in ``results.jsonl``; mean/median/max in ``summary.json``) become
  ``"<LATENCY>"``: wall-clock time;
* the concurrent eval run (``runs/oai_conc``, ``--concurrency 4``) appends rows as they finish, so
  its ``results.jsonl`` lines are sorted; every other run uses ``--concurrency 1`` and keeps its
  order;
* ``mrcr-gen``'s stderr is its progress bar: elapsed/remaining times (``0:00:02``) become
``<TIME>``;
* stderr lines ``Matplotlib is building the font cache...`` (first use of matplotlib only) are
  dropped;
* parquet files get two lines: ``NAME`` (raw bytes, which depend on the pyarrow version: the footer
  says ``created_by parquet-cpp-arrow version X``) and ``NAME#content`` (canonical JSON of the arrow
  schema, the row groups' row counts, each column chunk's physical type and codec, and every row);
* PNG plots get ``NAME`` (raw bytes; matplotlib writes its version into a text chunk) and
  ``NAME#pixels`` (mode, size and decoded pixels, via Pillow).

Not normalised on purpose: the mrcr-gen version, the ``faker`` version in the card's writer
description (it also feeds the sidecars' ``build`` hash and the text itself), eval's ``data_sha256``
(the raw bytes of the input file: stable within one pyarrow version). Digests are therefore
comparable within one environment; the baseline file's header records the library versions, and
``--check`` warns when they differ.

Nondeterminism: three runs on 558094b gave identical digests; the only run-to-run variation found is
what is normalised above (ports, temporary paths, latencies, progress-bar times, the completion
order of concurrent requests).

A command whose exit code is not the baseline's is printed as ``UNEXPECTED`` with its stderr tail
and recorded like any other outcome (its ``.exit``/``.stderr`` digests then differ); the run goes on.

Usage (from the repository, with the venv's Python)
---------------------------------------------------
    python scripts/output_digests.py --source /work/wt-base                # print the digests
    python scripts/output_digests.py --source /work/wt-base --record scripts/output_digests.sha256
    python scripts/output_digests.py --source . --check scripts/output_digests.sha256     # exit 1 on a change
    python scripts/output_digests.py --source /work/wt-base --source .     # side by side; exit 1 on a change

``--keep DIR`` also writes every output exactly as it was hashed to ``DIR/1`` (and ``DIR/2``), so
that ``diff -r DIR/1 DIR/2`` shows what changed; ``-v`` prints each command with its time and exit
code. The libraries are those of the Python running the script (``--python`` to choose another).
One tree takes about 2.5 minutes on a busy 2-core VM (about 100 s of CPU); two trees twice that.
Exit codes: 0 same (``--record``: recorded), 1 different or an unexpected exit code, 2 the run
failed.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

SUPPORT_REF = "558094b"
SUPPORT_FILES = (
    "tests/__init__.py",
    "tests/support/__init__.py",
    "tests/support/chat_server.py",
    "tests/support/v2_resolve.py",
    "tests/support/rowkit.py",
)
VERSIONED = (
    "pyarrow",
    "tiktoken",
    "bpe-openai",
    "faker",
    "matplotlib",
    "pillow",
    "numpy",
    "pydantic",
    "rich",
    "typer",
    "openai",
)
API_KEY = "sk-output-digests-not-a-secret"
ENTRIES = {
    "mrcr-gen": "gen_main",
    "mrcr-validate": "validate_main",
    "mrcr-grade": "grade_main",
    "mrcr-eval": "eval_main",
}
# python -c RUNNER ENTRY PROG ARGS...: the console script ENTRY of mrcr_gen.cli with sys.argv = [PROG, *ARGS]
RUNNER = "\n".join(
    [
        "import sys",
        "from mrcr_gen import cli",
        "entry = sys.argv.pop(1)",
        "sys.argv[0] = sys.argv.pop(1)",
        "getattr(cli, entry)()",
    ]
)
DATA_FILES = (
    "entities.txt",
    "v2_topics.json",
    "formats.json",
    "offline_templates.json",
    "v2_formats.json",
    "v2_styles.json",
)
SITECUSTOMIZE = f'''"""output_digests.py: log every file opened below a mrcr_gen folder, and the catalog data files."""
import os
import sys

_LOG = os.environ.get("OUTPUT_DIGESTS_OPEN_LOG")
_DATA = {DATA_FILES!r}


def _output_digests_hook(event, args):
    if event != "open" or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.fsdecode(args[0])
    parts = path.replace(os.sep, "/").split("/")
    if "mrcr_gen" in parts or parts[-1] in _DATA:
        fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (os.path.abspath(path) + "\\n").encode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)


if _LOG:
    sys.addaudithook(_output_digests_hook)
'''
MPL_FONT_CACHE = re.compile(r"^Matplotlib is building the font cache.*\n?", re.MULTILINE)
PROGRESS_TIME = re.compile(r"(?<![\d:])(?:\d+:\d{2}:\d{2}|-:--:--)(?![\d:])")
RUN_LOCK_FIELDS = re.compile(r'("(pid|host|started)":\s*)("[^"]*"|\d+)')
LATENCY_NUMBER = re.compile(r'("latency_s":\s*)(-?\d[\d.eE+-]*)')
LATENCY_OBJECT = re.compile(r'("latency_s":\s*\{)([^{}]*)(\})')
JSON_NUMBER_VALUE = re.compile(r"(:\s*)(-?\d[\d.eE+-]*)")


class DigestError(Exception):
    """The run itself failed (not a difference in outputs): exit code 2."""


# --------------------------------------------------------------------------- digests


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parquet_content(path: Path) -> bytes:
    """Canonical JSON of a parquet file: arrow schema, row-group layout, codecs and every row."""
    parquet = pq.ParquetFile(path)
    meta = parquet.metadata
    layout = []
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        columns = [group.column(j) for j in range(group.num_columns)]
        layout.append(
            {"rows": group.num_rows, "columns": [[c.path_in_schema, c.physical_type, c.compression] for c in columns]}
        )
    schema = parquet.schema_arrow
    doc = {
        "schema": [[f.name, str(f.type), f.nullable] for f in schema],
        "row_groups": layout,
        "rows": parquet.read().to_pylist(),
    }
    text = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)
    return text.encode("utf-8")


def png_pixels(path: Path) -> bytes:
    """A PNG's mode, size and decoded pixels (no text chunks, no encoder choices)."""
    from PIL import Image

    with Image.open(path) as image:
        image.load()
        head = f"{image.mode} {image.size[0]}x{image.size[1]}\n".encode()
        return head + bytes(image.tobytes())


# --------------------------------------------------------------------------- normalisation


@dataclass
class Normaliser:
    """The replacements documented in the module docstring, for one source tree's run."""

    work: Path
    source: Path
    ports: dict[int, str] = field(default_factory=dict)  # port -> policy name
    fingerprints: dict[str, str] = field(default_factory=dict)  # verified original -> normalised

    def text(self, text: str) -> str:
        for path in sorted({str(self.work), os.path.realpath(self.work)}, key=len, reverse=True):
            text = text.replace(path, "<WORK>")
        for path in sorted({str(self.source), os.path.realpath(self.source)}, key=len, reverse=True):
            text = text.replace(path, "<SOURCE>")
        for port, policy in self.ports.items():
            text = re.sub(rf"127\.0\.0\.1:{port}(?!\d)", f"127.0.0.1:<PORT-{policy}>", text)
        return text

    def stderr(self, text: str, progress: bool) -> str:
        text = MPL_FONT_CACHE.sub("", self.text(text))
        return PROGRESS_TIME.sub("<TIME>", text) if progress else text

    def run_file(self, name: str, text: str) -> str:
        """Files of an eval run folder: fingerprints, latencies, and the concurrent run's line order."""
        for original, normalised in self.fingerprints.items():
            text = text.replace(original, normalised)
        text = LATENCY_NUMBER.sub(r'\1"<LATENCY>"', text)
        text = LATENCY_OBJECT.sub(lambda m: m[1] + JSON_NUMBER_VALUE.sub(r'\1"<LATENCY>"', m[2]) + m[3], text)
        if name == "runs/oai_conc/results.jsonl":
            text = "".join(sorted(text.splitlines(keepends=True)))
        if name.endswith("/run.lock"):  # the process that held the run and when: differs every run
            text = RUN_LOCK_FIELDS.sub(r'\1"<\2>"', text)
        return text

    def learn_fingerprint(self, run_json: Path) -> None:
        """Verify run.json's fingerprint against its settings; map it to the port-normalised one."""
        record = json.loads(run_json.read_text(encoding="utf-8"))
        settings, fingerprint = record.get("settings"), record.get("fingerprint")
        if not isinstance(settings, dict) or not isinstance(fingerprint, str):
            return
        if sha256_bytes(json.dumps(settings, sort_keys=True).encode("utf-8")) != fingerprint:
            print(f"warning: {run_json}: fingerprint is not sha256 of its settings; left as it is", file=sys.stderr)
            return
        normalised = json.loads(self.text(json.dumps(settings)))
        self.fingerprints[fingerprint] = sha256_bytes(json.dumps(normalised, sort_keys=True).encode("utf-8"))


# --------------------------------------------------------------------------- the fixed support files


def load_support(into: Path, repo: Path, ref: str) -> Path:
    """tests/support/* as of `ref`, read with `git show` (read-only) into `into`."""
    for name in SUPPORT_FILES:
        done = subprocess.run(["git", "-C", str(repo), "show", f"{ref}:{name}"], capture_output=True, check=False)
        if done.returncode != 0:
            raise DigestError(f"git show {ref}:{name} in {repo} failed: {done.stderr.decode().strip()}")
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(done.stdout)
    return into


def import_file(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise DigestError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- inputs built by the script


def _needles(messages: list[dict[str, Any]], ask: str) -> list[int]:
    return [i for i, m in enumerate(messages[:-1]) if m["role"] == "user" and m["content"] == ask]


def mutate_openai_rows(source: Path, target: Path) -> None:
    """Six generated rows: 0 answer = another needle's writing, 1 an extra needle, 2 desired_msg_index =
    another needle, 3 desired_msg_index = a distractor ask, 4 answer without its prefix, 5 untouched."""
    table = pq.read_table(source)
    rows = table.to_pylist()
    if len(rows) < 6:
        raise DigestError(f"{source}: expected 6 rows to mutate, found {len(rows)}")
    parsed = []
    for row in rows:
        messages = json.loads(row["prompt"])
        parsed.append((messages, _needles(messages, messages[row["desired_msg_index"]]["content"])))

    def other_needle(i: int) -> int:
        return next(n for n in parsed[i][1] if n != rows[i]["desired_msg_index"])

    rows[0]["answer"] = rows[0]["random_string_to_prepend"] + parsed[0][0][other_needle(0) + 1]["content"]
    messages = parsed[1][0]
    extra = [
        {"role": "user", "content": messages[rows[1]["desired_msg_index"]]["content"]},
        {"role": "assistant", "content": "An extra writing for the same ask."},
    ]
    messages = messages[:-1] + extra + messages[-1:]
    rows[1].update(
        prompt=json.dumps(messages), total_messages=len(messages), n_chars=sum(len(m["content"]) for m in messages)
    )
    rows[2]["desired_msg_index"] = other_needle(2)
    rows[3]["desired_msg_index"] = next(i for i in range(1, len(parsed[3][0]) - 1, 2) if i not in parsed[3][1])
    rows[4]["answer"] = rows[4]["answer"][len(rows[4]["random_string_to_prepend"]) :]
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), target, compression="zstd")


def mutate_v2_csv(source: Path, target: Path, solve: Callable[[str], Any]) -> None:
    """Row 0 answer = another ordinal's writing, row 1 context_len + 1, the rest untouched."""
    csv.field_size_limit(1 << 30)
    with open(source, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        columns, rows = list(reader.fieldnames or []), list(reader)
    solved = solve(rows[0]["queries"])
    rows[0]["answer"] = solved.hash + solved.writings[solved.ordinal % len(solved.writings)]
    rows[1]["context_len"] = str(int(rows[1]["context_len"]) + 1)
    with open(target, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows([row[c] for c in columns] for row in rows)


def mutate_v2_parquet(source: Path, target: Path, solve: Callable[[str], Any]) -> None:
    """Row 0 answer = another ordinal's writing, row 1 view_ops says Append instead of Prepend."""
    table = pq.read_table(source)
    rows = table.to_pylist()
    solved = solve(rows[0]["queries"])
    rows[0]["answer"] = solved.hash + solved.writings[solved.ordinal % len(solved.writings)]
    rows[1]["view_ops"] = rows[1]["view_ops"].replace("Prepend", "Append")
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), target, compression="zstd")


ROWKIT_SCRIPT = """
import pyarrow as pa
from pathlib import Path
from mrcr_gen import MRCR_SCHEMA
from tests.support.rowkit import MUTATIONS, make_row, write_rows

rows = [make_row(0, n_needles=2, filler=400), make_row(1, n_needles=4, filler=400)]
for i, name in enumerate(sorted(MUTATIONS)):
    if name != "wrong_type":
        rows.append(MUTATIONS[name][0](make_row(100 + i, n_needles=3, filler=400)))
write_rows(Path("mut/rowkit.parquet"), rows)
schema = MRCR_SCHEMA.set(MRCR_SCHEMA.get_field_index("n_needles"), pa.field("n_needles", pa.string()))
typed = [MUTATIONS["wrong_type"][0](make_row(s, n_needles=2, filler=400)) for s in (7, 8)]
write_rows(Path("mut/rowkit_wrong_type.parquet"), typed, schema=schema)
"""


def write_openai_responses(data: Path, target: Path, partial: Path) -> None:
    rows = pq.read_table(data, columns=["answer", "random_string_to_prepend"]).to_pylist()
    if len(rows) < 6:
        raise DigestError(f"{data}: expected 6 rows, found {len(rows)}")
    answers = [r["answer"] for r in rows]
    rs = [r["random_string_to_prepend"] for r in rows]
    responses = [
        answers[0],  # exact
        answers[1][:-40],  # truncated
        answers[2][len(rs[2]) :],  # no prefix
        rs[3] + "Something else entirely.",  # prefix, wrong writing
        " " + answers[4],  # leading space: 0 for the official grader, not for the lenient one
        answers[5] + "\nI hope this helps!",  # trailing chatter
    ]
    lines = [json.dumps({"row": i, "response": text}) + "\n" for i, text in enumerate(responses)]
    target.write_text("".join(lines), encoding="utf-8")
    partial.write_text("".join(lines[:3] + lines[4:5]), encoding="utf-8")


def write_v2_responses(data: Path, target: Path) -> None:
    csv.field_size_limit(1 << 30)
    with open(data, newline="", encoding="utf-8") as handle:
        answers = [row["answer"] for row in csv.DictReader(handle)]
    responses = [answers[0], answers[1][:-60], "  " + answers[2] + "\n"]
    target.write_text(
        "".join(json.dumps({"row": i, "response": t}) + "\n" for i, t in enumerate(responses)), encoding="utf-8"
    )


# --------------------------------------------------------------------------- one source tree


@dataclass
class Step:
    name: str
    prog: str  # mrcr-gen, mrcr-validate, mrcr-grade or mrcr-eval
    args: list[str]
    expect: int = 0  # the exit code the baseline gives (any other is reported as UNEXPECTED, and recorded)

    @classmethod
    def of(cls, name: str, command: str, expect: int = 0) -> Step:
        prog, *args = shlex.split(command)
        return cls(name, prog, args, expect)

    @property
    def entry(self) -> str:
        return ENTRIES[self.prog]

    @property
    def command(self) -> str:
        return shlex.join([self.prog, *self.args])


@dataclass
class SourceRun:
    source: Path
    python: str
    support: Path
    verbose: bool = False
    keep: Path | None = None  # write every output as hashed below this folder
    digests: dict[str, str] = field(default_factory=dict)
    facts: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)  # steps whose exit code was not the expected one

    def __post_init__(self) -> None:
        self.source = self.source.resolve()
        root = self.source if (self.source / "mrcr_gen").is_dir() else self.source / "src"
        if not (root / "mrcr_gen").is_dir():
            raise DigestError(f"{self.source}: no mrcr_gen package (neither mrcr_gen/ nor src/mrcr_gen/)")
        self.import_root = root

    # environment --------------------------------------------------------------
    def env(self, tmp: Path, pythonpath: Sequence[Path]) -> dict[str, str]:
        drop = {
            "PYTHONPATH",
            "PYTHONHOME",
            "PYTHONSTARTUP",
            "PYTHONSAFEPATH",
            "PYTHONHASHSEED",
            "COLUMNS",
            "LINES",
            "FORCE_COLOR",
            "NO_COLOR",
            "CLICOLOR_FORCE",
            "TTY_COMPATIBLE",
            "TTY_INTERACTIVE",
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        }
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in drop and not k.startswith(("OPENAI_", "MRCR_GEN_", "RAY_", "HF_"))
        }
        env.update(
            PYTHONPATH=os.pathsep.join(str(p) for p in pythonpath),
            PYTHONDONTWRITEBYTECODE="1",  # never write __pycache__ into the trees
            PYTHONUNBUFFERED="1",
            COLUMNS="120",
            LINES="50",
            TERM="dumb",
            LC_ALL="C.UTF-8",
            TZ="UTC",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
            OPENAI_API_KEY=API_KEY,
            MRCR_GEN_CACHE=str(tmp / "cache"),
            HF_HOME=str(tmp / "hf"),
            HF_HUB_OFFLINE="1",
            OUTPUT_DIGESTS_OPEN_LOG=str(tmp / "opened.log"),
        )
        return env

    # running ------------------------------------------------------------------
    def run(self) -> dict[str, str]:
        started = time.monotonic()
        tmp = Path(tempfile.mkdtemp(prefix="output-digests-")).resolve()
        work = tmp / "work"
        work.mkdir()
        hook = tmp / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
        self.cli_env = self.env(tmp, [self.import_root, hook])
        self.kit_env = self.env(tmp, [self.support, self.import_root, hook])
        self.norm = Normaliser(work=work, source=self.source)
        servers: list[subprocess.Popen[str]] = []
        try:
            self._probe(work)
            self.v2_resolve = import_file("output_digests_v2_resolve", self.support / "tests/support/v2_resolve.py")
            urls = {}
            for policy in ("oracle", "first_needle"):
                server, port = self._start_server(policy, tmp)
                servers.append(server)
                self.norm.ports[port] = policy
                urls[policy] = f"http://127.0.0.1:{port}/v1"
            for step in self.steps(work, urls):
                self._run_step(step, work)
            self._check_opened(tmp / "opened.log")
            self._hash_outputs(work)
        finally:
            for server in servers:
                server.terminate()
                try:
                    server.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    server.kill()
            shutil.rmtree(tmp, ignore_errors=True)
        self.facts.append(f"{len(self.digests)} digests in {time.monotonic() - started:.0f} s")
        return dict(sorted(self.digests.items()))

    def _probe(self, work: Path) -> None:
        code = "import mrcr_gen, sys; print(mrcr_gen.__file__)"
        done = subprocess.run(
            [self.python, "-c", code], cwd=work, env=self.cli_env, capture_output=True, text=True, check=False
        )
        where = Path(done.stdout.strip() or "?")
        if done.returncode != 0 or not where.resolve().is_relative_to(self.source):
            raise DigestError(f"{self.source}: mrcr_gen imports from {where} ({done.stderr.strip()[-300:]})")
        self.facts.append(f"mrcr_gen from {where}")

    def _start_server(self, policy: str, tmp: Path) -> tuple[subprocess.Popen[str], int]:
        env = self.env(tmp, [self.support])
        env.pop("OUTPUT_DIGESTS_OPEN_LOG")
        server = subprocess.Popen(
            [self.python, "-m", "tests.support.chat_server", "--port", "0", "--policy", policy],
            cwd=self.support,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("PORT "):
            server.kill()
            raise DigestError(f"the chat server ({policy}) did not start: {line!r}")
        return server, int(line.split()[1])

    def _run_step(self, step: Step, work: Path) -> None:
        started = time.monotonic()
        done = subprocess.run(
            [self.python, "-c", RUNNER, step.entry, step.prog, *step.args],
            cwd=work,
            env=self.cli_env,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        if self.verbose:
            print(
                f"  {time.monotonic() - started:5.1f}s exit {done.returncode}  {step.command}",
                file=sys.stderr,
            )
        if done.returncode != step.expect:
            # Recorded like any other outcome (its .exit/.stderr digests differ from the baseline's); the
            # run goes on so that one broken command does not hide the state of the others.
            tail = "\n     ".join(done.stderr.strip().splitlines()[-12:])
            self.unexpected.append(step.name)
            print(
                f"   UNEXPECTED: {step.name}: {step.command} exited {done.returncode}, expected {step.expect}:"
                f"\n     {tail}",
                file=sys.stderr,
            )
        self._record(f"cli/{step.name}.exit", f"{done.returncode}\n".encode())
        self._record(f"cli/{step.name}.stdout", self.norm.text(done.stdout).encode())
        self._record(f"cli/{step.name}.stderr", self.norm.stderr(done.stderr, step.prog == "mrcr-gen").encode())

    def _record(self, name: str, data: bytes) -> None:
        """The digest of one output (as hashed: normalised, or canonical for NAME#...); kept with --keep."""
        self.digests[name] = sha256_bytes(data)
        if self.keep is not None:
            target = self.keep / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    def _kit(self, script: str, work: Path) -> None:
        done = subprocess.run(
            [self.python, "-c", script], cwd=work, env=self.kit_env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise DigestError(f"building the rowkit inputs failed:\n{done.stderr.strip()[-2000:]}")

    def _check_opened(self, log: Path) -> None:
        """Every mrcr_gen module and catalog data file any process opened lies inside the source tree."""
        opened = sorted(set(log.read_text(encoding="utf-8").splitlines())) if log.exists() else []
        outside = [p for p in opened if not Path(os.path.realpath(p)).is_relative_to(self.source)]
        if outside:
            raise DigestError(f"{self.source}: files read from outside the tree:\n  " + "\n  ".join(outside[:20]))
        data = sorted({str(Path(p).parent) for p in opened if Path(p).name in DATA_FILES})
        if not data:
            raise DigestError(f"{self.source}: no catalog data file was read (entities.txt, formats.json, ...)")
        self.facts.append(f"{len(opened)} mrcr_gen/data files opened, all inside the tree; data from {', '.join(data)}")

    def _hash_outputs(self, work: Path) -> None:
        for run_json in sorted((work / "runs").glob("*/run.json")):
            self.norm.learn_fingerprint(run_json)
        for path in sorted(p for p in work.rglob("*") if p.is_file()):
            name = path.relative_to(work).as_posix()
            raw = path.read_bytes()
            if path.suffix == ".parquet":
                self._record(name, raw)
                self._record(f"{name}#content", parquet_content(path))
            elif path.suffix == ".png":
                self._record(name, raw)
                self._record(f"{name}#pixels", png_pixels(path))
            else:
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    self._record(name, raw)
                    continue
                text = self.norm.text(text)
                if name.startswith("runs/"):
                    text = self.norm.run_file(name, text)
                self._record(name, text.encode("utf-8"))

    # the fixed command set ------------------------------------------------------
    def steps(self, work: Path, urls: dict[str, str]) -> Iterator[Step]:
        """The fixed command set, in order (later commands read what earlier ones wrote)."""
        oai = "--needles 2 --needles 4 --needles 8 --bin 8192 --bin 16384 --samples 3 --seed 7"
        yield Step.of("gen-oai-workers1", f"mrcr-gen {oai} --workers 1 --out gen/w1")
        yield Step.of("gen-oai-workers-default", f"mrcr-gen {oai} --out gen/wdef")
        yield Step.of(
            "gen-oai-64k",
            "mrcr-gen --needles 2 --needles 8 --bin 65536 --samples 2 --seed 7 --rows-per-file 1 --out gen/b65536",
        )
        yield Step.of(
            "gen-oai-tokens", "mrcr-gen --needles 4 --tokens 20000 --samples 2 --seed 11 --workers 1 --out gen/tokens"
        )
        yield Step.of(
            "gen-oai-shard",
            "mrcr-gen --needles 2 --bin 8192 --samples 4 --rows-per-file 1 --shard 2/3 "
            "--seed 3 --date-added 01-15-2025 --out gen/shard",
        )
        yield Step.of("gen-oai-rerun", f"mrcr-gen {oai} --workers 1 --out gen/w1")
        yield Step.of("gen-oai-refused-tokens-and-bin", "mrcr-gen --tokens 20000 --bin 8192 --out gen/no", expect=2)
        yield Step.of(
            "gen-oai-refused-date", "mrcr-gen --date-added 02-30-2025 --bin 8192 --samples 1 --out gen/no", expect=2
        )
        yield Step.of(
            "gen-v2-csv",
            "mrcr-gen --recipe mrcr-v2 --needles 2 --needles 8 --bin 8192 --bin 16384 "
            "--samples 3 --seed 5 --out v2/csv",
        )
        yield Step.of(
            "gen-v2-parquet",
            "mrcr-gen --recipe mrcr-v2 --needles 4 --bin 8192 --bin 65536 --samples 2 "
            "--seed 5 --format parquet --out v2/pq",
        )
        yield Step.of(
            "gen-v2-tokens",
            "mrcr-gen --recipe mrcr-v2 --needles 2 --tokens 12000 --samples 3 "
            "--rows-per-transcript 1 --seed 9 --out v2/tokens",
        )

        # inputs built here from what was generated: mutated files, responses
        for folder in ("mut", "responses", "report", "clean"):
            (work / folder).mkdir()
        solve = self.v2_resolve.solve
        mutate_openai_rows(work / "gen/w1/4needle/4needle_0.parquet", work / "mut/oai_mutated.parquet")
        mutate_v2_csv(work / "v2/csv/8needle/mrcr_v2_8needle_in_(4096,8192).csv", work / "mut/v2_mutated.csv", solve)
        mutate_v2_parquet(
            work / "v2/pq/4needle/mrcr_v2_4needle_in_(4096,8192).parquet", work / "mut/v2_mutated.parquet", solve
        )
        self._kit(ROWKIT_SCRIPT, work)
        oai_data = "gen/w1/2needle/2needle_0.parquet"
        v2_data = "'v2/csv/2needle/mrcr_v2_2needle_in_(8192,16384).csv'"
        write_openai_responses(work / oai_data, work / "responses/oai.jsonl", work / "responses/oai_partial.jsonl")
        write_v2_responses(work / shlex.split(v2_data)[0], work / "responses/v2.jsonl")

        yield Step.of(
            "validate-gen-workers1", "mrcr-validate gen/w1 gen/b65536 gen/tokens gen/shard --json - --workers 1"
        )
        yield Step.of("validate-gen-workers-default", "mrcr-validate gen/wdef --json report/gen_wdef.json")
        yield Step.of("validate-v2", "mrcr-validate v2 --json -")
        yield Step.of("validate-mut-oai-json", "mrcr-validate mut/oai_mutated.parquet --json -", expect=1)
        yield Step.of(
            "validate-mut-rowkit-json",
            "mrcr-validate mut/rowkit.parquet mut/rowkit_wrong_type.parquet --json -",
            expect=1,
        )
        yield Step.of(
            "validate-mut-rowkit-strict",
            "mrcr-validate mut/rowkit.parquet --strict --no-tokens --json report/rowkit_strict.json --max-findings 100",
            expect=1,
        )
        yield Step.of(
            "validate-mut-v2-json", "mrcr-validate mut/v2_mutated.csv mut/v2_mutated.parquet --json -", expect=1
        )
        yield Step.of(
            "validate-clean-oai", "mrcr-validate mut/oai_mutated.parquet mut/rowkit.parquet --clean clean/oai", expect=1
        )
        yield Step.of(
            "validate-fix-oai", "mrcr-validate mut/oai_mutated.parquet --fix clean/oai_fixed.parquet", expect=1
        )
        yield Step.of("validate-clean-v2-csv", "mrcr-validate mut/v2_mutated.csv --clean clean/v2_clean.csv", expect=1)
        yield Step.of(
            "validate-clean-v2-parquet", "mrcr-validate mut/v2_mutated.parquet --clean clean/v2_clean.parquet", expect=1
        )
        yield Step.of("validate-cleaned", "mrcr-validate clean --json -")

        yield Step.of("grade-oai-table", f"mrcr-grade {oai_data} responses/oai.jsonl")
        yield Step.of("grade-oai-json", f"mrcr-grade {oai_data} responses/oai.jsonl --json")
        yield Step.of(
            "grade-oai-allow-missing", f"mrcr-grade {oai_data} responses/oai_partial.jsonl --allow-missing --json"
        )
        yield Step.of("grade-oai-missing-refused", f"mrcr-grade {oai_data} responses/oai_partial.jsonl", expect=2)
        yield Step.of("grade-v2-table", f"mrcr-grade {v2_data} responses/v2.jsonl")
        yield Step.of("grade-v2-json", f"mrcr-grade {v2_data} responses/v2.jsonl --json")

        oracle = f"--model test-oracle --base-url {urls['oracle']}"
        first = f"--model test-first_needle --base-url {urls['first_needle']}"
        eval_oai = f"mrcr-eval gen/w1/2needle gen/w1/8needle {oracle} --out runs/oai --concurrency 1 " + (
            "--price-in 1 --price-out 4"
        )
        yield Step.of("eval-oai", eval_oai)
        yield Step.of("eval-oai-resume", eval_oai)
        yield Step.of(
            "eval-oai-concurrent",
            f"mrcr-eval gen/w1 gen/b65536 {oracle} --out runs/oai_conc "
            "--concurrency 4 --max-context-window 12000 --needles 2 --needles 8",
        )
        yield Step.of(
            "eval-oai-first-needle",
            f"mrcr-eval gen/w1/8needle gen/tokens {first} --out runs/first --concurrency 1 --price-in 1 --price-out 4",
        )
        yield Step.of("eval-v2-csv", f"mrcr-eval v2/csv {oracle} --out runs/v2 --concurrency 1")
        yield Step.of("eval-v2-parquet-first-needle", f"mrcr-eval v2/pq {first} --out runs/v2_first --concurrency 1")
        yield Step.of(
            "eval-rowkit-errors",
            f"mrcr-eval mut/rowkit.parquet {oracle} --out runs/rowkit --concurrency 1 --max-retries 0",
            expect=1,
        )
        yield Step.of("eval-report", "mrcr-eval report runs/oai")
        yield Step.of("eval-compare-json", "mrcr-eval compare runs/oai runs/first runs/v2 --json")
        yield Step.of(
            "eval-compare-table",
            "mrcr-eval compare runs/oai runs/first runs/v2_first runs/rowkit --plot runs/compare.png",
        )


# --------------------------------------------------------------------------- files and reports


def versions() -> dict[str, str]:
    found = {"python": sys.version.split()[0]}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def describe_tree(tree: Path) -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else "?"

    dirty = " + uncommitted changes" if git("status", "--porcelain", "--untracked-files=no") else ""
    return f"commit {git('rev-parse', '--short', 'HEAD')} ({git('log', '-1', '--format=%s')[:80]}){dirty}"


def format_digests(digests: dict[str, str]) -> str:
    return "".join(f"{digest}  {name}\n" for name, digest in digests.items())


def read_digests(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(name -> digest, recorded library versions) of a --record file."""
    digests: dict[str, str] = {}
    recorded: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# versions: "):
            recorded = dict(item.split("=", 1) for item in line.removeprefix("# versions: ").split())
        if not line.strip() or line.startswith("#"):
            continue
        digest, _, name = line.partition("  ")
        digests[name] = digest
    return digests, recorded


def compare(before: dict[str, str], after: dict[str, str], labels: tuple[str, str], full: bool) -> int:
    """A side-by-side table (every line when `full`, else the differences); the number of differences."""
    names = sorted(set(before) | set(after))
    differences = 0
    print(f"{'':2}{labels[0][:16]:<17}{labels[1][:16]:<17}name")
    for name in names:
        a, b = before.get(name), after.get(name)
        mark = "  " if a == b else ("- " if b is None else "+ " if a is None else "! ")
        differences += a != b
        if full or a != b:
            print(f"{mark}{(a or 'missing')[:16]:<17}{(b or 'missing')[:16]:<17}{name}")
    print(f"{differences} of {len(names)} outputs differ" if differences else f"all {len(names)} outputs identical")
    return differences


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--source", action="append", required=True, type=Path, help="a source tree (repeat once to compare two trees)"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--record", type=Path, help="write the digests of the one --source to FILE")
    mode.add_argument("--check", type=Path, help="compare each --source with FILE; exit 1 on any difference")
    parser.add_argument("--python", default=sys.executable, help="Python of the venv to run (default: this one)")
    parser.add_argument(
        "--support-ref",
        default=SUPPORT_REF,
        help="commit whose tests/support/ files drive the runs (default %(default)s)",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="print each command with its time and exit code")
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="write every output as it was hashed to DIR/1, DIR/2 (one per --source), for diff -r",
    )
    args = parser.parse_args(argv)
    if len(args.source) > 2:
        parser.error("at most two --source trees")
    if args.record is not None and len(args.source) != 1:
        parser.error("--record takes exactly one --source")

    repo = Path(__file__).resolve().parent.parent
    results: list[dict[str, str]] = []
    unexpected: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="output-digests-support-") as support:
            load_support(Path(support), repo, args.support_ref)
            for number, source in enumerate(args.source, 1):
                print(f"== {source}: {describe_tree(source)}", file=sys.stderr)
                keep = None if args.keep is None else args.keep / str(number)
                if keep is not None and keep.exists():
                    shutil.rmtree(keep)
                run = SourceRun(source, args.python, Path(support), verbose=args.verbose, keep=keep)
                results.append(run.run())
                unexpected += run.unexpected
                for fact in run.facts:
                    print(f"   {fact}", file=sys.stderr)
    except DigestError as exc:
        print(f"output_digests: error: {exc}", file=sys.stderr)
        return 2

    if args.record is not None:
        if unexpected:
            print(
                f"output_digests: error: not recorded: unexpected exit codes in {', '.join(unexpected)}",
                file=sys.stderr,
            )
            return 2
        source = args.source[0]
        header = [
            "# scripts/output_digests.py: sha256 of mrcr-gen's outputs (normalised as its docstring says)",
            f"# source: {source} at {describe_tree(source)}",
            f"# support files: tests/support/ at {args.support_ref}",
            "# versions: " + " ".join(f"{k}={v}" for k, v in versions().items()),
            f"# check: python scripts/output_digests.py --source TREE --check {args.record}",
        ]
        args.record.write_text("\n".join(header) + "\n" + format_digests(results[0]), encoding="utf-8")
        print(f"recorded {len(results[0])} digests in {args.record}", file=sys.stderr)
        return 0
    if args.check is not None:
        expected, recorded = read_digests(args.check)
        current = versions()
        changed = {k: (v, current.get(k)) for k, v in recorded.items() if current.get(k) != v}
        for name, (old, new) in changed.items():
            print(
                f"warning: {name} {old} when recorded, {new} now: raw parquet/PNG digests may differ "
                "(compare their #content/#pixels lines)",
                file=sys.stderr,
            )
        failed = 0
        for source, digests in zip(args.source, results, strict=True):
            print(f"{source} against {args.check}:")
            failed += compare(expected, digests, ("recorded", "now"), full=False)
        return 1 if failed else 0
    if len(results) == 2:
        return 1 if compare(results[0], results[1], (str(args.source[0]), str(args.source[1])), full=True) else 0
    sys.stdout.write(format_digests(results[0]))
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
