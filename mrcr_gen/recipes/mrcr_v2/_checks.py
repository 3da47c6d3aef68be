"""Validation of MRCR v2 files: every row re-solved from its flat `queries` text alone.

Per row: the final query parses and is the tail of `queries`; its key occurs exactly
`num_relevant` times among the turns, with pairwise distinct writings; the hash is 12
characters of [A-Za-z0-9], absent from the transcript, and used by no other key in the file;
`answer` is the hash + the ordinal-th writing; `context_len` and `answer_token_count` recount
exactly; the length lies in a v2 bucket; the positions are the key's turns and their token spans.

Tokens are counted with the tokenizer `--tokenizer` names, else the one the dataset card (or the
sidecar beside the file) names, else o200k_base. Rows of one transcript share its text, so
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
from dataclasses import dataclass, field
from typing import Any

from ..._matcher import ratio
from ..._models import normalize_ask, ordinal
from ..._tokens import (
    DEFAULT_TOKENIZER,
    RepeatedTextCounter,
    count_tokens,
    count_tokens_batch,
    tokenizer_threads,
)
from ...validate._asks import (
    AMBIGUOUS_SCORE,
    encodable,
    has_ask_line,
    is_loose_needle_ask,
    is_near_duplicate_ask,
    unencodable_at,
)
from ...validate._findings import OUT_OF_RANGE, Finding, RowResult, Severity
from ._assembler import splits_at_turns
from ._counted import KnownCounts, RowCounted, row_key
from ._generate import v2_bucket_for
from ._rows import coerce_record
from ._text import HASH_PATTERN, ParsedQuery, ParsedTurn, parse_query, split_transcript


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
    #: Rows' counts counted before (the sealed sidecar, the cache); None: every row is counted.
    known: KnownCounts | None = None
    _current: _Transcript | None = None
    _scanned: tuple[str, int | None] | None = None  # the last transcript text and `unencodable_at` of it
    hash_owner: dict[str, tuple[str, str]] = field(default_factory=dict)  # hash -> (transcript id, ask)
    #: The current row holds text UTF-8 cannot encode (`text_encoding`): it is counted with U+FFFD in its place.
    sanitize: bool = False
    _counter: RepeatedTextCounter | None = None

    @property
    def counter(self) -> RepeatedTextCounter:
        """Counts a transcript's turns (built on first use: a file whose counts are known loads no tokenizer)."""
        if self._counter is None:
            self._counter = RepeatedTextCounter(tokenizer=self.tokenizer)
        return self._counter

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

    def transcript(self, text: str) -> _Transcript:
        """The transcript `text` (a row's `queries` without its query), parsed once for the rows
        that share it (its turns are counted when a row first needs them: `count_turns`)."""
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
        self._current = state
        return state

    def count_turns(self, transcript: _Transcript, queries: str) -> None:
        """`transcript.starts`, counted once; `queries` is the first row's that needs them, counted
        whole beside the turns to check that the parts add up (not for a tokenizer known to split
        at every seam: `splits_at_turns`)."""
        if transcript.starts is not None:
            return
        assert transcript.turns is not None
        text, turns = transcript.text, transcript.turns
        parts = [text[t.start : t.end] for t in turns]
        parts = list(map(encodable, parts)) if self.sanitize else parts
        if splits_at_turns(self.tokenizer):
            transcript.additive = True
        if self.threads > 1:
            # The whole row on one thread while the turns take the others: one count's time, not two.
            whole = None if transcript.additive else tokenizer_threads().submit(self.count_whole, queries)
            counts = count_tokens_batch(parts, self.threads, self.tokenizer)
            transcript.first_row_tokens = None if whole is None else whole.result()
        else:
            counts = list(map(self.counter, parts))
        at = self.count_whole(text[: turns[0].start])
        transcript.starts = [at]
        for n in counts:
            at += n
            transcript.starts.append(at)

    def row_counts(
        self, row: int, transcript: _Transcript, rec: dict[str, Any], query: ParsedQuery, indices: list[int]
    ) -> RowCounted:
        """The row's counts: as counted before (`known`), else counted now (and remembered)."""
        turns = transcript.turns or []
        target = turns[indices[query.ordinal - 1]].text if query.ordinal <= len(indices) else None
        key = None if self.known is None or self.sanitize else row_key(transcript.id, rec["view_ops"])
        if key is not None:
            assert self.known is not None
            # A sidecar's answer count is its writing's: this target's only when the answer holds it.
            found = self.known.get(row, key, sidecar=target is not None and rec["answer"] == query.hash + target)
            if found is not None and found.fits(len(turns), indices, target is not None):
                return found
        self.count_turns(transcript, rec["queries"])
        counted = RowCounted(
            tokens=_recount(self, transcript, rec["queries"], rec["view_ops"]),
            answer=None if target is None else self.count_whole(target),
            n_turns=len(turns),
            turns=tuple(indices),
            positions=tuple((self.offset(transcript, i), self.offset(transcript, i + 1)) for i in indices),
        )
        if key is not None:
            assert self.known is not None
            self.known.put(key, counted)
        return counted


