"""Scenario runner: drives a SharePartition through a JSON scenario and checks its expectations.

The scenario format is the project's golden-vector format (one share-partition, an injected clock,
a log given as batch bounds). The runner is a pure driver: durable state goes through a synchronous
``StatePort`` (an async persister wrapped by the caller), so ``restart`` and ``durable`` checks see
only what was really persisted. It stops at the first mismatch. It reads the scenario file, so it
lives with the ``shareq scenario`` command and the engine package stays free of file I/O.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from shareq.protocol.acknowledge_type import AcknowledgeType
from shareq.share.backoff import RedeliveryBackoff, Trigger
from shareq.share.errors import ShareRequestError
from shareq.share.persister import PersisterError, SharePartitionKey, ShareState, WriteStateParams
from shareq.share.record_state import TERMINAL, RecordState
from shareq.share.share_partition import SharePartition
from shareq.share.types import AcknowledgementBatch, AcquireMode, PendingWrite, ResetPolicy, ShareConfig


class StatePort(Protocol):
    """The synchronous persister view the runner needs."""

    def read_state(self, key: SharePartitionKey) -> ShareState | None: ...

    def write_state(self, params: WriteStateParams) -> None: ...

    def end_transaction(self, producer_id: int, producer_epoch: int, *, commit: bool) -> None: ...


PersisterFactory = Callable[[], StatePort]


class ScenarioError(Exception):
    """The scenario document itself is malformed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioMismatch(Exception):
    """An expectation that did not hold."""

    step: int
    op: str
    what: str
    expected: Any
    actual: Any

    def __str__(self) -> str:
        return (
            f"step {self.step} ({self.op}): {self.what} differs\n"
            f"  expected: {json.dumps(self.expected)}\n"
            f"  actual:   {json.dumps(self.actual)}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioReport:
    steps: int
    checks: int


_CONFIG_FIELDS = ("record_lock_duration_ms", "delivery_count_limit", "max_record_locks")


def load_scenario(path: str | Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
        raise ScenarioError(f"{path}: a scenario is a JSON object with a 'steps' list")
    return doc


def topic_id_for(name: str) -> uuid.UUID:
    """A stable topic id for a scenario's topic name."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"shareq-topic:{name}")


class ScenarioRunner:
    """Runs one scenario document; ``run()`` returns a report or raises ``ScenarioMismatch``."""

    def __init__(self, doc: Mapping[str, Any], persister: StatePort) -> None:
        self.doc = doc
        self.persister = persister
        self.key = SharePartitionKey(
            group_id=str(doc.get("group", "G1")),
            topic_id=topic_id_for(str(doc.get("topic", "T1"))),
            partition=int(doc.get("partition", 0)),
        )
        self.config = ShareConfig(
            record_lock_duration_ms=int(doc.get("record_lock_duration_ms", 30_000)),
            delivery_count_limit=int(doc.get("delivery_count_limit", 5)),
            max_record_locks=int(doc.get("max_record_locks", 2_000)),
            backoff=_backoff(doc.get("redelivery_backoff")),
            window_count=doc.get("window_mode", "span") == "count",
            durable_counts=bool(doc.get("delivery_count_durable", False)),
        )
        self.mode = AcquireMode(doc.get("acquire_mode", "batch_optimized"))
        self.reset = ResetPolicy(doc.get("share_auto_offset_reset", "latest"))
        n = int(doc.get("log_end_offset_before_start", 0))
        self.log_firsts: list[int] = list(range(n))
        self.log_lasts: list[int] = list(range(n))
        self.log_end = n
        self.now = 0
        self.engine: SharePartition | None = None
        self.checks = 0

    # ------------------------------------------------------------------ plumbing
    def _persist(self, write: PendingWrite | None) -> None:
        queue = [write] if write is not None else []
        while queue:
            pending = queue.pop(0)
            try:
                self.persister.write_state(pending.params)
                ok = True
            except PersisterError:
                ok = False
            assert self.engine is not None
            result = self.engine.complete(pending.handle, ok, self.now)
            queue.extend(result.writes)

    def _fresh_engine(self) -> SharePartition:
        engine = SharePartition(self.key, self.config)
        write = engine.initialize(
            self.persister.read_state(self.key),
            reset=self.reset,
            log_start_offset=0,
            log_end_offset=self.log_end,
        )
        self.engine = engine
        self._persist(write)
        return engine

    def _require_engine(self, index: int, op: str) -> SharePartition:
        if self.engine is None:
            raise ScenarioError(f"step {index} ({op}) before 'initialize'")
        return self.engine

    def _batches_from(self, offset: int) -> list[tuple[int, int]]:
        i = bisect.bisect_left(self.log_lasts, offset)
        return list(zip(self.log_firsts[i:], self.log_lasts[i:], strict=True))

    # ------------------------------------------------------------------ running
    def run(self) -> ScenarioReport:
        steps = self.doc["steps"]
        for index, step in enumerate(steps):
            self._step(index, step)
        return ScenarioReport(steps=len(steps), checks=self.checks)

    def _step(self, index: int, step: Mapping[str, Any]) -> None:
        op = str(step.get("op"))
        t = int(step.get("t", self.now))
        if t < self.now:
            raise ScenarioError(f"step {index}: time goes backwards ({t} < {self.now})")
        self.now = t
        if self.engine is not None:
            self._persist(self.engine.expire(t))
            self.engine.mature(t)  # delayed records due by now are acquirable (as the shell's timer does)
        error: str | None = None
        acquired: list[list[int]] | None = None
        try:
            acquired = self._do(index, op, step)
        except ShareRequestError as exc:
            error = exc.error_name
        expected_error = step.get("expect_error")
        if expected_error is not None or error is not None:
            self.checks += 1
            if expected_error != error:
                raise ScenarioMismatch(step=index, op=op, what="error", expected=expected_error, actual=error)
        if "expect_acquired" in step:
            self.checks += 1
            if acquired != step["expect_acquired"]:
                raise ScenarioMismatch(
                    step=index, op=op, what="acquired", expected=step["expect_acquired"], actual=acquired
                )
        if "expect" in step:
            self._check_memory(index, op, step["expect"])
        if "durable" in step:
            self._check_durable(index, op, step["durable"])

    def _do(self, index: int, op: str, step: Mapping[str, Any]) -> list[list[int]] | None:
        if op == "initialize":
            if self.engine is None:
                self._fresh_engine()
            return None
        if op == "produce":
            count = int(step["count"])
            per_batch = int(step.get("records_per_batch", 1))
            if count < 0 or per_batch <= 0:
                raise ScenarioError(f"step {index}: bad produce")
            end = self.log_end + count
            for first in range(self.log_end, end, per_batch):
                self.log_firsts.append(first)
                self.log_lasts.append(min(first + per_batch, end) - 1)
            self.log_end = end
            return None
        if op == "advance_clock":
            return None
        if op == "restart":
            self.engine = None
            self._fresh_engine()
            return None
        if op == "alter_config":
            self._alter(step)
            return None
        engine = self._require_engine(index, op)
        if op == "acquire":
            mode = AcquireMode(step["acquire_mode"]) if "acquire_mode" in step else self.mode
            max_records = int(step["max_records"])
            result = engine.acquire(
                str(step["member"]),
                self._batches_from(engine.next_fetch_offset()),
                max_records=max_records,
                batch_size=int(step.get("batch_size", max_records)),
                mode=mode,
                now=self.now,
            )
            self._persist(result.write)
            self._persist(result.counts)
            return _merge_acquired(
                [(r.first_offset, r.last_offset, r.delivery_count) for r in result.records]
            )
        if op == "acknowledge":
            batches = [_ack_batch(index, raw) for raw in step["batches"]]
            ack = engine.acknowledge(str(step["member"]), batches, now=self.now)
            self._persist(ack.write)
            return None
        if op == "member_leave":
            self._persist(engine.release_member(str(step["member"]), self.now))
            return None
        if op == "stage":  # KIP-1289: acknowledgements staged by transaction ``producer_id``
            batches = [_ack_batch(index, raw) for raw in step["batches"]]
            write = engine.stage(
                str(step["member"]),
                batches,
                producer_id=int(step["producer_id"]),
                producer_epoch=int(step.get("producer_epoch", 0)),
                now=self.now,
            )
            self._persist(write)
            return None
        if op in ("commit_marker", "abort_marker"):  # the transaction's marker reaches the state
            pid, epoch, commit = (
                int(step["producer_id"]),
                int(step.get("producer_epoch", 0)),
                op == "commit_marker",
            )
            try:
                self.persister.end_transaction(pid, epoch, commit=commit)
            except PersisterError as exc:
                raise ScenarioError(f"step {index}: marker write failed: {exc}") from None
            marked = engine.end_transaction(pid, epoch, commit=commit, now=self.now)
            self._persist(marked.write)
            return None
        raise ScenarioError(f"step {index}: unknown op {op!r}")

    def _alter(self, step: Mapping[str, Any]) -> None:
        changes = {f: int(step[f]) for f in _CONFIG_FIELDS if f in step}
        if changes:
            c = self.config
            self.config = ShareConfig(
                record_lock_duration_ms=changes.get("record_lock_duration_ms", c.record_lock_duration_ms),
                delivery_count_limit=changes.get("delivery_count_limit", c.delivery_count_limit),
                max_record_locks=changes.get("max_record_locks", c.max_record_locks),
                dlq_enabled=c.dlq_enabled,
                persist_retry_backoff_ms=c.persist_retry_backoff_ms,
                backoff=c.backoff,
                window_count=c.window_count,
                durable_counts=c.durable_counts,
            )
            if self.engine is not None:
                self.engine.alter_config(self.config)
        if "window_mode" in step or "redelivery_backoff" in step:  # shareq's own group configs
            self.config = dataclasses.replace(
                self.config,
                window_count=step.get("window_mode", "count" if self.config.window_count else "span")
                == "count",
                backoff=_backoff(step["redelivery_backoff"])
                if "redelivery_backoff" in step
                else self.config.backoff,
            )
            if self.engine is not None:
                self.engine.alter_config(self.config)
        if "acquire_mode" in step:
            self.mode = AcquireMode(step["acquire_mode"])
        if "share_auto_offset_reset" in step:
            self.reset = ResetPolicy(step["share_auto_offset_reset"])

    # ------------------------------------------------------------------ checks
    def _check_memory(self, index: int, op: str, expect: Mapping[str, Any]) -> None:
        engine = self._require_engine(index, op)
        if "spso" in expect:
            self._compare(index, op, "spso", expect["spso"], engine.spso)
        if "speo" in expect:
            self._compare(index, op, "speo", expect["speo"], engine.end_offset)
        if "runs" in expect:
            actual = [
                [r.first_offset, r.last_offset, r.state.name, r.delivery_count, r.member]
                for r in engine.runs()
                if r.last_offset >= engine.spso
            ]
            self._compare(index, op, "runs", expect["runs"], actual)
        if "delayed" in expect:  # shareq: AVAILABLE runs waiting for a redelivery due time
            delayed = [
                [r.first_offset, r.last_offset, r.available_at]
                for r in engine.runs()
                if r.available_at and r.last_offset >= engine.spso
            ]
            self._compare(index, op, "delayed", expect["delayed"], delayed)

    def _check_durable(self, index: int, op: str, durable: Mapping[str, Any]) -> None:
        rebuilt = SharePartition(self.key, self.config)
        rebuilt.initialize(
            self.persister.read_state(self.key),
            reset=self.reset,
            log_start_offset=0,
            log_end_offset=self.log_end,
        )
        if "spso" in durable:
            self._compare(index, op, "durable spso", durable["spso"], rebuilt.spso)
        if "delayed" in durable:  # shareq: the due times a restart honours
            delayed = [
                [r.first_offset, r.last_offset, r.available_at] for r in rebuilt.runs() if r.available_at
            ]
            self._compare(index, op, "durable delayed", durable["delayed"], delayed)
        if "runs" not in durable:
            return
        actual_runs: list[list[Any]] = []
        actual: dict[int, tuple[str, int]] = {}
        for r in rebuilt.runs():
            name = _durable_name(r.state)
            actual_runs.append([r.first_offset, r.last_offset, name, r.delivery_count])
            for offset in range(max(r.first_offset, rebuilt.spso), r.last_offset + 1):
                actual[offset] = (name, r.delivery_count)
        expected: dict[int, tuple[str, int]] = {}
        for first, last, name, count in durable["runs"]:
            for offset in range(first, last + 1):
                expected[offset] = (name, count)
        self.checks += 1
        ok = expected.keys() == actual.keys() and all(
            actual[o][0] == expected[o][0] and actual[o][1] >= expected[o][1] for o in expected
        )
        if not ok:
            raise ScenarioMismatch(
                step=index,
                op=op,
                what="durable runs",
                expected=durable["runs"],
                actual=_merge_named(actual_runs),
            )

    def _compare(self, index: int, op: str, what: str, expected: Any, actual: Any) -> None:
        self.checks += 1
        if expected != actual:
            raise ScenarioMismatch(step=index, op=op, what=what, expected=expected, actual=actual)


def _backoff(raw: Mapping[str, Any] | None) -> RedeliveryBackoff | None:
    """shareq's ``redelivery_backoff``: ``ms``, ``multiplier`` (2.0), ``max_ms`` (60000), ``jitter``
    (0.2), ``on`` (all of release, timeout, leave)."""
    if not raw:
        return None
    return RedeliveryBackoff(
        base_ms=int(raw["ms"]),
        multiplier=float(raw.get("multiplier", 2.0)),
        max_ms=int(raw.get("max_ms", 60_000)),
        jitter=float(raw.get("jitter", 0.2)),
        on=frozenset(Trigger(t) for t in raw.get("on", ("release", "timeout", "leave"))),
    )


def _durable_name(state: RecordState) -> str:
    kept = state in TERMINAL or state is RecordState.ARCHIVING or state is RecordState.TX_PENDING
    return state.name if kept else RecordState.AVAILABLE.name


def _merge_named(runs: list[list[Any]]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for run in runs:
        if out and out[-1][1] + 1 == run[0] and out[-1][2:] == run[2:]:
            out[-1][1] = run[1]
        else:
            out.append(list(run))
    return out


def _merge_acquired(ranges: Sequence[tuple[int, int, int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for first, last, count in ranges:
        if out and out[-1][1] + 1 == first and out[-1][2] == count:
            out[-1][1] = last
        else:
            out.append([first, last, count])
    return out


def _ack_batch(index: int, raw: Sequence[Any]) -> AcknowledgementBatch:
    if len(raw) != 3:
        raise ScenarioError(f"step {index}: an acknowledgement batch is [first, last, TYPE or [TYPE...]]")
    first, last, kinds = int(raw[0]), int(raw[1]), raw[2]
    names = [kinds] if isinstance(kinds, str) else list(kinds)
    try:
        types = tuple(AcknowledgeType[str(name)] for name in names)
    except KeyError as exc:
        raise ScenarioError(f"step {index}: unknown acknowledge type {exc}") from None
    return AcknowledgementBatch(first_offset=first, last_offset=last, types=types)


def run_scenario(doc: Mapping[str, Any], persister_factory: PersisterFactory) -> ScenarioReport:
    """Run ``doc`` against a fresh engine and a persister made by ``persister_factory``."""
    return ScenarioRunner(doc, persister_factory()).run()
