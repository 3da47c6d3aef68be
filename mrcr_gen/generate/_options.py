"""Generation options: the ones every recipe shares live in `GenerateRequest`; a recipe declares
its own as `GenOption`s, which `mrcr-gen` turns into command-line options (so a plugin recipe's
appear in `--help`) and hands to the recipe, checked, in `GenerateRequest.options`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class GenOption:
    """One option of a recipe: its parameter `name` (the key in `GenerateRequest.options`), its
    command-line `flags`, its Python type (`annotation`, e.g. `int | None`), default and help.
    `min`: the smallest number it takes, if any. Two recipes may declare the same option (the
    same flags and type): it is then theirs both."""

    name: str
    flags: tuple[str, ...]
    annotation: Any
    default: Any
    help: str
    min: int | None = None

    @property
    def flag(self) -> str:
        return self.flags[0]


#: The options of a writer that asks an OpenAI-compatible model for its writings.
MODEL_WRITER_OPTIONS: tuple[GenOption, ...] = (
    GenOption("model", ("--model",), str | None, None, "--writer openai: model name (e.g. gpt-4o)."),
    GenOption(
        "base_url",
        ("--base-url",),
        str | None,
        None,
        "--writer openai: API base URL (default $OPENAI_BASE_URL, else OpenAI).",
    ),
    GenOption(
        "concurrency",
        ("--concurrency",),
        int | None,
        None,  # unset, not 16: a writer that cannot honour it (the Batch API) refuses any value given
        "--writer openai: requests in flight at most (default 16).",
        min=1,
    ),
    GenOption(
        "cache_dir", ("--cache-dir",), Path | None, None, "--writer openai: writing cache (default ~/.cache/mrcr-gen)."
    ),
    GenOption("temperature", ("--temperature",), float | None, None, "--writer openai: sampling temperature."),
    GenOption("max_tokens", ("--max-tokens",), int | None, None, "--writer openai: max_tokens per writing.", min=1),
)


def option_values(declared: tuple[GenOption, ...], given: dict[str, Any], recipe: str) -> dict[str, Any]:
    """`given` completed with the declared defaults; ValueError naming an option `recipe` does not
    declare (an option a recipe cannot honour is refused, never ignored)."""
    names = {option.name: option for option in declared}
    for name in given:
        if name not in names:
            raise ValueError(f"--{name.replace('_', '-')} is not an option of --recipe {recipe}")
    return {option.name: given.get(option.name, option.default) for option in declared}