def _finding(file: str, row: int, check: str, message: str, severity: Severity = "error") -> Finding:
    return Finding(file=file, row=row, check=check, severity=severity, message=message)


def _ask_findings(
    text: str, transcript: _Transcript, query: ParsedQuery, needles: list[int]
) -> list[tuple[str, str, Severity]]:
    """The needle ask where it is no needle: a turn asking it only up to inner punctuation (a
    warning, as for openai/mrcr), a turn asking it but for case, whitespace or trailing punctuation
    (an error, as a model is likely to count it), or a whole line (perhaps after `User:`) of the
    few-shot block, of a writing or of another turn's ask, which a model may count (an error); and
    needle writings that are empty or blank (an error: the answer is the hash alone)."""
    ask = query.ask
    turns: list[ParsedTurn] = transcript.turns or []
    found: list[tuple[str, str, Severity]] = []
    candidates = [i for i in transcript.near_ask_candidates(ask) if is_near_duplicate_ask(turns[i].ask, ask)]
    loose = [i for i in candidates if is_loose_needle_ask(turns[i].ask, ask)]  # an error below
    near = [i for i in candidates if i not in loose]
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
        if i in loose:
            places.append(f"the ask of turn {i} ({turn.ask[:60]!r}: the key but for case or punctuation)")
        elif i not in skip and has_ask_line(turn.ask, ask):
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


@dataclass
class _Row:
    """One row being checked: its findings so far, and what later checks need of it."""

    file: str
    row: int
    findings: list[Finding] = field(default_factory=list)
    n_needles: int | None = None

    def add(self, check: str, message: str, severity: Severity = "error") -> None:
        self.findings.append(_finding(self.file, self.row, check, message, severity))

    def result(self, n_tokens: int | None = None, bucket: str | None = None) -> RowResult:
        findings = tuple(self.findings)
        return RowResult(row=self.row, findings=findings, n_tokens=n_tokens, bin=bucket, n_needles=self.n_needles)


def check_v2_record(record: dict[str, Any], state: V2FileState, row: int) -> RowResult:
    """Every finding of one raw v2 record (CSV strings or parquet values); `state` is what the rows
    of its file share (the transcript being read, the hashes seen so far)."""
    checked = _Row(state.file, row)
    parsed = _parse(record, state, checked)
    if parsed is None:
        return checked.result()
    rec, text, query, transcript = parsed
    _hash_findings(state, checked, text, query, transcript)
    indices, target = _needle_findings(rec, checked, text, query, transcript)
    if not state.count:
        return checked.result()
    if state.compare_counts:
        counted = state.row_counts(row, transcript, rec, query, indices)
        n_tokens = counted.tokens
        _count_findings(checked, rec, query, target, counted)
    else:  # the file's counts are another tokenizer's: the recount decides the bucket alone
        state.count_turns(transcript, rec["queries"])
        n_tokens = _recount(state, transcript, rec["queries"], rec["view_ops"])
    found = v2_bucket_for(n_tokens)
    if found is None:
        checked.add("token_bin", f"{n_tokens} tokens lie outside the v2 buckets (4096, 8388608]")
    return checked.result(n_tokens, found.label if found is not None else OUT_OF_RANGE)


def _parse(
    record: dict[str, Any], state: V2FileState, checked: _Row
) -> tuple[dict[str, Any], str, ParsedQuery, _Transcript] | None:
    """The record coerced, its transcript text, query and parsed transcript; None (with the finding
    that says why) when the row cannot be read that far."""
    try:
        rec = coerce_record(record)
    except ValueError as exc:
        checked.add("v2_row", str(exc))
        return None
    queries, view_ops, answer, n = rec.get("queries"), rec.get("view_ops"), rec.get("answer"), rec.get("num_relevant")
    if not (isinstance(queries, str) and isinstance(view_ops, str) and isinstance(answer, str) and isinstance(n, int)):
        checked.add("v2_row", "queries, view_ops and answer must be strings and num_relevant an integer")
        return None
    checked.n_needles = n
    problem = _encoding_problem(queries, view_ops, answer, state.unencodable_in_queries(queries, view_ops))
    state.sanitize = problem is not None  # the rest is checked, tokens counted with U+FFFD in its place
    if problem is not None:
        checked.add("text_encoding", problem)
    if not queries.endswith(view_ops) or not view_ops:
        checked.add("view_ops", "view_ops is not the tail of queries")
        return None
    query = parse_query(view_ops)
    if query is None:
        checked.add("final_query", f"view_ops is not an MRCR v2 query: {view_ops[:120]!r}")
        return None
    text = queries[: len(queries) - len(view_ops)]
    transcript = state.transcript(text)
    if transcript.problem is not None or transcript.turns is None:
        checked.add("transcript", transcript.problem or "no turns")
        return None
    return rec, text, query, transcript


