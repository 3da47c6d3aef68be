"""Issue 34, deliverable 3: every paid reply used once and costed once, as Hypothesis state machines.

A machine drives one run folder (and one folder of imports) through random sequences of commands
against the loopback server (tests/support/chat_server.py: its Files and Batches APIs, and its
ledger of what was sent, billed and delivered, tests/support/ledger.py): online runs, `--batch`,
`--batch --no-wait`, reruns with narrower or wider selections (`--needles`, `--per-bin`,
`--limit`), commands SIGKILLed while the server holds one of their requests or API calls, batches
that expire, fail, vanish or come back with torn, duplicated or conflicting lines, dated model
names, a model the server does not know, and `mrcr-eval batch import`. Only the commands are
used (run in this process, or in a forked child process SIGKILLed at a point the server holds it). After every step:

1. resend: no row whose reply was received is sent again unless that reply was an error (a reply
   is received when a command that was not killed downloaded it, or the folder holds it); and a
   command sends only rows it selects;
2. cost: no request is costed twice: a summary's usage is at most that of the replies billed for
   its selection, each costed once (and, for rows of the same content, no more replies than rows),
   and at least one reply per distinct request once the selection is complete;
3. recoverable: a rerun of the whole selection against a healthy server (on a copy of the folder,
   the server checkpointed before and restored after, so the probe changes nothing) exits 0, or
   a second one does (the first may only collect batches that ended in errors);
4. equal: its summary, as every complete summary a step writes, equals a fresh online run's on the
   same selection, but for how the replies were obtained and what they cost (a folder that got
   two replies that differ for one request is exempt: which one counts is the implementation's
   documented choice; `test_issue_34_item_6_*` checks that it does not depend on line order);
5. a model the server does not know stops a run for good (exit 2), online or through batches.

`test_paid_replies_on_main_paths` draws only from what today's main handles (it shows the harness
works); `test_paid_replies_everywhere` draws from every case of issue 34; the `test_issue_34_*`
tests replay the shortest sequence that broke each item. The examples are few (CI-sized; at least
3 steps each) and drawn from a seed printed with the test's output: MRCR_STATE_SEED=N draws the
same sequences again, MRCR_STATE_EXAMPLES=N draws N of them, MRCR_STATE_SHRINK=1 shrinks a failing
one (minutes; a failure also prints its `@reproduce_failure` blob).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from mrcr_gen import generate_sample, iter_rows, write_rows
from mrcr_gen.cli import eval_main
from tests.support.chat_server import BatchBehaviour, ChatServer, Fault
from tests.support.ledger import DELIVERED, SENT, Event, Usage, checkpoint, request_key, restore
from tests.support.processes import Forker, command_env

from .conftest import API_KEY

MODEL = "test-model"
PRICES = ("--price-in", "1", "--price-out", "4")  # `batch import` has no --price-cached (issue 34 item 5)
CACHED_SHARE = 0.5  # of every prompt, reported as cached, online and in batches
SNAPSHOT = "2025-04-14"
SELECTIONS: dict[str, tuple[str, ...]] = {
    "all": (),
    "needles 2": ("--needles", "2"),
    "needles 4": ("--needles", "4"),
    "per-bin 1": ("--per-bin", "1"),
    "limit 2": ("--limit", "2"),
}
EXPORTABLE = ("all", "needles 2", "needles 4", "limit 2")  # `batch export` has no --per-bin (item 11)
OUTCOMES: dict[str, dict[str, Any]] = {
    "completed": {},
    "expired": {"expire_after": 1},
    "failed": {"fail": "token_limit_exceeded"},
    "duplicated": {"duplicate": True},
    "torn": {"torn": True},
    "conflicting": {"conflict": True},
    "conflicting first": {"conflict": True, "conflict_first": True},
}
#: Where a batch command is killed: while the server holds this API call (its work done).
BATCH_KILLS = ("upload", "create", "retrieve", "content")
#: Summary fields that say how the replies were obtained and priced, not what they scored (the
#: usage too: a batch sends rows of the same content once; the cost invariant checks it).
HOW = (
    "settings",
    "price_per_1m",
    "cost_usd",
    "cost_without_cache_usd",
    "cache_saved_usd",
    "latency_s",
    "base_url",
    "usage",
)
EXAMPLES = int(os.environ.get("MRCR_STATE_EXAMPLES", "0"))
SEED = int(os.environ.get("MRCR_STATE_SEED") or random.SystemRandom().randrange(1 << 32))


def without(record: dict, keys: Collection[str]) -> dict:
    return {k: v for k, v in record.items() if k not in keys}


def cli(args: list[str]) -> tuple[int, str]:
    """Run `mrcr-eval ARGS` in this process: (exit code, stderr)."""
    err = io.StringIO()
    code: Any = 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            eval_main(args)
        except SystemExit as exc:
            code = exc.code
    return int(code or 0), err.getvalue().strip()[-600:]


# ----------------------------------------------------------------------- data and references


@dataclass
class Reference:
    """A fresh online run of a selection: its summary, its distinct requests, one reply's usage
    each, and the selected rows of each request content."""

    summary: dict
    keys: frozenset[str]
    usage: dict[str, Usage]
    rows: Counter[str]

    def costed_once(self, billed: dict[str, list[Event]]) -> Usage:
        """The usage of the `billed` replies of the selection, each reply costed once and no more
        replies of a content costed than the selection has rows of it (a batch sends rows of the
        same content once, an online run may send each)."""
        return sum((self.usage[k] * min(len(billed.get(k, ())), self.rows[k]) for k in self.keys), Usage())

    def each_once(self) -> Usage:
        """The usage of one reply of each request content of the selection: what a complete summary
        reports at least."""
        return sum((self.usage[k] for k in self.keys), Usage())


@dataclass
class Data:
    """A parquet file of small 8192-bin rows, the content key of each row, and its references."""

    path: Path
    keys: dict[tuple[str, int], str]
    references: dict[str, Reference]

    def rows_of(self, key: str) -> int:
        return sum(found == key for found in self.keys.values())

    def reference(self, selection: str) -> Reference:
        if selection not in self.references:
            out = self.path.parent / f"reference-{self.path.stem}-{len(self.references)}"
            with ChatServer("oracle", cached_share=CACHED_SHARE) as server:
                args = [str(self.path), "-m", MODEL, "--base-url", server.base_url, "-o", str(out), *PRICES, "-q"]
                code, err = cli([*args, *SELECTIONS[selection]])
                assert code == 0, err
                billed = server.ledger.billed()
            assert set(billed) <= set(self.keys.values()), "the rows' content keys are not what is sent"
            summary = json.loads((out / "summary.json").read_text())
            records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
            rows = Counter(self.keys[(r["file"], r["row"])] for r in records if r.get("status") == "ok")
            usage = {k: e[0].usage for k, e in billed.items()}
            self.references[selection] = Reference(summary, frozenset(billed), usage, rows)
        return self.references[selection]


@pytest.fixture(scope="module")
def state_data(tmp_path_factory) -> dict[str, Data]:
    """`distinct`: 4 rows (2 and 4 needles, two each); `twins`: the same and a copy of the first
    (the same content: one request serves both)."""
    folder = tmp_path_factory.mktemp("state")
    rows = [generate_sample(n_needles=n, bin_upper=8192, seed=s).row for n, s in ((2, 1), (2, 2), (4, 3), (4, 4))]
    found = {}
    for name, chosen in (("distinct", rows), ("twins", [*rows, rows[0]])):
        path = (folder / f"{name}.parquet").resolve()
        write_rows(chosen, path)
        keys = {(str(path), i): request_key(json.loads(row.prompt)) for i, row in enumerate(iter_rows(path))}
        found[name] = Data(path, keys, {})
    return found


# ----------------------------------------------------------------------- the machine


@dataclass(frozen=True)
class Profile:
    """What a machine may draw."""

    data: str
    batch_selections: tuple[str, ...]
    outcomes: tuple[str, ...]
    import_outcomes: tuple[str, ...]
    snapshots: tuple[str | None, ...]
    unknown_model: tuple[str, ...]  # the modes a run of an unknown model is tried in
    vanish: bool
    examples: int


#: What today's main handles: the harness's own check.
MAIN_PATHS = Profile(
    data="distinct",
    batch_selections=("all",),
    outcomes=("completed", "expired", "failed", "duplicated"),
    import_outcomes=("completed", "expired", "duplicated"),
    snapshots=(None,),
    unknown_model=("online",),
    vanish=False,
    examples=3,
)
#: Every case of issue 34.
EVERYWHERE = Profile(
    data="twins",
    batch_selections=tuple(SELECTIONS),
    outcomes=tuple(OUTCOMES),
    import_outcomes=tuple(OUTCOMES),
    snapshots=(None, SNAPSHOT),
    unknown_model=("online", "batch"),
    vanish=True,
    examples=4,
)


@dataclass
class Step:
    code: int
    killed: bool
    err: str
    events: list[Event]

    def __repr__(self) -> str:  # short, in pytest's assertion messages
        return f"Step(exit {self.code}{', killed' if self.killed else ''}, {len(self.events)} ledger events)"


class PaidReplies(RuleBasedStateMachine):
    """The state and the checks; `machine_for` adds the rules a `Profile` allows."""

    DATA: Data
    FOLDER: Path
    FORKER: Forker

    def __init__(self) -> None:
        super().__init__()
        self.server: ChatServer | None = None
        self.home = Path(tempfile.mkdtemp(dir=self.FOLDER))
        self.out = self.home / "run"
        self.imported = self.home / "imported"
        self.received: set[str] = set()  # content keys whose HTTP-200 reply this folder received
        self.resent: Counter[str] = Counter()  # content keys sent again after that, by their other rows
        self.conflicted: dict[str, set[str]] = {"main": set(), "import": set()}  # keys given two replies
        self.history: list[str] = []

    # ------------------------------------------------------------ plumbing
    def open(self, snapshot: str | None) -> None:
        self.server = ChatServer("oracle", cached_share=CACHED_SHARE, snapshot=snapshot, known_models=[MODEL]).start()
        self.history.append(f"server{' naming dated models' if snapshot else ''}")

    def teardown(self) -> None:
        print(f"state machine sequence: {self.where()}")  # shown by pytest -s, and beside a failure
        if self.server is not None:
            self.server.unstall()
            self.server.stop()
        shutil.rmtree(self.home, ignore_errors=True)

    @property
    def chat(self) -> ChatServer:
        assert self.server is not None
        return self.server

    def args(self, out: Path, selection: str, *, mode: str, model: str = MODEL) -> list[str]:
        args = [str(self.DATA.path), "-m", model, "--base-url", self.chat.base_url, "-o", str(out), *PRICES, "-q"]
        args += SELECTIONS[selection]
        if mode != "online":
            args += ["--batch", "--poll-interval", "0.01", *(["--no-wait"] if mode == "no-wait" else [])]
        return args

    def where(self) -> str:
        return " -> ".join(self.history)

    def run(self, args: list[str], *, tag: str, ready: Callable[[], bool] | None = None) -> Step:
        """Run one command (killed once `ready()`, if given), then make the server healthy again."""
        chat = self.chat
        chat.tag = tag
        start = len(chat.ledger)
        if ready is None:
            code, err = cli(args)
            killed = False
        else:
            code, killed = self.FORKER.kill_when(args, ready)
            err = "(killed)" if killed else "(in a child process)"
            self.history[-1] += "" if killed else " (ended first)"
            chat.unstall()
        chat.batch_behaviour, chat.faults = BatchBehaviour(), None
        return Step(code, killed, err, chat.ledger.since(start))

    def mode_of(self, out: Path) -> str | None:
        """The mode of the run folder's settings (online or batch), None before its first command."""
        run = out / "run.json"
        if not run.exists():
            return None
        return "batch" if json.loads(run.read_text())["settings"].get("batch") == "api" else "online"

    def held_in_folder(self, out: Path, events: list[Event]) -> set[str]:
        """The keys of the delivered replies a killed command left in its folder (in any file, or
        graded in results.jsonl)."""
        texts = [p.read_text(errors="replace") for p in out.rglob("*") if p.is_file() and p.suffix != ".png"]
        found = {e.key for e in events if e.kind == DELIVERED and e.ok and any(f'"{e.reply_id}"' in t for t in texts)}
        results = out / "results.jsonl"
        for line in results.read_text().splitlines() if results.exists() else []:
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("status") == "ok":
                    found.add(self.DATA.keys[(record["file"], record["row"])])
        return found

    # ------------------------------------------------------------ invariants
    def check_sends(self, step: Step, selected: frozenset[str], tags: Collection[str], what: str) -> Counter[str]:
        """Invariant 1: nothing received is sent again, nothing unselected is sent. Rows of the same
        content are one request to the server: an online run may send each of them (each is a row
        of its own), so a content may be sent again once for each of its other rows. Returns the
        resends counted (the caller keeps them for a command that stays)."""
        seen, resent = set(self.received), Counter(self.resent)
        for event in step.events:
            if event.tag not in tags:
                continue
            if event.kind == SENT:
                assert event.key in selected, (
                    f"{what}: sent a row it does not select [invariant: resend] {self.where()}"
                )
                if event.key in seen:
                    resent[event.key] += 1
                    assert resent[event.key] < self.DATA.rows_of(event.key), (
                        f"{what}: sent ({event.channel}) a row whose reply was received "
                        f"[invariant: resend] {self.where()}"
                    )
            elif event.kind == DELIVERED and event.ok and not step.killed:
                seen.add(event.key)
        return resent

    def check_summary(self, summary: dict, reference: Reference, tags: Collection[str], what: str) -> None:
        """Invariants 2 (cost) and 4 (equal, once complete: unless replies conflicted)."""
        for event in self.chat.ledger.events:
            if event.conflict and event.tag in tags:
                self.conflicted["import" if "import" in tags else "main"].add(event.key)
        bound = reference.costed_once(self.chat.ledger.billed(tags))
        usage = summary["usage"]
        reported = Usage(usage["prompt_tokens"], usage["completion_tokens"], usage.get("cached_tokens") or 0)
        for name, got, most in zip(("prompt", "completion", "cached"), reported.fields(), bound.fields(), strict=True):
            assert got <= most, (
                f"{what}: reports {got} {name} tokens, more than the {most} of the replies billed for its "
                f"selection, each costed once [invariant: cost] {self.where()}"
            )
        if summary["complete"]:
            least = reference.each_once()
            assert all(a >= b for a, b in zip(reported.fields(), least.fields(), strict=True)), (
                f"{what}: complete, but its usage {reported} is less than one reply per request, {least} "
                f"[invariant: cost] {self.where()}"
            )
            if reference.keys & self.conflicted["import" if "import" in tags else "main"]:
                return
            assert without(summary, HOW) == without(reference.summary, HOW), (
                f"{what}: complete, but its summary differs from a fresh online run's (mean_score "
                f"{summary['mean_score']} vs {reference.summary['mean_score']}) [invariant: equal] {self.where()}"
            )

    def after_command(self, step: Step, selection: str, mode: str, folder_mode: str | None, what: str) -> None:
        """The checks of a command on the run folder, then the probe."""
        if folder_mode is not None and folder_mode != mode.replace("no-wait", "batch"):
            assert step.code == 2 and not [e for e in step.events if e.kind == SENT], f"{what}: {step.err}"
            return
        reference = self.DATA.reference(selection)
        self.resent = self.check_sends(step, reference.keys, {"main"}, what)
        delivered = [e for e in step.events if e.tag == "main"]
        if step.killed:
            self.received |= self.held_in_folder(self.out, delivered)
        else:
            self.received |= {e.key for e in delivered if e.kind == DELIVERED and e.ok}
            assert step.code in (0, 1), f"{what}: exit {step.code} on its own run folder: {step.err} {self.where()}"
            self.check_summary(json.loads((self.out / "summary.json").read_text()), reference, {"main"}, what)
        self.probe()

    @contextlib.contextmanager
    def probing(self, folder: Path) -> Iterator[Path]:
        """A copy of `folder` to rerun in; the server's state is restored after (a probe changes nothing)."""
        saved = checkpoint(self.chat)
        copy = self.home / f"probe-{folder.name}"
        try:
            if folder.exists():
                shutil.copytree(folder, copy)
            yield copy
        finally:
            restore(self.chat, saved)
            shutil.rmtree(copy, ignore_errors=True)

    def probe(self) -> None:
        """Invariants 3 and 4: a rerun of everything on a copy of the folder, the server healthy."""
        with self.probing(self.out) as copy:
            mode = self.mode_of(self.out) or "online"
            step = self.run(self.args(copy, "all", mode=mode), tag="probe")
            if step.code == 1:  # batches that ended in errors collected: the next rerun sends their rows again
                again = self.run(self.args(copy, "all", mode=mode), tag="probe")
                step = Step(again.code, False, again.err, step.events + again.events)
            assert step.code == 0, (
                f"not recoverable: a {mode} rerun of everything exits {step.code}: {step.err} "
                f"[invariant: recoverable] {self.where()}"
            )
            reference = self.DATA.reference("all")
            self.check_sends(step, reference.keys, {"main", "probe"}, f"the {mode} rerun of everything")
            summary = json.loads((copy / "summary.json").read_text())
            self.check_summary(summary, reference, {"main", "probe"}, f"the {mode} rerun of everything")

    # ------------------------------------------------------------ steps
    def online(self, selection: str, kill_at: int | None) -> None:
        """An online run; killed while the server holds its `kill_at`-th request."""
        chat = self.chat
        self.history.append(f"online {selection}" + (f" killed at request {kill_at}" if kill_at else ""))
        folder_mode = self.mode_of(self.out)
        ready = None
        if kill_at is not None:
            target = chat.total_requests + kill_at
            chat.faults = lambda number, body: Fault("stall") if number == target else None
            ready = lambda: chat.stalled > 0  # noqa: E731
        step = self.run(self.args(self.out, selection, mode="online"), tag="main", ready=ready)
        self.after_command(step, selection, "online", folder_mode, self.history[-1])

    def batch(self, selection: str, mode: str, outcome: str, kill_at: str | None, hold: bool) -> None:
        """A `--batch` run (`mode` no-wait: `--no-wait`, its batches `hold`ing in progress); the
        batches that end meanwhile end as `outcome`; killed while the server holds `kill_at`."""
        chat = self.chat
        held = hold and mode == "no-wait"
        self.history.append(
            f"{mode} {selection} {outcome}{' held' if held else ''}" + (f" killed at {kill_at}" if kill_at else "")
        )
        folder_mode = self.mode_of(self.out)
        faults = {} if kill_at is None else {kill_at: {chat.api_calls[kill_at] + 1: Fault("stall")}}
        chat.batch_behaviour = BatchBehaviour(hold=held, api_faults=faults, **OUTCOMES[outcome])
        ready = None if kill_at is None else (lambda: chat.stalled > 0)
        step = self.run(self.args(self.out, selection, mode=mode), tag="main", ready=ready)
        self.after_command(step, selection, mode, folder_mode, self.history[-1])

    def vanish(self, what: str) -> None:
        """The account forgets every batch and file (`batches`) or every file (`files`)."""
        self.history.append(f"{what} vanish")
        self.chat.vanish(batches=what == "batches", files=True)
        self.probe()

    def unknown_model(self, mode: str) -> None:
        """Invariant 5: a run of a model the server does not know exits 2 (online: at its first reply)."""
        self.history.append(f"{mode} run of an unknown model")
        out = self.home / f"unknown-{mode}"
        step = self.run(self.args(out, "all", mode=mode, model="no-such-model"), tag="scratch")
        assert step.code == 2, (
            f"a {mode} run of a model the server does not know exits {step.code}, not 2 as online "
            f"[invariant: refused for good] {self.where()}"
        )

    def answered(self, requests: Path, results: Path) -> Path:
        """The server's Batch API run on a batch input file; its error lines, then its output lines."""
        client = openai.OpenAI(base_url=self.chat.base_url, api_key=API_KEY, max_retries=0)
        uploaded = client.files.create(file=requests, purpose="batch")
        made = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        ended = client.batches.retrieve(made.id)
        files = [ended.error_file_id, ended.output_file_id]
        results.write_bytes(b"".join(client.files.content(f).read() for f in files if f))
        client.close()
        return results

    def imported_into(self, out: Path, selection: str, outcome: str, tag: str) -> tuple[int, str]:
        """`batch export` of `selection`, the server's batch run of it (ending as `outcome`, its
        requests under `tag`), `batch import` of its files into `out`: (exit code, stderr)."""
        requests, results = self.home / "requests.jsonl", self.home / "results.jsonl"
        data = str(self.DATA.path)
        code, err = cli(["batch", "export", data, "-o", str(requests), "-m", MODEL, *SELECTIONS[selection]])
        assert code == 0, err
        chat = self.chat
        chat.tag, chat.batch_behaviour = tag, BatchBehaviour(**OUTCOMES[outcome])
        self.answered(requests, results)
        chat.batch_behaviour = BatchBehaviour()
        return cli(
            ["batch", "import", str(results), data, "-o", str(out), "-m", MODEL, *PRICES, "-q", *SELECTIONS[selection]]
        )

    def import_results(self, selection: str, outcome: str) -> None:
        """An import of a batch run of `selection` that ended as `outcome`, then the probe."""
        self.history.append(f"import {selection} {outcome}")
        code, err = self.imported_into(self.imported, selection, outcome, "import")
        what = self.history[-1]
        assert code in (0, 1), f"{what}: an import of the server's own batch output exits {code}: {err} {self.where()}"
        summary = json.loads((self.imported / "summary.json").read_text())
        self.check_summary(summary, self.DATA.reference(selection), {"import"}, what)
        with self.probing(self.imported) as copy:  # invariants 3 and 4 for the imports
            code, err = self.imported_into(copy, "all", "completed", "probe")
            assert code == 0, f"imports not recoverable: importing everything exits {code}: {err} {self.where()}"
            summary = json.loads((copy / "summary.json").read_text())
            self.check_summary(summary, self.DATA.reference("all"), {"import", "probe"}, "importing everything")


