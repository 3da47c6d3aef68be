"""Which prompts fit a model's context window, counted as the server will count them.

Three ways to count a row's prompt: the sum of its message contents with a tokenizer (the seed's
rule; o200k_base by default), the prompt as the model's chat template renders it, tokenized with
the model's own tokenizer (`--chat-template`), or the server's own `/tokenize` endpoint (vLLM's,
`--count-with-server`). `rows_over_window` runs before any request is sent, so a row the server
would reject for length is skipped and listed instead.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from .._tokens import DEFAULT_TOKENIZER, HFTokenizer, TokenizerError, load_tokenizer
from ._items import EvalRecipe, read_items

PromptCounter = Callable[[list[dict]], int]


class TooLong(BaseModel):
    """A row whose prompt does not fit: where it is and how many tokens it counted."""

    model_config = ConfigDict(frozen=True)

    file: str
    row: int
    prompt_tokens: int


def chat_template_counter(tokenizer: str) -> PromptCounter:
    """Tokens of the prompt as the model's chat template renders it (with the generation prompt),
    rendered the way transformers' `apply_chat_template` does and tokenized without adding
    special tokens again (the template writes them)."""
    loaded = load_tokenizer(tokenizer)
    if not isinstance(loaded, HFTokenizer):
        raise TokenizerError(f"--chat-template needs an hf: tokenizer with a chat template, not {tokenizer}")
    config = loaded.config()
    template = _chat_template(config, loaded)
    if template is None:
        raise TokenizerError(f"{tokenizer}: no chat_template in tokenizer_config.json (nor chat_template.jinja)")
    render = compile_chat_template(template)
    special = {
        key: _token_text(value)
        for key, value in config.items()
        if key.endswith("_token") and _token_text(value) is not None
    }

    def count(messages: list[dict]) -> int:
        try:
            text = render(messages=messages, add_generation_prompt=True, **special)
        except Exception as exc:  # jinja2's TemplateError, or whatever the template raises on these messages
            raise TokenizerError(
                f"{tokenizer}: the chat template failed on a row: {type(exc).__name__}: {exc}"
            ) from None
        return len(loaded.tokenizer.encode(text, add_special_tokens=False).ids)

    return count


def _chat_template(config: dict, loaded: HFTokenizer) -> str | None:
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": "default", "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if template is None:
        jinja_file = loaded.file.with_name("chat_template.jinja")
        if jinja_file.is_file():
            template = jinja_file.read_text(encoding="utf-8")
    return template if isinstance(template, str) else None


def _token_text(value: object) -> str | None:
    """A special token as tokenizer_config.json stores it: a string, or an AddedToken dict."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def compile_chat_template(template: str) -> Callable[..., str]:
    """A jinja2 template set up as transformers sets up chat templates (sandboxed, trim_blocks,
    lstrip_blocks, loop controls, `raise_exception`, `strftime_now`, a `tojson` that keeps non-ASCII)."""
    try:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise TokenizerError("--chat-template needs jinja2: pip install 'mrcr-gen[hf]'") from None

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return environment.from_string(template).render


def server_counter(base_url: str, model: str, api_key: str | None = None, timeout: float = 600.0) -> PromptCounter:
    """Tokens of the prompt as a vLLM-style server counts it: `POST {root}/tokenize` with the
    messages and the generation prompt; the answer's `count`."""
    root = base_url.rstrip("/").removesuffix("/v1")
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"

    def count(messages: list[dict]) -> int:
        body = json.dumps({"model": model, "messages": messages, "add_generation_prompt": True}).encode()
        request = urllib.request.Request(f"{root}/tokenize", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return int(json.loads(response.read())["count"])
        except urllib.error.HTTPError as exc:
            raise TokenizerError(f"{root}/tokenize answered HTTP {exc.code}: is it a vLLM-style server?") from None
        except (urllib.error.URLError, OSError) as exc:
            raise TokenizerError(f"cannot reach {root}/tokenize: {getattr(exc, 'reason', exc)}") from None
        except (ValueError, KeyError, TypeError):
            raise TokenizerError(f"{root}/tokenize did not answer with a JSON object holding `count`") from None

    return count


def contents_counter(tokenizer: str = DEFAULT_TOKENIZER) -> PromptCounter:
    """The seed's rule: the sum of the message contents' tokens."""
    loaded = load_tokenizer(tokenizer)
    return lambda messages: sum(loaded.count_batch([m["content"] for m in messages]))


def prompt_counter(
    tokenizer: str = DEFAULT_TOKENIZER,
    *,
    chat_template: bool = False,
    server: tuple[str, str] | None = None,
    api_key: str | None = None,
) -> PromptCounter:
    """How prompts are counted: the server's /tokenize for `server=(base_url, model)`, else the
    chat template rendered with `tokenizer`'s, else the sum of contents with `tokenizer`."""
    if server is not None:
        return server_counter(*server, api_key=api_key)
    if chat_template:
        return chat_template_counter(tokenizer)
    return contents_counter(tokenizer)


def rows_over_window(
    files: Sequence[str],
    max_context_window: int,
    count: PromptCounter,
    *,
    recipes: Sequence[EvalRecipe],
    needles: Sequence[int] | None = None,
    on_row: Callable[[], None] | None = None,
) -> list[TooLong]:
    """Every sendable row (of the wanted needle counts) whose prompt counts more than the window.
    `file` is the item's source, as the runner names it; a file that cannot be read raises FileError."""
    wanted = set(needles) if needles else None
    over = []
    for path in files:
        for item in read_items(path, recipes=recipes):
            if item.error is not None or (wanted is not None and item.n_needles not in wanted):
                continue
            tokens = count(item.messages)
            if tokens > max_context_window:
                over.append(TooLong(file=item.source, row=item.row, prompt_tokens=tokens))
            if on_row is not None:
                on_row()
    return over
