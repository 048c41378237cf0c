"""The scenario format's TX_PENDING operations (stage, commit_marker, abort_marker), run against
the in-memory persister and the durable state log replayed from disk."""

from __future__ import annotations

from typing import Any

import pytest

from shareq.cli.scenario_runner import ScenarioRunner
from shareq.persister.blocking import BlockingPersister
from shareq.persister.memory import MemoryPersister
from shareq.persister.throwaway import ThrowawayStateLog

PORTS: dict[str, Any] = {
    "memory": lambda: BlockingPersister(MemoryPersister()),
    "builtin": ThrowawayStateLog,
    "in-log": lambda: ThrowawayStateLog(in_log=True),
}

SCENARIO: dict[str, Any] = {
    "record_lock_duration_ms": 1000,
    "delivery_count_limit": 5,
    "share_auto_offset_reset": "earliest",
    "log_end_offset_before_start": 10,
    "steps": [
        {"t": 0, "op": "initialize"},
        {"t": 0, "op": "acquire", "member": "m1", "max_records": 10, "expect_acquired": [[0, 9, 1]]},
        {
            "t": 100,
            "op": "stage",
            "member": "m1",
            "producer_id": 7,
            "batches": [[0, 3, "ACCEPT"], [4, 5, ["REJECT", "GAP"]]],
            "expect": {"runs": [[0, 5, "TX_PENDING", 1, "m1"], [6, 9, "ACQUIRED", 1, "m1"]]},
            "durable": {"spso": 0, "runs": [[0, 5, "TX_PENDING", 1]]},
        },
        {
            "t": 150,
            "op": "acknowledge",
            "member": "m1",
            "batches": [[0, 0, "RENEW"]],
            "expect_error": "INVALID_RECORD_STATE",
        },
        {"t": 200, "op": "stage", "member": "m1", "producer_id": 8, "batches": [[6, 9, "ACCEPT"]]},
        {
            "t": 5000,
            "op": "advance_clock",
            "expect": {"runs": [[0, 5, "TX_PENDING", 1, "m1"], [6, 9, "TX_PENDING", 1, "m1"]]},
        },
        {
            "t": 5000,
            "op": "restart",
            "expect": {"runs": [[0, 5, "TX_PENDING", 1, None], [6, 9, "TX_PENDING", 1, None]]},
        },
        {"t": 5001, "op": "commit_marker", "producer_id": 7, "expect": {"spso": 6}, "durable": {"spso": 6}},
        {
            "t": 5002,
            "op": "abort_marker",
            "producer_id": 8,
            "expect": {"spso": 6, "runs": [[6, 9, "AVAILABLE", 1, None]]},
            "durable": {"spso": 6, "runs": [[6, 9, "AVAILABLE", 1]]},
        },
        {"t": 5003, "op": "acquire", "member": "m2", "max_records": 10, "expect_acquired": [[6, 9, 2]]},
        {"t": 5004, "op": "stage", "member": "m2", "producer_id": 9, "batches": [[6, 9, "ACCEPT"]]},
        {
            "t": 5005,
            "op": "abort_marker",
            "producer_id": 9,
            "expect": {"runs": [[6, 9, "ACQUIRED", 2, "m2"]]},
        },
        {
            "t": 7000,
            "op": "advance_clock",
            "expect": {"spso": 6, "runs": [[6, 9, "AVAILABLE", 2, None]]},
            "durable": {"spso": 6, "runs": [[6, 9, "AVAILABLE", 2]]},
        },
    ],
}


@pytest.mark.parametrize("persister", sorted(PORTS))
def test_tx_pending_scenario(persister: str) -> None:
    with PORTS[persister]() as port:
        report = ScenarioRunner(SCENARIO, port).run()
    assert report.steps == len(SCENARIO["steps"])