def machine_for(profile: Profile, data: Data, folder: Path, forker: Forker) -> type[PaidReplies]:
    """The state machine of `profile`: one rule, a command drawn from what the profile allows
    (a batch run twice as often as the others; the simplest draw, where shrinking goes, first)."""
    kinds = ("batch", "online", "batch", "import", "unknown model", *(("vanish",) if profile.vanish else ()))
    exportable = tuple(s for s in EXPORTABLE if s in (*profile.batch_selections, "needles 2"))

    class Machine(PaidReplies):
        DATA, FOLDER, FORKER = data, folder, forker

        @initialize(snapshot=st.sampled_from(profile.snapshots))
        def start(self, snapshot: str | None) -> None:
            self.open(snapshot)

        @rule(data=st.data())
        def command(self, data: st.DataObject) -> None:
            kind = data.draw(st.sampled_from(kinds), label="command")
            if kind == "batch":
                self.batch(
                    data.draw(st.sampled_from(profile.batch_selections), label="selection"),
                    data.draw(st.sampled_from(("batch", "no-wait")), label="mode"),
                    data.draw(st.sampled_from(profile.outcomes), label="outcome"),
                    data.draw(st.sampled_from((None, None, *BATCH_KILLS)), label="kill at"),
                    data.draw(st.booleans(), label="hold"),
                )
            elif kind == "online":
                selection = data.draw(st.sampled_from(tuple(SELECTIONS)), label="selection")
                self.online(selection, data.draw(st.sampled_from((None, None, 1, 3)), label="kill at"))
            elif kind == "import":
                selection = data.draw(st.sampled_from(exportable), label="selection")
                self.import_results(selection, data.draw(st.sampled_from(profile.import_outcomes), label="outcome"))
            elif kind == "unknown model":
                self.unknown_model(data.draw(st.sampled_from(profile.unknown_model), label="mode"))
            else:
                self.vanish(data.draw(st.sampled_from(("batches", "files")), label="what"))

    Machine.__name__ = Machine.__qualname__ = f"PaidReplies_{profile.data}"
    return Machine


