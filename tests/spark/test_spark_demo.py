"""``shareq demo`` runs end to end and exits on its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.xdist_group("spark")]


@pytest.mark.timeout(400)
def test_demo_runs_end_to_end_with_a_few_records() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "shareq",
            "demo",
            "--records",
            "300",
            "--produce-seconds",
            "1",
            "--timeout",
            "300",
        ],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=380,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "summary" in out
    # Every 97th event is malformed: 3 of 300 are rejected, the rest land in the table.
    assert re.search(r"records in\s+300 \(3 malformed\)", out)
    assert re.search(r"accepted\s+297\s+\(Parquet table rows: 297\)", out)
    assert re.search(r"rejected\s+3\b", out)


@pytest.mark.timeout(400)
def test_demo_exactly_once_writes_each_good_order_once_and_rejects_the_malformed() -> None:
    args = ["demo", "--exactly-once", "--records", "300", "--produce-seconds", "1", "--timeout", "300"]
    result = subprocess.run(
        [sys.executable, "-m", "shareq", *args],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=380,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "summary (exactly once)" in out
    assert re.search(r"records in\s+300 \(3 malformed\)", out)
    assert re.search(r"written\s+297\b", out)
    assert re.search(r"rejected\s+3\b", out)
    assert re.search(r"claimed\s+300/300", out)  # the progress line
