"""``python -m shareq``: the command line, ``shareq serve`` (the broker) included."""

import sys

# kio imports hypothesis when it is installed, to register strategies for its types; with the test
# dependencies installed (and hypothesis's plugins) that was a third of every broker's start-up, for
# something no shareq process uses.
sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]  # None: the import fails

from shareq.cli.main import main  # noqa: E402

main()
