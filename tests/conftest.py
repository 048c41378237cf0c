"""Shared fixtures. Integration fixtures live in tests/integration/conftest.py, the differential (Kafka beside
shareq) fixtures in tests/compat/conftest.py.

``--compat-results FILE`` writes the outcome of every test under tests/compat/ to FILE as JSON (on the
controller when run with xdist); ``tests/compat/report.py`` renders it as docs/compatibility.md.
``--slow`` also runs the tests marked ``slow``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Property tests check what the code computes, never how fast: Hypothesis's default 200 ms deadline
# per example only measures how busy the machine is (a shared 2-core box failed a pure assignor
# property on it), so no example has a deadline.
settings.register_profile("shareq", deadline=None)
settings.load_profile("shareq")

# The processes tests start that import kio (Spark's Python workers, say) import hypothesis with it
# where it is installed; its entry-point plugins, which no test uses, took a fifth of a second each.
os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")

_RESULTS: dict[str, dict[str, Any]] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--compat-results",
        default=None,
        help="write the outcomes of tests/compat/ to this JSON file",
    )
    parser.addoption(
        "--slow",
        action="store_true",
        default=False,
        help="also run the tests marked slow (soak and full-scale runs; `make test-slow`)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked slow run only with ``--slow``: the default run keeps their short forms."""
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow tier: run with --slow (make test-slow)")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_broker_died() -> Iterator[None]:
    """A shareq broker (tests/integration/broker_harness.py) that died during a test fails it, with the
    tail of its stderr: after the test's own fixtures are torn down, so a death after its last assertion,
    or before a fixture or the test killed or restarted the broker, counts too. A test that kills the
    broker on purpose says so by ``kill``/``terminate`` (or ``expect_exit``, or an armed crash point)."""
    yield
    harness = sys.modules.get("broker_harness")  # not imported: no broker was started
    if harness is not None and (deaths := harness.take_deaths()):
        pytest.fail("\n\n".join(deaths), pytrace=False)


def _outcome(report: pytest.TestReport) -> str | None:
    xfail_reason = getattr(report, "wasxfail", None)
    if report.when == "call":
        if report.failed and str(report.longrepr).startswith("[XPASS(strict)]"):
            return "xpassed"
        if xfail_reason is not None:
            return "xfailed" if report.skipped else "xpassed"
        return report.outcome
    if report.failed:
        return "error"
    if report.skipped:
        return "xfailed" if xfail_reason is not None else "skipped"
    return None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "tests/compat/" not in report.nodeid.replace("\\", "/"):
        return
    outcome = _outcome(report)
    if outcome is None:
        return
    entry = _RESULTS.setdefault(report.nodeid, {"nodeid": report.nodeid})
    if entry.get("outcome") in ("failed", "error"):
        return  # a failing teardown after a failed call keeps the first failure
    entry["outcome"] = outcome
    entry["duration"] = round(entry.get("duration", 0.0) + report.duration, 3)
    reason = getattr(report, "wasxfail", None)
    if reason is None and report.skipped and isinstance(report.longrepr, tuple):
        reason = report.longrepr[2]
    if reason:
        entry["reason"] = reason
    if report.failed and report.longrepr is not None:
        entry["message"] = str(report.longrepr).strip().splitlines()[-1][:500]


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--compat-results")
    if not path or hasattr(session.config, "workerinput"):
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(sorted(_RESULTS.values(), key=lambda r: r["nodeid"]), indent=1) + "\n")
