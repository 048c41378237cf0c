"""``python -m shareq`` and the ``shareq`` command: the command line, ``shareq serve`` (the broker)
included."""

import sys


def run() -> None:
    # kio imports hypothesis when it is installed, to register strategies for its types; with the
    # test dependencies installed (and hypothesis's plugins) that was a third of every broker's
    # start-up, for something no shareq process uses.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]  # None: the import fails
    from shareq.cli.main import main

    main()


if __name__ == "__main__":
    run()
