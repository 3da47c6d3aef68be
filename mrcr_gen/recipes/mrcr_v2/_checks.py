"""Validation of MRCR v2 files: every row re-solved from its flat `queries` text alone.

Per row: the final query parses and is the tail of `queries`; its key occurs exactly
`num_relevant` times among the turns, with pairwise distinct writings; the hash is 12
characters of [A-Za-z0-9], absent from the transcript, and used by no other key in the file;
`answer` is the hash + the ordinal-th writing; `context_len` and `answer_token_count` recount
exactly; the length lies in a v2 bucket; the positions are the key's turns and their token spans.

Tokens are counted with the tokenizer `--tokenizer` names, else the one the dataset card (or the
`.build.json` beside the file) names, else o200k_base. Rows of one transcript share its text, so
each transcript is parsed and tokenized once, turn by turn (which gives the positions). A row's
`context_len` is then the parts' counts added: exact when the tokenizer splits where every turn
and the query start ("User:" right after a blank line), as o200k does. The first row of each
transcript is counted whole to check it; if the two disagree, every row of that transcript is
counted whole and each position is the count of the text before it, as the generator does.
When the file's tokenizer is known and `--tokenizer` names another, the recount decides only the
buckets (`context_len` and the positions are counts in the file's tokenizer, so not compared).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._bins import Bin
from ..._models import normalize_ask, ordinal
from ..._paths import file_columns, hub_source
from ..._tokens import (
    DEFAULT_TOKENIZER,
    RepeatedTextCounter,
    TokenizerError,
    count_tokens,
    count_tokens_batch,
    load_tokenizer,
    tokenizer_threads,
)
from ...validate._asks import encodable, has_ask_line, is_near_duplicate_ask, unencodable_at
from ...validate._findings import OUT_OF_RANGE, Finding, ReportBuilder, RowResult, Severity
from ...validate._provenance import dataset_tokenizer
from ...validate._repair import FileRepair, RepairResult, output_paths
from ._generate import V2_BUCKETS, build_path, tokens_range, v2_bucket_for
from ._rows import V2_COLUMNS, V2FileWriter, coerce_record, iter_records
from ._text import HASH_PATTERN, ParsedQuery, ParsedTurn, parse_query, split_transcript

ProgressCallback = Callable[[str, int, int | None], None]  # (file, rows done, total rows if known)


def transcript_id(transcript: str) -> str:
    """A transcript's identity: rows with the same id share their prefix (the eval's `group`)."""
    return hashlib.blake2b(transcript.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


@dataclass
class _Transcript:
    id: str
    turns: list | None  # ParsedTurn list, None when the structure is broken
    problem: str | None
    text: str = ""
    starts: list[int] | None = None  # token offset of every turn, and of the end, by added counts
    additive: bool | None = None  # a row counted whole equals the parts (None: not yet counted)
    prefix: dict[int, int] = field(default_factory=dict)  # character offset -> tokens before it, counted whole
    #: Tokens of the first row's whole `queries`, counted beside the turns (that row checks `additive`).
    first_row_tokens: int | None = None
    # What every row of the transcript asks of its turns, computed for its first row.
    _lowered: list[str] | None = None
    _by_normalized_ask: dict[str, list[int]] | None = None

    @property
    def lowered(self) -> list[str]:
        """Every turn's writing in lower case (`has_ask_line` looks for the ask's longest word in it)."""
        if self._lowered is None:
            self._lowered = [t.text.lower() for t in self.turns or ()]
        return self._lowered

    def near_ask_candidates(self, ask: str) -> list[int]:
        """The turns whose ask normalises like `ask` (the only ones `is_near_duplicate_ask` can accept), in order."""
        if self._by_normalized_ask is None:
            self._by_normalized_ask = {}
            for i, turn in enumerate(self.turns or ()):
                self._by_normalized_ask.setdefault(normalize_ask(turn.ask), []).append(i)
        return self._by_normalized_ask.get(normalize_ask(ask), [])


@dataclass
class V2FileState:
    """What rows of one file share: the current transcript and the hashes seen so far."""

    file: str
    count: bool = True
    threads: int = 1
    tokenizer: str = DEFAULT_TOKENIZER
    #: False when the file's counts are another tokenizer's: only the buckets are checked.
    compare_counts: bool = True
    #: The range the file was generated for (its `.build.json`) and the tokenizer that counted then.
    generated: tuple[Bin, str, str] | None = None
    _current: _Transcript | None = None
    _scanned: tuple[str, int | None] | None = None  # the last transcript text and `unencodable_at` of it
    hash_owner: dict[str, tuple[str, str]] = field(default_factory=dict)  # hash -> (transcript id, ask)
    #: The current row holds text UTF-8 cannot encode (`text_encoding`): it is counted with U+FFFD in its place.
    sanitize: bool = False
    counter: RepeatedTextCounter = field(init=False)

    def __post_init__(self) -> None:
        self.counter = RepeatedTextCounter(tokenizer=self.tokenizer)

    def count_whole(self, text: str) -> int:
        return count_tokens(encodable(text) if self.sanitize else text, self.tokenizer)

    def offset(self, transcript: _Transcript, turn: int) -> int:
        """Tokens of the text before turn `turn` (len(turns): the transcript's end)."""
        assert transcript.starts is not None and transcript.turns is not None
        if transcript.additive:
            return transcript.starts[turn]
        char = transcript.turns[turn].start if turn < len(transcript.turns) else len(transcript.text)
        if char not in transcript.prefix:
            transcript.prefix[char] = self.count_whole(transcript.text[:char])
        return transcript.prefix[char]

    def unencodable_in_queries(self, queries: str, view_ops: str) -> int | None:
        """`unencodable_at(queries)`, scanning the transcript part once for all the rows that share it."""
        if not view_ops or not queries.endswith(view_ops):
            return unencodable_at(queries)
        text = queries[: len(queries) - len(view_ops)]
        if self._scanned is None or self._scanned[0] != text:
            self._scanned = (text, unencodable_at(text))
        at = self._scanned[1]
        if at is None and (tail := unencodable_at(view_ops)) is not None:
            at = len(text) + tail
        return at

    def transcript(self, text: str, queries: str) -> _Transcript:
        """The transcript `text` (a row's `queries` without its query), parsed and counted once for the
        rows that share it; `queries` is the first such row's, counted whole beside the turns."""
        if self._current is not None and self._current.text == text:
            return self._current
        tid = transcript_id(text)
        split = split_transcript(text)
        if split is None:
            state = _Transcript(
                tid, None, "the few-shot block's closing marker '======== EXAMPLE 3 ========' is missing", text
            )
        else:
            body_start, turns = split
            problem = None
            if not turns or turns[0].start != body_start:
                problem = "the transcript does not start with a 'User: ...' turn after the few-shot block"
            elif not text.endswith("\n\n") or any(not text[t.start : t.end].endswith("\n\n") for t in turns):
                problem = "a turn does not end with a blank line"
            state = _Transcript(tid, turns, problem, text)
            if self.count and problem is None:
                parts = [text[t.start : t.end] for t in turns]
                parts = list(map(encodable, parts)) if self.sanitize else parts
                if self.threads > 1:
                    # The whole row on one thread while the turns take the others: one count's time, not two.
                    whole = tokenizer_threads().submit(self.count_whole, queries)
                    counts = count_tokens_batch(parts, self.threads, self.tokenizer)
                    state.first_row_tokens = whole.result()
                else:
                    counts = list(map(self.counter, parts))
                at = self.count_whole(text[:body_start])
                state.starts = [at]
                for n in counts:
                    at += n
                    state.starts.append(at)
        self._current = state
        return state


def _finding(file: str, row: int, check: str, message: str, severity: Severity = "error") -> Finding:
    return Finding(file=file, row=row, check=check, severity=severity, message=message)


def _ask_findings(
    text: str, transcript: _Transcript, query: ParsedQuery, needles: list[int]
) -> list[tuple[str, str, Severity]]:
    """The needle ask where it is no needle: a turn asking it only up to case, whitespace or
    punctuation (a warning, as for openai/mrcr), or a whole line (perhaps after `User:`) of the
    few-shot block, of a writing or of another turn's ask, which a model may count (an error); and
    needle writings that are empty or blank (an error: the answer is the hash alone)."""
    ask = query.ask
    turns: list[ParsedTurn] = transcript.turns or []
    found: list[tuple[str, str, Severity]] = []
    near = [i for i in transcript.near_ask_candidates(ask) if is_near_duplicate_ask(turns[i].ask, ask)]
    if near:
        shown = ", ".join(f"{i}: {turns[i].ask[:60]!r}" for i in near[:5])
        found.append(
            (
                "near_duplicate_ask",
                f"{len(near)} turn(s) ask '{ask}' only up to case, whitespace or punctuation "
                f"(not counted as needles): {shown}",
                "warning",
            )
        )
    skip = {*needles, *near}
    places = ["the few-shot block"] if has_ask_line(text[: turns[0].start], ask) else []
    for i, (turn, lowered) in enumerate(zip(turns, transcript.lowered, strict=True)):
        if has_ask_line(turn.text, ask, lowered):
            places.append(f"the writing of turn {i}")
        if i not in skip and has_ask_line(turn.ask, ask):
            places.append(f"the ask of turn {i}")
    if places:
        more = f" (and {len(places) - 5} more)" if len(places) > 5 else ""
        found.append(
            (
                "needle_ask_elsewhere",
                f"'{ask}' also stands as a line of {', '.join(places[:5])}{more}: a model may count it, so the "
                "ordinal is ambiguous",
                "error",
            )
        )
    empty = [(n, i) for n, i in enumerate(needles, start=1) if not turns[i].text.strip()]
    if empty:
        shown = ", ".join(
            f"turn {i} (the {ordinal(n)} of {len(needles)}{', which the query asks for' * (n == query.ordinal)})"
            for n, i in empty
        )
        found.append(("empty_writing", f"needle writings must not be empty or blank: {shown}", "error"))
    return found


def _encoding_problem(queries: str, view_ops: str, answer: str, queries_at: int | None) -> str | None:
    """Where `queries` or `answer` hold text UTF-8 cannot encode: a lone surrogate, or a byte that
    was not UTF-8 in the CSV (read as U+DC80..U+DCFF), by turn; None when there is none.
    `queries_at` is `unencodable_at(queries)`."""
    places = []
    for column, value in (("queries", queries), ("answer", answer)):
        at = queries_at if column == "queries" else unencodable_at(value)
        if at is None:
            continue
        code = ord(value[at])
        what = f"the byte 0x{code - 0xDC00:02X}, not UTF-8," if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        where = ""
        split = split_transcript(queries) if column == "queries" else None
        if split is not None and split[1]:
            turns = split[1]
            if at < turns[0].start:
                where = ", in the few-shot block"
            elif view_ops and queries.endswith(view_ops) and at >= len(queries) - len(view_ops):
                where = ", in the final query"
            else:
                where = f", in turn {max(i for i, t in enumerate(turns) if t.start <= at)}"
        places.append(f"{column} holds {what} at character {at}{where}")
    return "; ".join(places) + " (text UTF-8 cannot encode)" if places else None


def check_v2_record(record: dict[str, Any], state: V2FileState, row: int) -> RowResult:
    """Every finding of one raw v2 record (CSV strings or parquet values)."""
    file = state.file
    findings: list[Finding] = []

    def add(check: str, message: str, severity: Severity = "error") -> None:
        findings.append(_finding(file, row, check, message, severity))

    try:
        rec = coerce_record(record)
    except ValueError as exc:
        add("v2_row", str(exc))
        return RowResult(row=row, findings=tuple(findings))
    queries, view_ops, answer, n = rec.get("queries"), rec.get("view_ops"), rec.get("answer"), rec.get("num_relevant")
    if not (isinstance(queries, str) and isinstance(view_ops, str) and isinstance(answer, str) and isinstance(n, int)):
        add("v2_row", "queries, view_ops and answer must be strings and num_relevant an integer")
        return RowResult(row=row, findings=tuple(findings))
    n_needles = n
    problem = _encoding_problem(queries, view_ops, answer, state.unencodable_in_queries(queries, view_ops))
    state.sanitize = problem is not None  # the rest is checked, tokens counted with U+FFFD in its place
    if problem is not None:
        add("text_encoding", problem)
    if not queries.endswith(view_ops) or not view_ops:
        add("view_ops", "view_ops is not the tail of queries")
        return RowResult(row=row, findings=tuple(findings), n_needles=n_needles)
    query = parse_query(view_ops)
    if query is None:
        add("final_query", f"view_ops is not an MRCR v2 query: {view_ops[:120]!r}")
        return RowResult(row=row, findings=tuple(findings), n_needles=n_needles)
    text = queries[: len(queries) - len(view_ops)]
    transcript = state.transcript(text, queries)
    if transcript.problem is not None or transcript.turns is None:
        add("transcript", transcript.problem or "no turns")
        return RowResult(row=row, findings=tuple(findings), n_needles=n_needles)
    turns = transcript.turns

    # --- hash -----------------------------------------------------------------------------
    secret = query.hash
    if not HASH_PATTERN.fullmatch(secret):
        add("hash", f"hash {secret!r} is not 12 characters of [A-Za-z0-9]")
    if secret in text:
        add("hash", f"hash {secret} also occurs in the transcript")
    owner = state.hash_owner.setdefault(secret, (transcript.id, query.ask))
    if owner != (transcript.id, query.ask):
        where = "this transcript" if owner[0] == transcript.id else "another transcript"
        add("hash_key", f"hash {secret} also belongs to '{owner[1]}' in {where}")

    # --- needles and ground truth ------------------------------------------------------------
    indices = [i for i, t in enumerate(turns) if t.ask == query.ask]
    if len(indices) != n:
        add("needle_count", f"'{query.ask}' occurs {len(indices)} times, num_relevant is {n} (turns {indices[:12]})")
    for check, message, severity in _ask_findings(text, transcript, query, indices):
        add(check, message, severity)
    writings = [turns[i].text for i in indices]
    if len(set(writings)) < len(writings):
        add("duplicate_needle_response", f"'{query.ask}' has identical writings, so the ordinal is ambiguous")
    if query.ordinal > len(indices):
        add("ground_truth", f"the query asks for the {ordinal(query.ordinal)} of {len(indices)} turns of '{query.ask}'")
        target = None
    else:
        target = writings[query.ordinal - 1]
        if answer != secret + target:
            others = [k + 1 for k, w in enumerate(writings) if answer == secret + w]
            said = f"; it equals the writing of ordinal {others[0]}" if others else ""
            add("ground_truth", f"answer is not the hash + writing {query.ordinal} of '{query.ask}'{said}")

    # --- positions -----------------------------------------------------------------------------
    if list(rec.get("index_positions_of_seeds", ())) != indices:
        add(
            "positions",
            f"index_positions_of_seeds is {list(rec.get('index_positions_of_seeds', ()))[:12]}, "
            f"the key's turns are {indices[:12]}",
        )

    # --- token counts --------------------------------------------------------------------------
    n_tokens = None
    bucket = None
    if state.count and transcript.starts is not None:
        starts = transcript.starts
        if transcript.additive is False:
            n_tokens = state.count_whole(queries)
        else:
            n_tokens = starts[-1] + state.count_whole(view_ops)
            if transcript.additive is None:
                whole = transcript.first_row_tokens
                if whole is None:
                    whole = state.count_whole(queries)
                transcript.additive = whole == n_tokens
                n_tokens = whole
        if state.compare_counts:
            if rec.get("context_len") != n_tokens:
                add("context_len", f"context_len is {rec.get('context_len')}, queries has {n_tokens} tokens")
            if target is not None and rec.get("answer_token_count") != (expected := state.count_whole(target)):
                add(
                    "answer_token_count",
                    f"answer_token_count is {rec.get('answer_token_count')}, the writing has {expected} tokens",
                )
            spans = [(state.offset(transcript, i), state.offset(transcript, i + 1)) for i in indices]
            if tuple(map(tuple, rec.get("relevant_context_positions", ()))) != tuple(spans):
                add("positions", f"relevant_context_positions disagree with the text: expected {spans[:4]}...")
            if (
                target is not None
                and len(spans) >= query.ordinal
                and tuple(rec.get("answer_context_position", ())) != spans[query.ordinal - 1]
            ):
                add(
                    "positions",
                    (
                        f"answer_context_position is {rec.get('answer_context_position')}, expected "
                        f"{spans[query.ordinal - 1]}"
                    ),
                )
        found = v2_bucket_for(n_tokens)
        bucket = found.label if found is not None else OUT_OF_RANGE
        if found is None:
            add("token_bin", f"{n_tokens} tokens lie outside the v2 buckets (4096, 8388608]")
        elif state.generated is not None and n_tokens not in state.generated[0]:
            _, label, counted_by = state.generated
            add(
                "token_bin",
                f"generated for {label} ({counted_by} tokens, says its .build.json), but queries recounts "
                f"to {n_tokens} {state.tokenizer} tokens (bucket {bucket})",
            )
    return RowResult(row=row, findings=tuple(findings), n_tokens=n_tokens, bin=bucket, n_needles=n_needles)


def generated_for(path: str | os.PathLike) -> tuple[Bin, str, str] | None:
    """(range, its label, tokenizer spec) the file was generated for, from its `.build.json`."""
    try:
        record = json.loads(build_path(Path(path)).read_text(encoding="utf-8"))
        label, counted_by = record["summary"]["bucket"], record["tokenizer"]["spec"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if isinstance(label, str) and label.startswith("tokens="):
        return tokens_range(int(label.removeprefix("tokens="))), label, counted_by
    where = next((b for b in V2_BUCKETS if b.label == label), None)
    return (where, label, counted_by) if where is not None else None


def _file_tokenizer(path: str | os.PathLike, option: str | None, builder: ReportBuilder) -> dict[str, Any]:
    """The V2FileState fields saying how a file is recounted: `--tokenizer`, else the tokenizer its
    card or .build.json names, else o200k_base; no count when it cannot be loaded (reported)."""
    file = str(path)
    generated = generated_for(path)
    recorded = dataset_tokenizer(Path(path)) or (generated[2] if generated else None)
    spec = option or recorded or DEFAULT_TOKENIZER
    try:
        load_tokenizer(spec)
    except TokenizerError as exc:
        builder.add_finding(
            Finding(
                file=file,
                row=None,
                check="token_bin",
                severity="error",
                message=f"tokens not recounted: the tokenizer cannot be loaded ({exc}); pass --tokenizer",
            )
        )
        return {"count": False}
    builder.add_source(file, spec, hub_source(path))
    compare = recorded is None or spec == recorded
    if not compare:
        builder.add_finding(
            Finding(
                file=file,
                row=None,
                check="context_len",
                severity="warning",
                message=f"the file's counts are {recorded} tokens; recounted with {spec}, only the buckets are checked",
            )
        )
    return {"tokenizer": spec, "compare_counts": compare, "generated": generated}


def _schema_findings(file: str, columns: list[str]) -> list[Finding]:
    findings = [
        Finding(file=file, row=None, check="schema", severity="error", message=f"column {name!r} is missing")
        for name in V2_COLUMNS
        if name not in columns
    ]
    findings += [
        Finding(file=file, row=None, check="schema", severity="warning", message=f"extra column {name!r}")
        for name in columns
        if name not in V2_COLUMNS
    ]
    return findings


def validate_v2_file(
    path: str | os.PathLike,
    builder: ReportBuilder,
    *,
    tokens: bool = True,
    threads: int = 1,
    progress: ProgressCallback | None = None,
    tokenizer: str | None = None,
    keep: Callable[[dict[str, Any]], None] | None = None,
    drop: Callable[[int, RowResult], None] | None = None,
) -> None:
    """Check every row of one v2 file into `builder`; `keep` receives each row that passes
    (no error; with a strict builder, no finding at all), `drop` the others' results."""
    file = str(path)
    builder.add_file(file)
    columns = file_columns(path)
    if columns is None:
        builder.add_finding(
            Finding(file=file, row=None, check="file", severity="error", message="cannot read as CSV or parquet")
        )
        return
    schema = _schema_findings(file, columns)
    for finding in schema:
        builder.add_finding(finding)
    if any(f.is_error for f in schema):
        return
    counting = _file_tokenizer(path, tokenizer, builder) if tokens else {"count": False}
    state = V2FileState(file=file, threads=threads, **counting)
    row = -1
    try:
        for row, record in enumerate(iter_records(path, errors="surrogateescape")):
            result = check_v2_record(record, state, row)
            builder.add_row(result)
            passes = not result.findings if builder.strict else not result.has_error
            if passes and keep is not None:
                keep(coerce_record(record))
            elif not passes and drop is not None:
                drop(row, result)
            if progress is not None:
                progress(file, 1, None)
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        builder.add_finding(
            Finding(
                file=file,
                row=None,
                check="file",
                severity="error",
                message=f"reading stopped at row {row + 1}: {type(exc).__name__}: {lines[0] if lines else ''}",
            )
        )


def validate_v2_paths(
    files: Sequence[str | os.PathLike],
    *,
    tokens: bool = True,
    threads: int = 1,
    strict: bool = False,
    progress: ProgressCallback | None = None,
    clean: str | os.PathLike | None = None,
    on_change: Callable[[str], None] | None = None,
    tokenizer: str | None = None,
) -> RepairResult:
    """Validate v2 files. With `clean`, the rows that pass go to one output per input, as
    `mrcr-validate --clean` does for openai/mrcr files (`clean` is the file for a single input,
    else a folder); CSV or parquet by the output's suffix, else the input's. Each output appears
    atomically; every dropped row is reported through `on_change`. `tokenizer` recounts (default:
    the one each file's card names, else o200k_base)."""
    builder = ReportBuilder(strict=strict)
    paths = [Path(f) for f in files]
    targets = output_paths(paths, Path(clean)) if clean is not None else {}
    for path, output in targets.items():
        if output.resolve() == path.resolve():
            raise ValueError(f"output {output} is one of the inputs; the input is never modified")
    repairs = []
    for path in paths:
        target = targets.get(path)
        if target is None:
            validate_v2_file(path, builder, tokens=tokens, threads=threads, progress=progress, tokenizer=tokenizer)
            continue
        suffix = target.suffix.lower() if target.suffix.lower() in (".csv", ".parquet") else path.suffix.lower()
        repair = FileRepair(input=str(path), output=str(target))

        def drop(row: int, result: RowResult, path: Path = path, repair: FileRepair = repair) -> None:
            repair.dropped += 1
            if on_change is not None:
                on_change(f"{path}: row {row}: dropped ({', '.join(sorted({f.check for f in result.findings}))})")

        with V2FileWriter(target, "csv" if suffix == ".csv" else "parquet") as writer:
            validate_v2_file(
                path,
                builder,
                tokens=tokens,
                threads=threads,
                progress=progress,
                tokenizer=tokenizer,
                keep=writer.write,
                drop=drop,
            )
        repair.kept = writer.rows
        repairs.append(repair)
    return RepairResult(report=builder.build(), output=str(clean or ""), files=repairs)
