"""`mrcr-gen`'s local workers started before its options are parsed (`start_workers_early`): the
command's own start (its imports, typer) takes a few tenths of a second on one core, while the
workers' fork server takes a second on another to import what the workers need."""

from __future__ import annotations

#: The options that decide which workers a generation uses, by the request field each sets.
DECIDING = {
    "--recipe": "recipe",
    "--tokenizer": "tokenizer",
    "--engine": "engine",
    "--workers": "workers",
    "-w": "workers",
}


def start_workers_early(argv: list[str]) -> None:
    """Start the fork server of the generation `argv` most likely asks for; nothing for a subcommand,
    --help, or options it cannot read (the command itself then says what is wrong, as always)."""
    guessed = peek(argv)
    if guessed is None:
        return
    from ..generate import GenerateRequest
    from ..generate import start_workers_early as start
    from ..recipes import recipe_named

    try:
        recipe = recipe_named(guessed.get("recipe", "openai-mrcr"))
        workers = int(guessed["workers"]) if "workers" in guessed else None
        request = GenerateRequest(
            tokenizer=guessed.get("tokenizer", GenerateRequest.tokenizer),
            engine=guessed.get("engine", GenerateRequest.engine),
            workers=workers,
        )
        start(recipe, request)
    except (ValueError, ImportError):  # a guess: the command reports a bad value itself
        return


def peek(argv: list[str]) -> dict[str, str] | None:
    """The values of the DECIDING options in `argv` (`--name value` or `--name=value`), or None when
    `argv` runs a subcommand, asks for help, or ends in an option without its value."""
    if argv[:1] == ["pool"] or any(arg in ("-h", "--help") or arg.endswith("-completion") for arg in argv):
        return None
    found: dict[str, str] = {}
    for i, arg in enumerate(argv):
        name, equals, value = arg.partition("=")
        if name not in DECIDING:
            continue
        if not equals:
            if i + 1 == len(argv):
                return None
            value = argv[i + 1]
        found[DECIDING[name]] = value
    return found
