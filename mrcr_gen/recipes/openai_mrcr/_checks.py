"""Row-level checks. `validate_row` takes the raw column dict, so it diagnoses rows that the
`MrcrRow` model would reject outright, and it never raises on bad data."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..._bins import bin_for_tokens
from ..._matcher import ratio
from ..._models import ASK_TEMPLATE, normalize_writing, ordinal
from ..._tokens import DEFAULT_TOKENIZER, RepeatedTextCounter
from ...validate._asks import AMBIGUOUS_SCORE, encodable, unencodable_at
from ...validate._findings import OUT_OF_RANGE, Finding, RowResult, Severity, as_errors
from . import _checks_asks
from ._checks_asks import _indices, _short, is_preamble
from ._models import PREAMBLE_HEADER, QUERY_PATTERN, RANDOM_STRING_PATTERN, is_real_date

STRING_COLUMNS = ("prompt", "answer", "random_string_to_prepend", "date_added")
INT_COLUMNS = ("n_needles", "desired_msg_index", "total_messages", "n_chars")
#: The roles of an MRCR conversation: a user preamble, user asks and assistant writings, a user query.
CHAT_ROLES = ("user", "assistant")

_RANDOM_STRING = re.compile(RANDOM_STRING_PATTERN)


@dataclass
class RowContext:
    """What the checks parsed from a row; `repair` reuses it."""

    record: Mapping[str, Any]
    messages: list[dict] | None = None
    random_string: str | None = None  # from the final query
    k: int | None = None
    format: str | None = None
    entity: str | None = None
    ask: str | None = None
    needles: list[int] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def value(self, column: str) -> Any:
        return self.record.get(column)


class _Checker:
    def __init__(self, record: Mapping[str, Any], file: str, row: int | None, skip_columns: Collection[str]):
        self.ctx = RowContext(record=record)
        self.file = file
        self.row = row
        self.usable: dict[str, Any] = {}
        self.skip_columns = frozenset(skip_columns)
        self.unencodable = False  # some text UTF-8 cannot encode (`text_encoding`)
        self.ambiguous: set[int] = set()  # needle writings as good as the target (`ambiguous_needle_response`)

    def add(self, check: str, message: str, severity: Severity = "error") -> None:
        self.ctx.findings.append(Finding(file=self.file, row=self.row, check=check, severity=severity, message=message))

    # --- schema -----------------------------------------------------------------------------
    def schema(self) -> None:
        record = self.ctx.record
        for column in (*STRING_COLUMNS, *INT_COLUMNS):
            want_int = column in INT_COLUMNS
            if column not in record:
                if column not in self.skip_columns:
                    self.add("schema", f"column {column!r} is missing")
                continue
            value = record[column]
            if value is None:
                self.add("schema", f"column {column!r} is null, expected {'an integer' if want_int else 'a string'}")
                continue
            ok = isinstance(value, int) and not isinstance(value, bool) if want_int else isinstance(value, str)
            if not ok:
                if column not in self.skip_columns:
                    self.add(
                        "schema",
                        f"column {column!r} holds {type(value).__name__} {_short(str(value), 30)}, "
                        f"expected {'an integer' if want_int else 'a string'}",
                    )
                continue
            self.usable[column] = value

    # --- prompt_json ------------------------------------------------------------------------
    def prompt_json(self) -> None:
        prompt = self.usable.get("prompt")
        if prompt is None:
            return
        try:
            messages = json.loads(prompt)
        except (json.JSONDecodeError, RecursionError) as exc:
            self.add("prompt_json", f"prompt is not valid JSON: {exc}")
            return
        if not isinstance(messages, list) or not messages:
            found = "an empty list" if isinstance(messages, list) else f"a JSON {type(messages).__name__}"
            self.add("prompt_json", f"prompt must be a non-empty JSON list of {{role, content}} objects, found {found}")
            return
        problems = []
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                problems.append(f"messages[{i}] is a {type(message).__name__}, expected an object")
            elif "role" not in message or "content" not in message:
                problems.append(f"messages[{i}] lacks {'role' if 'role' not in message else 'content'}")
            elif not isinstance(message["content"], str):
                problems.append(f"messages[{i}] content is {type(message['content']).__name__}, expected a string")
        if problems:
            more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
            self.add("prompt_json", "; ".join(problems[:3]) + more)
            return
        self.ctx.messages = messages
        extra = [i for i, m in enumerate(messages) if len(m) != 2]
        if extra:
            self.add(
                "prompt_json",
                f"messages {_indices(extra[:5])} have keys besides role and content",
                severity="warning",
            )

    # --- text_encoding ------------------------------------------------------------------------
    def text_encoding(self) -> None:
        """Text UTF-8 cannot encode (a lone surrogate, which a JSON `\\ud800` escape decodes to):
        no API or tokenizer takes it. Named by message index; the other checks still run (the token
        count reads such a character as U+FFFD)."""
        places = [(f"column {c!r}", v) for c, v in self.usable.items() if isinstance(v, str) and c != "prompt"]
        places += [(f"messages[{i}]", m["content"]) for i, m in enumerate(self.ctx.messages or [])]
        bad = [(where, text, at) for where, text in places if (at := unencodable_at(text)) is not None]
        self.unencodable = bool(bad)
        if bad:
            shown = ", ".join(f"{where} at character {at} (U+{ord(text[at]):04X})" for where, text, at in bad[:5])
            more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
            self.add("text_encoding", f"text UTF-8 cannot encode (a lone surrogate): {shown}{more}")

    # --- structure ----------------------------------------------------------------------------
    def structure(self) -> None:
        """The user preamble, then user ask / assistant writing pairs, then the query (its form is
        `final_query`'s); a deleted, added or swapped message shows here by its index."""
        messages = self.ctx.messages
        if messages is None:
            return
        problems = []
        foreign = [i for i, m in enumerate(messages) if m["role"] not in CHAT_ROLES]
        if foreign:
            shown = ", ".join(f"messages[{i}] is {_short(str(messages[i]['role']), 20)}" for i in foreign[:3])
            more = f" (and {len(foreign) - 3} more)" if len(foreign) > 3 else ""
            problems.append(f"only user and assistant messages belong in an MRCR prompt: {shown}{more}")
        if not is_preamble(messages[0]):
            problems.append(
                f"messages[0] must be the user few-shot preamble ({_short(PREAMBLE_HEADER, 40)}), "
                f"found {_short(str(messages[0]['role']), 20)} {_short(messages[0]['content'], 50)}"
            )
        last = len(messages) - 1
        misplaced = [i for i in range(1, last) if messages[i]["role"] != ("user" if i % 2 else "assistant")]
        if misplaced:
            first = misplaced[0]
            listed = (
                _indices(misplaced)
                if len(misplaced) <= 8
                else f"{_indices(misplaced[:8])[:-1]}, …] ({len(misplaced)} in all)"
            )
            problems.append(
                f"from messages[1] to messages[{last - 1}] user asks and assistant writings must alternate: "
                f"messages[{first}] is {_short(str(messages[first]['role']), 20)}, expected "
                f"{'user' if first % 2 else 'assistant'} (out of place: {listed})"
            )
        elif last >= 2 and last % 2 == 0:
            problems.append(f"messages[{last - 1}] is a user ask with no assistant writing before the final query")
        if problems:
            self.add("structure", "; ".join(problems))

    # --- final_query ------------------------------------------------------------------------
    def final_query(self) -> None:
        messages = self.ctx.messages
        if messages is None:
            return
        last = messages[-1]
        if last["role"] != "user":
            self.add("final_query", f"the last message is {last['role']!r}, expected the user query")
            return
        match = QUERY_PATTERN.match(last["content"])
        if match is None:
            self.add(
                "final_query",
                "the last message is not 'Prepend {random string} to the {k}th (1 indexed) {format} about "
                f"{{entity}}. Do not include any other text in your response.', found {_short(last['content'])}",
            )
            return
        rest = match["rest"]
        if " about " not in rest:
            self.add("final_query", f"the query names no '{{format}} about {{entity}}', found {_short(rest)}")
            return
        fmt, entity = rest.split(" about ", 1)
        k = int(match["ordinal"])
        written = last["content"][len("Prepend ") + len(match["random_string"]) + len(" to the ") :].split(" ", 1)[0]
        if written != ordinal(k):
            self.add("final_query", f"the query writes the ordinal {written!r}, expected {ordinal(k)!r}", "warning")
        self.ctx.random_string = match["random_string"]
        self.ctx.k = k
        self.ctx.format = fmt
        self.ctx.entity = entity
        self.ctx.ask = ASK_TEMPLATE.format(format=fmt, entity=entity)
        self.ctx.needles = [
            i for i, m in enumerate(messages[:-1]) if m["role"] == "user" and m["content"] == self.ctx.ask
        ]

    # --- random_string ----------------------------------------------------------------------
    @property
    def rs(self) -> str | None:
        """The random string the answer must start with: the column's, else the query's."""
        column = self.usable.get("random_string_to_prepend")
        return column if column else self.ctx.random_string

    def random_string(self) -> None:
        column = self.usable.get("random_string_to_prepend")
        if column is not None and not _RANDOM_STRING.match(column):
            self.add(
                "random_string",
                f"random_string_to_prepend is {_short(column, 30)}, expected 10 characters of [A-Za-z0-9]",
            )
        query_rs = self.ctx.random_string
        if query_rs is not None and column is not None and query_rs != column:
            self.add(
                "random_string",
                f"the query prepends {query_rs!r} but random_string_to_prepend is {column!r}",
            )
        elif query_rs is not None and column is None and not _RANDOM_STRING.match(query_rs):
            self.add(
                "random_string", f"the query's random string {_short(query_rs, 30)} is not 10 characters of [A-Za-z0-9]"
            )
        messages = self.ctx.messages
        rs = self.rs
        if messages is None or not rs or not _RANDOM_STRING.match(rs):
            return
        elsewhere = [i for i, m in enumerate(messages[:-1]) if rs in m["content"]]
        if self.ctx.random_string is not None and messages[-1]["content"].count(rs) > 1:
            elsewhere.append(len(messages) - 1)
        if elsewhere:
            self.add(
                "random_string",
                f"random string {rs!r} must appear only in the final query, "
                f"also found in messages {_indices(elsewhere[:10])}",
            )

    # --- needle_count; near_duplicate_ask, needle_ask_elsewhere, ask_form (in _checks_asks) ----
    def needle_count(self) -> None:
        if self.ctx.ask is None:
            return
        needles = self.ctx.needles
        n = self.usable.get("n_needles")
        if n is None:
            return
        if n < 1:
            self.add("needle_count", f"n_needles is {n}, expected at least 1")
        if len(needles) != n:
            how = "too many" if len(needles) > n else "too few"
            self.add(
                "needle_count",
                f"{how} needle asks: n_needles is {n} but {len(needles)} user messages equal "
                f"{self.ctx.ask!r}, at messages {_indices(needles)}",
            )

    def near_duplicate_ask(self) -> None:
        if self.ctx.messages is not None:
            _checks_asks.near_duplicate_ask(self.ctx.messages, self.ctx.ask, self.add)

    def needle_ask_elsewhere(self) -> None:
        if self.ctx.messages is not None:
            _checks_asks.needle_ask_elsewhere(self.ctx.messages, self.ctx.ask, self.ctx.needles, self.add)

    def ask_form(self) -> None:
        if self.ctx.messages is not None:
            _checks_asks.ask_form(self.ctx.messages, self.ctx.ask, self.add)

    # --- desired_index ----------------------------------------------------------------------
    def _describe(self, i: int) -> str:
        """What message i is: a needle's response, a distractor's writing, the preamble..."""
        messages = self.ctx.messages or []
        needles = self.ctx.needles
        if i == 0:
            return "the preamble (messages[0])"
        if i == len(messages) - 1:
            return "the final query"
        m = messages[i]
        if m["role"] == "assistant" and i - 1 in needles:
            return (
                f"messages[{i}], the response to needle {needles.index(i - 1) + 1} of {len(needles)} "
                f"(ask at messages[{i - 1}])"
            )
        if m["role"] == "assistant" and i >= 1:
            return f"messages[{i}], a distractor writing (for {_short(messages[i - 1]['content'], 60)})"
        return f"messages[{i}] ({m['role']}: {_short(m['content'], 40)})"

    def desired_index(self) -> None:
        messages, d = self.ctx.messages, self.usable.get("desired_msg_index")
        if messages is None or d is None:
            return
        if not 0 <= d < len(messages) - 1:
            self.add(
                "desired_index",
                f"desired_msg_index {d} is out of range: expected the index of a user ask in 1..{len(messages) - 3}",
            )
            return
        ask, needles, k = self.ctx.ask, self.ctx.needles, self.ctx.k
        m = messages[d]
        if ask is not None and (m["role"] != "user" or m["content"] != ask):
            expected = f"{ask!r}" + (
                f" (the {ordinal(k)} is messages[{needles[k - 1]}])" if k and k <= len(needles) else ""
            )
            self.add(
                "desired_index",
                f"messages[{d}] is not the needle ask: expected {expected}, "
                f"found {m['role']} {_short(m['content'], 60)}",
            )
            return
        if ask is None and m["role"] != "user":
            self.add("desired_index", f"messages[{d}] is an {m['role']} message, expected a user ask")
            return
        if messages[d + 1]["role"] != "assistant" or d + 1 == len(messages) - 1:
            self.add("desired_index", f"messages[{d + 1}] after the needle ask is not an assistant writing")
            return
        if k is None:
            return
        if k > len(needles):
            self.add(
                "desired_index",
                f"the query asks for the {ordinal(k)} {self.ctx.format} about {self.ctx.entity} but the prompt has "
                f"only {len(needles)} such asks, at messages {_indices(needles)}",
            )
            return
        if needles[k - 1] != d:
            self.add(
                "desired_index",
                f"desired_msg_index {d} is the {ordinal(needles.index(d) + 1)} needle ask, but the query asks for "
                f"the {ordinal(k)}: expected {needles[k - 1]}",
            )

    # --- ground_truth, answer_prefix ----------------------------------------------------------
    def answer(self) -> None:
        answer, rs = self.usable.get("answer"), self.rs
        if answer is None or not rs:
            return
        prefixed = answer.startswith(rs)
        if not prefixed:
            self.add(
                "answer_prefix",
                f"answer must start with the random string {rs!r}, found {_short(answer[: len(rs) + 20], 40)}",
            )
        messages, needles, k = self.ctx.messages, self.ctx.needles, self.ctx.k
        if messages is None or k is None or k > len(needles):
            return
        target = needles[k - 1]
        if target + 1 >= len(messages) - 1 or messages[target + 1]["role"] != "assistant":
            self.add(
                "ground_truth", f"the {ordinal(k)} needle ask (messages[{target}]) has no assistant writing after it"
            )
            return
        expected = messages[target + 1]["content"]
        body = answer[len(rs) :] if prefixed else answer
        if body == expected:
            return
        equal = [i for i, m in enumerate(messages[:-1]) if m["content"] == body]
        assistant_equal = [i for i in equal if messages[i]["role"] == "assistant"] or equal
        if assistant_equal:
            found = "the answer is the random string + " + " = ".join(self._describe(i) for i in assistant_equal[:3])
        else:
            found = (
                f"the answer matches no message ({len(body)} characters after the random string: {_short(body, 50)})"
            )
        self.add(
            "ground_truth",
            f"expected the random string + messages[{target + 1}], the response to the {ordinal(k)} needle "
            f"(ask at messages[{target}]); {found}",
        )

    def _needle_writing_pairs(self, key: Callable[[str], str]) -> list[tuple[int, int]]:
        """(first, later) message indices of needle writings whose `key` is equal."""
        messages, needles = self.ctx.messages, self.ctx.needles
        if messages is None or len(needles) < 2:
            return []
        first: dict[str, int] = {}
        pairs = []
        for i in needles:
            if i + 1 >= len(messages) - 1:
                continue
            k = key(messages[i + 1]["content"])
            if k in first:
                pairs.append((first[k], i + 1))
            else:
                first[k] = i + 1
        return pairs

    def duplicate_needle_response(self) -> None:
        pairs = self._needle_writing_pairs(lambda text: text)
        if pairs:
            shown = ", ".join(f"messages[{a}] = messages[{b}]" for a, b in pairs[:5])
            self.add(
                "duplicate_needle_response",
                f"needle responses must all differ, but {shown}: the ordinal is ambiguous",
            )

    def empty_writing(self) -> None:
        """A needle whose writing is empty or blank: the answer would be the random string alone."""
        messages, needles, k = self.ctx.messages, self.ctx.needles, self.ctx.k
        if messages is None:
            return
        empty = [
            i + 1
            for i in needles
            if i + 1 < len(messages) - 1
            and messages[i + 1]["role"] == "assistant"
            and not messages[i + 1]["content"].strip()
        ]
        if empty:
            target = needles[k - 1] + 1 if k is not None and 0 < k <= len(needles) else None
            shown = ", ".join(
                f"messages[{i}] (needle {needles.index(i - 1) + 1} of {len(needles)}"
                + (", the one the query asks for)" if i == target else ")")
                for i in empty[:8]
            )
            self.add("empty_writing", f"needle writings must not be empty or blank: {shown}")

    def ambiguous_needle_response(self) -> None:
        """Another needle's writing that would score at least AMBIGUOUS_SCORE against the target under
        the official grader: answering the wrong needle is then as good as the right one."""
        messages, needles, k = self.ctx.messages, self.ctx.needles, self.ctx.k
        if messages is None or k is None or not 1 <= k <= len(needles) or needles[k - 1] + 1 >= len(messages) - 1:
            return
        target = messages[needles[k - 1] + 1]["content"]
        close = []
        for number, i in enumerate(needles, start=1):
            writing = messages[i + 1]["content"] if i + 1 < len(messages) - 1 else target
            if number != k and writing != target and (score := ratio(writing, target)) >= AMBIGUOUS_SCORE:
                close.append(f"messages[{i + 1}] (needle {number}) scores {score:.3f}")
                self.ambiguous.add(i + 1)
        if close:
            self.add(
                "ambiguous_needle_response",
                f"against the target messages[{needles[k - 1] + 1}] (the {ordinal(k)} needle), {', '.join(close[:5])}: "
                f"a wrong needle scores at least {AMBIGUOUS_SCORE}, so the ground truth is ambiguous",
            )

    def near_duplicate_needle_response(self) -> None:
        """Needle writings that differ only in case or whitespace: the ordinal hardly matters to the score."""
        messages = self.ctx.messages
        pairs = [
            (a, b)
            for a, b in self._needle_writing_pairs(normalize_writing)
            if messages is not None
            and messages[a]["content"] != messages[b]["content"]  # equal ones are an error
            and not {a, b} & self.ambiguous  # so are those as good as the target
        ]
        if pairs:
            shown = ", ".join(f"messages[{a}] ~ messages[{b}]" for a, b in pairs[:5])
            self.add(
                "near_duplicate_needle_response",
                f"needle responses differ only in case or whitespace ({shown}): any of them scores almost "
                "as well as the right one",
                severity="warning",
            )

    # --- counts, date ---------------------------------------------------------------------------
    def counts(self) -> None:
        messages = self.ctx.messages
        if messages is None:
            return
        total = self.usable.get("total_messages")
        if total is not None and total != len(messages):
            self.add("total_messages", f"total_messages is {total}, but the prompt has {len(messages)} messages")
        n_chars = self.usable.get("n_chars")
        if n_chars is not None:
            actual = sum(len(m["content"]) for m in messages)
            if n_chars != actual:
                self.add(
                    "n_chars",
                    f"n_chars is {n_chars}, but the prompt's message contents have {actual} characters",
                )

    def date_added(self) -> None:
        value = self.usable.get("date_added")
        if value is None:
            return
        if not is_real_date(value):
            self.add("date_added", f"date_added is {_short(value, 30)}, expected a real date as MM-DD-YYYY")

    def tokens(self, tokenizer: str = DEFAULT_TOKENIZER) -> tuple[int | None, str | None]:
        messages, answer = self.ctx.messages, self.usable.get("answer")
        if messages is None or answer is None:  # a missing answer is `schema`'s: no bin is claimed without it
            return None, None
        count = _repeated_text_counter(tokenizer)
        texts = [*(m["content"] for m in messages), answer]
        n_tokens = sum(count(encodable(text) if self.unencodable else text) for text in texts)
        found = bin_for_tokens(n_tokens)
        if found is None:
            self.add(
                "token_bin",
                f"prompt + answer have {n_tokens} {tokenizer} tokens, expected 4096..1048576 (the bins of openai/mrcr)",
            )
            return n_tokens, OUT_OF_RANGE
        return n_tokens, found.label


@lru_cache(maxsize=4)
def _repeated_text_counter(tokenizer: str = DEFAULT_TOKENIZER) -> RepeatedTextCounter:
    return RepeatedTextCounter(tokenizer=tokenizer)


def analyze_row(
    record: Mapping[str, Any],
    *,
    file: str = "<row>",
    row: int | None = 0,
    count_tokens: bool = True,
    skip_columns: Collection[str] = (),
    strict: bool = False,
    tokenizer: str = DEFAULT_TOKENIZER,
) -> tuple[RowResult, RowContext]:
    """Run every check on one raw row; return the result (`strict`: warnings made errors) and
    what was parsed on the way."""
    checker = _Checker(record, file, row, skip_columns)
    try:
        checker.schema()
        checker.prompt_json()
        checker.text_encoding()
        checker.structure()
        checker.final_query()
        checker.random_string()
        checker.needle_count()
        checker.near_duplicate_ask()
        checker.needle_ask_elsewhere()
        checker.ask_form()
        checker.desired_index()
        checker.answer()
        checker.empty_writing()
        checker.duplicate_needle_response()
        checker.ambiguous_needle_response()
        checker.near_duplicate_needle_response()
        checker.counts()
        checker.date_added()
        n_tokens, bin_label = checker.tokens(tokenizer) if count_tokens else (None, None)
    except Exception as exc:  # a check must never take the run down; report it on this row
        checker.add("schema", f"row could not be checked: {type(exc).__name__}: {exc}")
        n_tokens, bin_label = None, None
    n_needles = checker.usable.get("n_needles")
    result = RowResult(
        row=row if row is not None else -1,
        findings=tuple(checker.ctx.findings),
        n_tokens=n_tokens,
        bin=bin_label,
        n_needles=n_needles,
    )
    return (as_errors(result) if strict else result), checker.ctx


def check_row(
    record: Mapping[str, Any],
    *,
    file: str = "<row>",
    row: int | None = 0,
    count_tokens: bool = True,
    skip_columns: Collection[str] = (),
    strict: bool = False,
    tokenizer: str = DEFAULT_TOKENIZER,
) -> RowResult:
    """The findings of one row plus its token count and bin (counted by `tokenizer`)."""
    return analyze_row(
        record,
        file=file,
        row=row,
        count_tokens=count_tokens,
        skip_columns=skip_columns,
        strict=strict,
        tokenizer=tokenizer,
    )[0]


def validate_row(
    record: Mapping[str, Any],
    *,
    file: str = "<row>",
    row: int | None = 0,
    count_tokens: bool = True,
    strict: bool = False,
) -> list[Finding]:
    """Every finding of one row given as its raw column dict (e.g. `MrcrRow.model_dump()`)."""
    return list(check_row(record, file=file, row=row, count_tokens=count_tokens, strict=strict).findings)
