"""The checking part of a recipe (`CheckingRecipe`) and what recipes usually share of it
(`CheckingDefaults`): a recipe declares its `CheckSpec`; `mrcr-validate`, `--clean` and `--fix`
run it through the one pipeline."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from ..engines import Engine
from ._files import validate_paths
from ._repair import RepairResult, repair
from ._spec import CheckSpec


class RepairRefused(ValueError):
    """`--clean`/`--fix` cannot write what was asked (one line for the user)."""


class ValidateOptions(Protocol):
    """`mrcr-validate`'s options as a recipe's `validate` reads them (`mrcr_gen._request.ValidateRequest`)."""

    @property
    def tokens(self) -> bool: ...
    @property
    def workers(self) -> int | None: ...
    @property
    def engine(self) -> Engine | None: ...
    @property
    def strict(self) -> bool: ...
    @property
    def tokenizer(self) -> str | None: ...
    @property
    def mode(self) -> Literal["check", "clean", "fix"]: ...
    @property
    def out(self) -> Path | None: ...
    @property
    def progress(self) -> Callable[[str, int, int | None], None] | None: ...
    @property
    def on_change(self) -> Callable[[str], None] | None: ...
    @property
    def shortcuts(self) -> bool: ...


class CheckingRecipe(Protocol):
    """What `mrcr-validate` needs of a recipe: its checking declaration (`checking`: reader, checker,
    check names in its report order, fixer), whether clean/fix apply, and `validate` itself."""

    def checking(self) -> CheckSpec:
        """The declaration the pipeline streams this recipe's files through."""
        ...

    def repair_refusal(self, mode: str) -> str | None:
        """Why `mode` ("clean" or "fix") does not apply to its files, or None when it does."""
        ...

    def validate(self, inputs: Sequence[str], request: ValidateOptions) -> RepairResult:
        """Check its files (`mrcr-validate`) and, with mode clean or fix, write the rows kept to
        `request.out`; `inputs` may name what is not a file (its report then says so).
        RepairRefused when the output cannot be written as asked."""
        ...


class CheckingDefaults:
    """`validate` through the one pipeline, with the recipe's `checking()` declaration; clean and
    fix apply (the pipeline refuses `--fix` when the declaration has no fixer)."""

    def checking(self) -> CheckSpec:
        raise NotImplementedError(f"{type(self).__name__} declares no checking")

    def repair_refusal(self, mode: str) -> str | None:
        return None

    def validate(self, inputs: Sequence[str], request: ValidateOptions) -> RepairResult:
        return validate_inputs(self.checking(), inputs, request)


def validate_inputs(spec: CheckSpec, inputs: Sequence[str | os.PathLike], request: ValidateOptions) -> RepairResult:
    """`mrcr-validate` on one recipe's inputs: check them, or with mode clean/fix also write the
    rows kept to `request.out`."""
    options: dict[str, Any] = {
        "tokens": request.tokens,
        "workers": request.workers,
        "engine": request.engine,
        "progress": request.progress,
        "strict": request.strict,
        "tokenizer": request.tokenizer,
    }
    if request.mode == "check" or request.out is None:
        report = validate_paths(inputs, spec=spec, shortcuts=request.shortcuts, **options)
        return RepairResult(report=report, output="")
    try:
        return repair(inputs, request.out, spec=spec, mode=request.mode, on_change=request.on_change, **options)
    except (ValueError, OSError) as exc:
        raise RepairRefused(str(exc)) from None
