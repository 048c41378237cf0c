"""``python -m shareq`` and the ``shareq`` command import what they use, not the test libraries."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).parent / "shareq"
"""The ``shareq`` command the install put beside this interpreter."""


@pytest.mark.parametrize("entry", [["-m", "shareq"], [str(SCRIPT)]], ids=["python -m shareq", "shareq"])
def test_shareq_does_not_import_hypothesis(entry: list[str]) -> None:
    """kio imports hypothesis whenever it can; where the test dependencies are installed that
    (with its plugins) was about a third of a broker's start-up and a third of its RSS."""
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_NO_PLUGINS"}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *entry, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    imported = {line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")}
    assert "kio.static._phantom" in imported  # the module that would import it did run
    # kio's attempt (``hypothesis.strategies``) is listed, refused at once: the package never loads
    assert not {"hypothesis", "hypothesis.internal", "trio"} & imported
