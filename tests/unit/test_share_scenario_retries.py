"""shareq's scenario vectors for redelivery backoff, the count window and crash-durable delivery
counts (the golden format with ``redelivery_backoff``, ``window_mode``, ``delivery_count_durable`` and
a ``delayed`` expectation of ``[first, last, available_at]``), through every persister."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from shareq.cli.scenario_runner import ScenarioMismatch, ScenarioRunner, load_scenario
from shareq.persister.blocking import BlockingPersister
from shareq.persister.memory import MemoryPersister
from shareq.persister.throwaway import ThrowawayStateLog

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.json"))
PORTS: dict[str, Any] = {
    "memory": lambda: BlockingPersister(MemoryPersister()),
    "builtin": ThrowawayStateLog,
    "in-log": lambda: ThrowawayStateLog(in_log=True),
}


def run(doc: dict[str, Any], persister: str) -> Any:
    with PORTS[persister]() as port:
        return ScenarioRunner(doc, port).run()


@pytest.mark.parametrize("persister", sorted(PORTS))
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_passes(path: Path, persister: str) -> None:
    report = run(load_scenario(path), persister)
    assert report.checks >= 5


def test_without_durable_counts_a_crash_forgets_the_delivery() -> None:
    """The durable-counts vector with the config off: Kafka's behaviour, nothing is written at
    acquisition and every restart hands the record out again with delivery count 1."""
    doc = load_scenario(Path(__file__).parent / "scenarios" / "durable_counts.json")
    with pytest.raises(ScenarioMismatch) as info:
        run({**copy.deepcopy(doc), "delivery_count_durable": False}, "builtin")
    assert (info.value.what, info.value.actual) == ("durable runs", [])
    off = copy.deepcopy(doc)
    off["delivery_count_durable"] = False
    for step in off["steps"]:
        step.pop("durable", None)
        step.pop("expect", None)
        if step["op"] == "acquire":
            step["expect_acquired"] = [[0, 0, 1]]
    assert run(off, "builtin").checks == 4
