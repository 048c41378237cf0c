"""The golden vector through the scenario runner and through ``python -m shareq scenario``."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ci_support import in_ci
from shareq.cli.scenario_runner import ScenarioMismatch, ScenarioRunner, load_scenario, run_scenario
from shareq.persister.blocking import BlockingPersister
from shareq.persister.memory import MemoryPersister
from shareq.persister.throwaway import ThrowawayStateLog

# shared/ sits beside the repository root; SHAREQ_SHARED_DIR points elsewhere (e.g. from a worktree).
SHARED = Path(os.environ.get("SHAREQ_SHARED_DIR") or Path(__file__).resolve().parents[2].parent / "shared")
GOLDEN = SHARED / "golden" / "kip932_worked_example.json"
# Outside CI a checkout without shared/ skips these; in CI (CI=true) they must run, so a missing
# file fails loudly instead of skipping quietly.
needs_golden = pytest.mark.skipif(
    not GOLDEN.exists() and not in_ci(), reason=f"golden vectors not present at {GOLDEN}"
)


PORTS: dict[str, Any] = {
    "memory": lambda: BlockingPersister(MemoryPersister()),
    # The durable state log on disk, replayed from its files for every restart and durable check.
    "builtin": ThrowawayStateLog,
    # The in-log persister: control records in throwaway partition logs, recovered for every read.
    "in-log": lambda: ThrowawayStateLog(in_log=True),
}


def run(doc: dict[str, Any], persister: str = "memory") -> Any:
    with PORTS[persister]() as port:
        return ScenarioRunner(doc, port).run()


@needs_golden
@pytest.mark.parametrize("persister", sorted(PORTS))
def test_golden_vector_through_the_runner(persister: str) -> None:
    with PORTS[persister]() as port:
        report = run_scenario(load_scenario(GOLDEN), lambda: port)
        if isinstance(port, ThrowawayStateLog):
            assert port.reloads >= 10  # every durable check and restart replayed the state log
    assert report.steps == 19
    assert report.checks >= 60


@needs_golden
@pytest.mark.parametrize("persister", sorted(PORTS))
def test_golden_vector_survives_a_restart_at_every_durable_step(persister: str) -> None:
    doc = load_scenario(GOLDEN)
    steps = doc["steps"]
    restarts = 0
    for i, step in enumerate(steps):
        if "durable" not in step:
            continue
        variant = copy.deepcopy(doc)
        restart = {"t": step["t"], "op": "restart", "expect": {"spso": step["durable"]["spso"]}}
        variant["steps"] = [*variant["steps"][: i + 1], restart]
        run(variant, persister)
        restarts += 1
    assert restarts >= 5, "the golden vector has durable steps to restart at"


@needs_golden
def test_a_wrong_expectation_is_reported_with_expected_and_actual() -> None:
    doc = load_scenario(GOLDEN)
    doc["steps"][2]["expect_acquired"] = [[100, 108, 1]]
    with pytest.raises(ScenarioMismatch) as info:
        run(doc)
    assert info.value.step == 2
    assert info.value.expected == [[100, 108, 1]] and info.value.actual == [[100, 109, 1]]


@needs_golden
@pytest.mark.parametrize("persister", sorted(PORTS))
def test_a_wrong_durable_expectation_is_caught(persister: str) -> None:
    doc = load_scenario(GOLDEN)
    doc["steps"][7]["durable"]["runs"] = [[110, 110, "AVAILABLE", 2]]
    with pytest.raises(ScenarioMismatch, match="durable runs"):
        run(doc, persister)


def test_every_format_field_is_accepted() -> None:
    doc = {
        "group": "G9",
        "topic": "orders",
        "partition": 3,
        "record_lock_duration_ms": 1000,
        "delivery_count_limit": 3,
        "max_record_locks": 4,
        "acquire_mode": "record_limit",
        "log_end_offset_before_start": 2,
        "share_auto_offset_reset": "earliest",
        "steps": [
            {"t": 0, "op": "initialize", "expect": {"spso": 0, "speo": 0, "runs": []}},
            {"t": 0, "op": "produce", "count": 6, "records_per_batch": 3},
            {"t": 0, "op": "acquire", "member": "a", "max_records": 10, "expect_acquired": [[0, 3, 1]]},
            {"t": 1, "op": "alter_config", "max_record_locks": 8, "acquire_mode": "batch_optimized"},
            {"t": 1, "op": "acquire", "member": "b", "max_records": 1, "expect_acquired": [[4, 4, 1]]},
            {
                "t": 2,
                "op": "acknowledge",
                "member": "a",
                "batches": [[0, 2, ["ACCEPT", "REJECT", "GAP"]], [3, 3, "RENEW"]],
                "expect": {
                    "spso": 3,
                    "speo": 5,
                    "runs": [[3, 3, "ACQUIRED", 1, "a"], [4, 4, "ACQUIRED", 1, "b"]],
                },
            },
            {
                "t": 3,
                "op": "acknowledge",
                "member": "b",
                "batches": [[3, 3, "ACCEPT"]],
                "expect_error": "INVALID_RECORD_STATE",
            },
            {
                "t": 4,
                "op": "member_leave",
                "member": "b",
                "durable": {"spso": 3, "runs": [[4, 4, "AVAILABLE", 1]]},
            },
            {"t": 1002, "op": "advance_clock", "expect": {"runs": [[3, 4, "AVAILABLE", 1, None]]}},
            {
                "t": 1003,
                "op": "restart",
                "expect": {"spso": 3, "speo": 5, "runs": [[3, 4, "AVAILABLE", 1, None]]},
            },
            {
                "t": 1004,
                "op": "acquire",
                "member": "c",
                "max_records": 9,
                "expect_acquired": [[3, 4, 2], [5, 7, 1]],
            },
        ],
    }
    report = run(doc)
    assert report.steps == 11


@needs_golden
@pytest.mark.timeout(60)
def test_cli_passes_the_golden_vector() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "shareq", "scenario", str(GOLDEN)],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "19 steps" in proc.stdout and "builtin persister" in proc.stdout


@needs_golden
@pytest.mark.timeout(60)
def test_cli_fails_at_the_first_mismatch(tmp_path: Path) -> None:
    doc = load_scenario(GOLDEN)
    doc["steps"][3]["expect"]["spso"] = 111
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    proc = subprocess.run(
        [sys.executable, "-m", "shareq", "scenario", str(bad)],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert proc.returncode == 1
    assert "step 3" in proc.stderr and "expected: 111" in proc.stderr and "actual:   110" in proc.stderr
