"""Console entry points; each imports its command lazily so start-up stays fast."""


def gen_main() -> None:
    from ._gen import main

    main()


def validate_main() -> None:
    from ._validate import validate_main as main

    main()


def grade_main() -> None:
    from ._grade import grade_main as main

    main()


def eval_main() -> None:
    from ._eval import eval_main as main

    main()
