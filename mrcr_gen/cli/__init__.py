"""Console entry points; each imports its command lazily so start-up stays fast."""


def gen_main(args: list[str] | None = None) -> None:
    """`mrcr-gen`, with its `pool` subcommands (their own command module) added here, so that
    command modules never import each other."""
    import sys

    from ._gen_start import start_workers_early

    start_workers_early(list(sys.argv[1:] if args is None else args))  # before the imports below
    from ._common import run_app
    from ._gen import app
    from ._pool import pool_app

    if not any(group.name == "pool" for group in app.registered_groups):
        app.add_typer(pool_app, name="pool")
    if args is not None:  # called from Python (tests): SystemExit as always
        run_app(app, "mrcr-gen", args)
        return
    from ._common import leave_at_once

    try:
        run_app(app, "mrcr-gen", args)
    except SystemExit as exc:
        leave_at_once(exc.code)


def validate_main() -> None:
    from ._validate import validate_main as main

    main()


def grade_main() -> None:
    from ._grade import grade_main as main

    main()


def eval_main(args: list[str] | None = None) -> None:
    """`mrcr-eval`, with `export-inspect` added here and `mrcr-eval batch ...` routed to its own
    command module (command modules never import each other)."""
    import sys

    argv = list(sys.argv[1:] if args is None else args)
    if argv[:1] == ["batch"]:
        from ._batch import batch_main

        batch_main(argv[1:])
        return
    from ._eval import SUBCOMMANDS
    from ._eval import eval_main as main
    from ._inspect import export_app

    SUBCOMMANDS.setdefault("export-inspect", export_app)
    main(argv)