def _hash_findings(state: V2FileState, checked: _Row, text: str, query: ParsedQuery, transcript: _Transcript) -> None:
    """The hash: 12 characters of [A-Za-z0-9], absent from the transcript, and no other key's in the
    file (a check across rows: `state` remembers each hash's key)."""
    secret = query.hash
    if not HASH_PATTERN.fullmatch(secret):
        checked.add("hash", f"hash {secret!r} is not 12 characters of [A-Za-z0-9]")
    if secret in text:
        checked.add("hash", f"hash {secret} also occurs in the transcript")
    owner = state.hash_owner.setdefault(secret, (transcript.id, query.ask))
    if owner != (transcript.id, query.ask):
        where = "this transcript" if owner[0] == transcript.id else "another transcript"
        checked.add("hash_key", f"hash {secret} also belongs to '{owner[1]}' in {where}")


def _needle_findings(
    rec: dict[str, Any], checked: _Row, text: str, query: ParsedQuery, transcript: _Transcript
) -> tuple[list[int], str | None]:
    """Needles, ground truth and turn positions; returns the key's turns and the writing asked for
    (None when the ordinal is out of range)."""
    turns = transcript.turns or []
    n, answer = rec["num_relevant"], rec["answer"]
    indices = [i for i, t in enumerate(turns) if t.ask == query.ask]
    if len(indices) != n:
        checked.add(
            "needle_count", f"'{query.ask}' occurs {len(indices)} times, num_relevant is {n} (turns {indices[:12]})"
        )
    for check, message, severity in _ask_findings(text, transcript, query, indices):
        checked.add(check, message, severity)
    writings = [turns[i].text for i in indices]
    if len(set(writings)) < len(writings):
        checked.add("duplicate_needle_response", f"'{query.ask}' has identical writings, so the ordinal is ambiguous")
    target = None
    if query.ordinal <= len(indices):
        _ambiguous(checked, writings, query)
    if query.ordinal > len(indices):
        asked = f"the query asks for the {ordinal(query.ordinal)} of {len(indices)} turns of '{query.ask}'"
        checked.add("ground_truth", asked)
    else:
        target = writings[query.ordinal - 1]
        if answer != query.hash + target:
            others = [k + 1 for k, w in enumerate(writings) if answer == query.hash + w]
            said = f"; it equals the writing of ordinal {others[0]}" if others else ""
            checked.add("ground_truth", f"answer is not the hash + writing {query.ordinal} of '{query.ask}'{said}")
    seeds = list(rec.get("index_positions_of_seeds", ()))
    if seeds != indices:
        checked.add("positions", f"index_positions_of_seeds is {seeds[:12]}, the key's turns are {indices[:12]}")
    return indices, target


def _ambiguous(checked: _Row, writings: list[str], query: ParsedQuery) -> None:
    """Another needle's writing that grade_v2 scores at least AMBIGUOUS_SCORE against the target."""
    target = writings[query.ordinal - 1]
    close = [
        f"the writing of ordinal {number} scores {score:.3f}"
        for number, writing in enumerate(writings, start=1)
        if number != query.ordinal
        and writing != target  # identical ones are duplicate_needle_response's
        and (score := ratio(target.strip(), writing.strip())) >= AMBIGUOUS_SCORE
    ]
    if close:
        checked.add(
            "ambiguous_needle_response",
            f"against the target (ordinal {query.ordinal} of '{query.ask}'), {', '.join(close[:5])}: a wrong needle "
            f"scores at least {AMBIGUOUS_SCORE}, so the ground truth is ambiguous",
        )


def _recount(state: V2FileState, transcript: _Transcript, queries: str, view_ops: str) -> int:
    """The row's tokens: the transcript's turns counted once (added up) plus its query, unless a
    row of the transcript counted whole disagreed (then every row is counted whole)."""
    assert transcript.starts is not None
    if transcript.additive is False:
        return state.count_whole(queries)
    n_tokens = transcript.starts[-1] + state.count_whole(view_ops)
    if transcript.additive is None:
        whole = transcript.first_row_tokens
        if whole is None:
            whole = state.count_whole(queries)
        transcript.additive = whole == n_tokens
        n_tokens = whole
    return n_tokens


def _count_findings(
    checked: _Row, rec: dict[str, Any], query: ParsedQuery, target: str | None, counted: RowCounted
) -> None:
    """`context_len`, `answer_token_count` and the token spans against the row's counts."""
    if rec.get("context_len") != counted.tokens:
        checked.add("context_len", f"context_len is {rec.get('context_len')}, queries has {counted.tokens} tokens")
    if target is not None and rec.get("answer_token_count") != (expected := counted.answer):
        checked.add(
            "answer_token_count",
            f"answer_token_count is {rec.get('answer_token_count')}, the writing has {expected} tokens",
        )
    spans = list(counted.positions)
    if tuple(map(tuple, rec.get("relevant_context_positions", ()))) != tuple(spans):
        checked.add("positions", f"relevant_context_positions disagree with the text: expected {spans[:4]}...")
    if (
        target is not None
        and len(spans) >= query.ordinal
        and tuple(rec.get("answer_context_position", ())) != spans[query.ordinal - 1]
    ):
        expected_span = spans[query.ordinal - 1]
        checked.add(
            "positions", f"answer_context_position is {rec.get('answer_context_position')}, expected {expected_span}"
        )