def run_machine(profile: Profile, state_data: dict[str, Data], tmp_path: Path, forker: Forker) -> None:
    print(f"state machine seed {SEED}: MRCR_STATE_SEED={SEED} draws the same sequences")
    machine = seed(SEED)(machine_for(profile, state_data[profile.data], tmp_path, forker))
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=EXAMPLES or profile.examples,
            stateful_step_count=4,
            deadline=None,
            print_blob=True,
            database=None,
            # A failure prints its whole sequence (at most 4 steps); shrinking it takes minutes.
            phases=tuple(Phase) if os.environ.get("MRCR_STATE_SHRINK") else (Phase.explicit, Phase.generate),
            suppress_health_check=list(HealthCheck),
        ),
        _min_steps=3,
    )


def fake_plots(monkeypatch: Any = None) -> None:
    """PNG files written without drawing them: the plots are 90% of a command's time here, and no
    invariant looks at them."""
    from matplotlib.figure import Figure

    def savefig(self: Any, fname: Any, *args: Any, **kwargs: Any) -> None:
        Path(fname).write_bytes(b"\x89PNG")

    patch = monkeypatch.setattr if monkeypatch is not None else setattr
    patch(Figure, "tight_layout", lambda self, *args, **kwargs: None)
    patch(Figure, "savefig", savefig)


@pytest.fixture()
def api_env(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    fake_plots(monkeypatch)


@pytest.fixture(scope="module")
def forker():
    """The commands to be killed run in children of a fork server that imported mrcr-eval once."""
    env = command_env(OPENAI_API_KEY=API_KEY)
    env.pop("OPENAI_BASE_URL", None)
    running = Forker("mrcr_gen.cli:eval_main", "tests.eval.test_batch_state_machine:fake_plots", env=env)
    yield running
    running.close()


def test_paid_replies_on_main_paths(state_data, tmp_path, api_env, forker):
    """The harness on what main handles: online runs of any selection, batches of everything
    (completed, expired, failed, duplicated lines), kills, imports, an unknown model online."""
    run_machine(MAIN_PATHS, state_data, tmp_path, forker)


def test_paid_replies_everywhere(state_data, tmp_path, api_env, forker):
    """Every case of issue 34: narrower and wider batch reruns, rows of the same content, torn,
    conflicting and vanished batches, dated model names, an unknown model under --batch."""
    run_machine(EVERYWHERE, state_data, tmp_path, forker)


# ----------------------------------------------------------------------- the shortest sequences


def replay(
    state_data: dict[str, Data],
    tmp_path: Path,
    forker: Forker,
    data: str,
    *steps: Callable[[PaidReplies], Any],
    snapshot: str | None = None,
) -> Any:
    """Run `steps` on a new machine, with every check; what the last step returns."""
    machine = machine_for(EVERYWHERE, state_data[data], tmp_path, forker)()
    try:
        machine.open(snapshot)
        for step in steps:
            found = step(machine)
        return found
    finally:
        machine.teardown()


def test_issue_34_item_1_a_narrower_rerun_keeps_the_replies_of_rows_it_does_not_select(
    state_data, tmp_path, api_env, forker
):
    replay(
        state_data,
        tmp_path,
        forker,
        "distinct",
        lambda m: m.batch("all", "no-wait", "completed", None, hold=True),
        lambda m: m.batch("needles 2", "batch", "completed", None, hold=False),
    )


def test_issue_34_item_1_a_narrower_rerun_sends_no_part_of_a_wider_killed_run(state_data, tmp_path, api_env, forker):
    replay(
        state_data,
        tmp_path,
        forker,
        "distinct",
        lambda m: m.batch("all", "batch", "completed", "upload", hold=False),
        lambda m: m.batch("limit 2", "batch", "completed", None, hold=False),
    )


def test_issue_34_item_2_rows_of_the_same_content_are_costed_once(state_data, tmp_path, api_env, forker):
    replay(state_data, tmp_path, forker, "twins", lambda m: m.batch("all", "batch", "completed", None, hold=False))


def test_issue_34_item_3_a_torn_output_line_does_not_block_the_run(state_data, tmp_path, api_env, forker):
    replay(state_data, tmp_path, forker, "distinct", lambda m: m.batch("all", "batch", "torn", None, hold=False))


def test_issue_34_item_4_a_vanished_batch_is_recovered(state_data, tmp_path, api_env, forker):
    replay(
        state_data,
        tmp_path,
        forker,
        "distinct",
        lambda m: m.batch("all", "no-wait", "completed", None, hold=True),
        lambda m: m.vanish("batches"),
    )


def test_issue_34_item_6_conflicting_output_lines_are_graded_whatever_their_order(
    state_data, tmp_path, api_env, forker
):
    """Two replies that differ for one request: the one graded does not depend on line order (on
    main before issue 34: the later line won)."""

    def scores(outcome: str) -> list:
        def run(machine: PaidReplies) -> list:
            machine.batch("all", "batch", outcome, None, hold=False)
            records = [json.loads(line) for line in (machine.out / "results.jsonl").read_text().splitlines()]
            return sorted((r["row"], r["score"], r["response"]) for r in records)

        folder = tmp_path / outcome.replace(" ", "-")
        folder.mkdir()
        return replay(state_data, folder, forker, "distinct", run)

    assert scores("conflicting") == scores("conflicting first")


def test_issue_34_item_7_dated_model_names_are_imported(state_data, tmp_path, api_env, forker):
    replay(state_data, tmp_path, forker, "distinct", lambda m: m.import_results("all", "completed"), snapshot=SNAPSHOT)


def test_issue_34_item_8_an_unknown_model_under_batch_is_refused_for_good(state_data, tmp_path, api_env, forker):
    replay(state_data, tmp_path, forker, "distinct", lambda m: m.unknown_model("batch"))
