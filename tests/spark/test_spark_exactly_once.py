"""The exactly-once pipeline (share group → stateless transform → topic) through kills.

A query runs in its own process group (driver, JVM, Python workers), reading a share group with
``exactlyOnce`` and writing a topic with ``exactlyOnce``; a few input records are flagged rejected by
the transform. In each test something dies at a chosen point (the driver, at a point of the sink's
commit, once or again during the replay; the broker, before the claim, after it or after the
decision), or a lease is lost to lock expiry; then the query is restarted from its checkpoint with
availableNow until the group is drained.

The checker: a read_committed consumer of the output finds every accepted input record's output
exactly once and no rejected record's; the input group's start offsets reached the log ends (every
record ACKNOWLEDGED or, for the rejected ones, ARCHIVED) and nothing is left TX_PENDING; the
commit reports show the drop the kill point implies.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))

from broker_harness import BrokerProcess
from txn_clients import read_all

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.xdist_group("spark")]

IN_PARTITIONS = 3
OUT_PARTITIONS = 2
RECORDS = 600
POISON = {17, 250, 431}  # input indexes the transform flags rejected
LOCK_MS = 5_000
CONFIGS = (
    "share.transactional.acks.enable=true",
    "group.share.min.record.lock.duration.ms=1000",
    f"group.share.record.lock.duration.ms={LOCK_MS}",
    "group.share.min.session.timeout.ms=6000",
    "group.share.session.timeout.ms=6000",
    "group.share.min.heartbeat.interval.ms=200",
    "group.share.heartbeat.interval.ms=500",
    "group.share.assignment.interval.ms=0",
)
QUERY_DEADLINE_S = 150.0

_QUERY = textwrap.dedent(
    """
    import sys
    from pyspark.sql import functions as F
    from shareq.spark.local import local_spark

    bootstrap, source, sink, group, ckpt, mode, renew, eos = sys.argv[1:9]
    spark = local_spark("shareq-eos-test", master="local[2,3]")  # a failed task is retried
    df = (
        spark.readStream.format("shareq")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("group.id", group)
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", "60")
        .option("renewLocks", renew)
        .option("exactlyOnce", eos)
        .load()
    )
    text = F.col("value").cast("string")
    columns = [F.col("key"), F.concat(F.lit("out-"), text).alias("value")]
    if eos == "true":  # rows flagged rejected: REJECTed in the batch's transaction, not written
        rejected = text.startswith("poison")
        columns += [
            F.when(rejected, F.col("topic")).alias("rejectTopic"),
            F.when(rejected, F.col("partition")).alias("rejectPartition"),
            F.when(rejected, F.col("offset")).alias("rejectOffset"),
        ]
    writer = (
        df.select(*columns).writeStream.format("shareq")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("exactlyOnce", eos)
        .option("checkpointLocation", ckpt)
    )
    if mode == "drain":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="200 milliseconds")
    query = writer.start()
    query.awaitTermination()
    """
)


def _value(i: int) -> str:
    return f"poison-{i}" if i in POISON else f"r{i}"


class Pipeline:
    """One input topic, one output topic, one share group, one checkpoint; the query as a process,
    exactly once (rows flagged rejected) or at least once (every row written)."""

    def __init__(self, broker: BrokerProcess, tmp_path: Path, *, exactly_once: bool = True) -> None:
        from shareq.client import Admin, Producer

        self.broker = broker
        self.exactly_once = exactly_once
        tag = uuid.uuid4().hex[:6]
        self.source, self.sink, self.group = f"in-{tag}", f"out-{tag}", f"g-{tag}"
        self.ckpt = tmp_path / "ckpt"
        self.script = tmp_path / "query.py"
        self.script.write_text(_QUERY)
        self.logs = tmp_path
        self.runs = 0
        with Admin(broker.bootstrap) as admin:
            admin.create_topic(self.source, IN_PARTITIONS)
            admin.create_topic(self.sink, OUT_PARTITIONS)
        with Producer(broker.bootstrap) as producer:
            for i in range(RECORDS):
                producer.send(
                    self.source, _value(i).encode(), key=str(i).encode(), partition=i % IN_PARTITIONS
                )
                if i % 20 == 19:
                    producer.flush()

    def start(self, mode: str, *, fault: str | None = None, renew: bool = True) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env.pop("SHAREQ_FAULT", None)
        if fault:
            env["SHAREQ_FAULT"] = fault
        self.runs += 1
        log = open(self.logs / f"query-{self.runs}.log", "wb")  # noqa: SIM115 (closed with the process)
        args = [
            self.broker.bootstrap,
            self.source,
            self.sink,
            self.group,
            str(self.ckpt),
            mode,
            str(renew).lower(),
            str(self.exactly_once).lower(),
        ]
        return subprocess.Popen(
            [sys.executable, str(self.script), *args],
            env=env,
            start_new_session=True,  # its own process group: driver, JVM and Python workers
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def log_tail(self) -> str:
        return (self.logs / f"query-{self.runs}.log").read_text(errors="replace")[-3000:]

    def batch_records(self, batch_id: int) -> int:
        """How many records micro-batch ``batch_id`` acquired (its end offset in the checkpoint)."""
        from shareq.spark.offsets import ShareBatchOffset

        line = (self.ckpt / "offsets" / str(batch_id)).read_text().splitlines()[-1]
        return ShareBatchOffset.from_json(json.loads(line)).record_count

    def reports(self) -> list[dict[str, Any]]:
        from shareq.spark.eos import eos_reports

        return eos_reports(str(self.ckpt)) if self.ckpt.exists() else []

    def drain(self) -> None:
        """Restart from the checkpoint with availableNow; it ends once the group is drained."""
        started = time.monotonic()
        child = self.start("drain")
        try:
            code = child.wait(QUERY_DEADLINE_S)
        finally:
            _kill(child)
        assert code == 0, self.log_tail()
        print(f"drained in {time.monotonic() - started:.1f} s")

    def check(self) -> int:
        """Assert the outcome; returns the number of duplicate outputs (0 in exactly-once mode)."""
        values = read_all(self.broker.bootstrap, self.sink, OUT_PARTITIONS, "read_committed", deadline_s=30)
        counts = Counter(values)
        rejected = POISON if self.exactly_once else set()
        expected = {f"out-{_value(i)}" for i in range(RECORDS) if i not in rejected}
        assert set(counts) == expected, (  # nothing lost, nothing extra
            sorted(set(counts) - expected)[:5],
            sorted(expected - set(counts))[:5],
        )
        self.check_drained()
        if not self.exactly_once:
            return len(values) - len(expected)
        assert [v for v, n in counts.items() if n > 1] == []  # exactly once
        reports = self.reports()
        # A commit whose EndTxn got no answer (the broker died) and whose retry was refused may have
        # been completed by the restarted broker: its rows count as written then.
        written = sum(r["written"] for r in reports)
        in_doubt = sum(r["inDoubt"] for r in reports)
        assert written <= RECORDS - len(POISON) <= written + in_doubt
        assert sum(r["rejected"] for r in reports) == len(POISON)
        return 0

    def check_drained(self) -> None:
        """Every input record is ACKNOWLEDGED (or ARCHIVED): the group's start offsets reached the
        log ends, and none is left in a transaction."""
        from shareq.client import Admin

        with Admin(self.broker.bootstrap) as admin:
            offsets = admin.describe_share_group_offsets(
                self.group, {self.source: list(range(IN_PARTITIONS))}
            )
        ends = RECORDS // IN_PARTITIONS
        assert [offsets[(self.source, p)].start_offset for p in range(IN_PARTITIONS)] == [
            ends
        ] * IN_PARTITIONS
        assert sum(o.pending_records for o in offsets.values()) == 0
        assert all(o.lag == 0 for o in offsets.values()), offsets


def _kill(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL the query's whole session: driver, JVM and Python workers (which Spark starts in
    process groups of their own), even once the driver is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait(30)
    for pid in _in_session(child.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _in_session(session: int, state: str | None = None) -> list[int]:
    """Pids of the processes in ``session`` (in ``state`` only, e.g. T for stopped, when given)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields: state, ppid, pgrp, session, ...
        if int(fields[3]) == session and fields[0] != "Z" and (state is None or fields[0] == state):
            out.append(int(entry.name))
    return out


def _wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    running = BrokerProcess(tmp_path / "data", *CONFIGS).start()
    try:
        yield running
    finally:
        running.kill()


# The crash matrix: each chain kills the query at one kind of point, at batch 0, then (restarted on
# the same checkpoint, which first replays the killed batch) at batch 1, then at a later batch,
# then drains the group with availableNow. Exactly once: before the sink's commit, between its claim
# and the end of its transaction, after its commit and before Spark records it (so the replay's
# claim must be refused). At least once (whose sink has nothing to do in its commit: the tasks
# produce): in a task before it produces, after the sink's commit and before Spark records it, and
# after Spark recorded it and before the source acknowledged the batch.
LATER_BATCH = 3
# The chains run their queries as processes of their own, not in the worker's Spark session, so they
# need not share the "spark" worker: a group of their own lets the other worker take them (about two
# minutes each), and the suite's wall time is not their sum plus every other Spark test's.
CHAIN_GROUP = "spark-chains"
EOS_CHAINS = {
    "before the commit": ("sink.commit.start@0", "sink.commit.start@1", f"sink.commit.start@{LATER_BATCH}"),
    "between claim and commit": (
        "sink.after_claim@0",
        "sink.after_produce@1",  # the output sent, the transaction open
        f"sink.after_claim@{LATER_BATCH}",
    ),
    "after the commit, before Spark's": (
        "sink.after_return@0",
        "sink.after_return@1",
        f"sink.after_return@{LATER_BATCH}",
    ),
}
ALO_CHAINS = {
    "before the output": ("sink.before_write@0", "sink.before_write@1", f"sink.before_write@{LATER_BATCH}"),
    "after the commit, before Spark's": (
        "sink.after_return@0",
        "sink.after_return@1",
        f"sink.after_return@{LATER_BATCH}",
    ),
    "after Spark's commit, before the acknowledgement": (
        "source.before_ack@0",
        "source.before_ack@1",
        f"source.before_ack@{LATER_BATCH}",
    ),
}


def _run_chain(pipeline: Pipeline, faults: tuple[str, ...]) -> None:
    """Start the query once per fault, each on the checkpoint the previous run left; each must die
    at its point (a query that never reaches it runs on until the wait times out, and fails)."""
    for point in faults:
        started = time.monotonic()
        child = pipeline.start("run", fault=point)
        try:
            child.wait(QUERY_DEADLINE_S)
        finally:
            _kill(child)
        assert child.returncode == -signal.SIGKILL, (point, pipeline.log_tail())
        print(f"{point}: killed after {time.monotonic() - started:.1f} s")


@pytest.mark.timeout(600)
@pytest.mark.xdist_group(CHAIN_GROUP)
@pytest.mark.parametrize("chain", sorted(EOS_CHAINS))
def test_exactly_once_through_driver_kills(broker: BrokerProcess, tmp_path: Path, chain: str) -> None:
    pipeline = Pipeline(broker, tmp_path)
    faults = EOS_CHAINS[chain]
    _run_chain(pipeline, faults)
    pipeline.drain()
    for point in faults:
        batch = int(point.split("@")[1])
        reports = [r for r in pipeline.reports() if r["batchId"] == batch]
        if chain == "after the commit, before Spark's":
            # committed before the kill, so the replay's claim was refused and wrote nothing
            assert len(reports) == 2 and reports[0]["written"] > 0 and reports[0]["dropped"] == 0, reports
            assert reports[1]["written"] == 0 and reports[1]["dropped"] > 0, reports
            assert "claim refused" in reports[1]["reason"], reports
        else:
            # killed before its report: the replay claims in the dead member's name while its locks
            # last, else drops the batch and its records come back in a later one
            assert len(reports) == 1, reports
    if chain == "between claim and commit":
        # batch 1's killed attempt reached the log and was aborted: read_uncommitted sees it
        uncommitted = read_all(
            broker.bootstrap, pipeline.sink, OUT_PARTITIONS, "read_uncommitted", deadline_s=30
        )
        assert len(uncommitted) > RECORDS - len(POISON)
    pipeline.check()


@pytest.mark.timeout(600)
@pytest.mark.xdist_group(CHAIN_GROUP)
@pytest.mark.parametrize("chain", sorted(ALO_CHAINS))
def test_at_least_once_through_driver_kills(broker: BrokerProcess, tmp_path: Path, chain: str) -> None:
    """Nothing is lost. The duplicates are counted and bounded: a killed batch's records were
    written before the kill, and again by the batch's replay (unless Spark had recorded it), and
    once more when, never acknowledged by the dead run, they are delivered again."""
    pipeline = Pipeline(broker, tmp_path, exactly_once=False)
    faults = ALO_CHAINS[chain]
    _run_chain(pipeline, faults)
    pipeline.drain()
    duplicates = pipeline.check()
    killed = sum(pipeline.batch_records(int(point.split("@")[1])) for point in faults)
    print(f"{chain}: {duplicates} duplicate outputs of {RECORDS} records ({killed} in killed batches)")
    assert 0 < duplicates <= 2 * killed


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_driver_killed_again_during_the_replay(broker: BrokerProcess, tmp_path: Path) -> None:
    """A double kill: the driver dies with batch 2's transaction open and its output sent; the
    restarted query replays batch 2 (its new producer aborts the open transaction, then it claims
    and writes, or drops) and dies again once that replay's commit is done, before Spark is told;
    the third run replays batch 2 once more and its claim is refused."""
    pipeline = Pipeline(broker, tmp_path)
    for fault in ("sink.after_produce@2", "sink.after_return@2"):
        child = pipeline.start("run", fault=fault)
        try:
            child.wait(QUERY_DEADLINE_S)
        finally:
            _kill(child)
        assert child.returncode == -signal.SIGKILL, pipeline.log_tail()
    replays = [r for r in pipeline.reports() if r["batchId"] == 2]
    assert len(replays) == 1  # the first run died before its report, the second after
    pipeline.drain()
    replays = [r for r in pipeline.reports() if r["batchId"] == 2]
    assert len(replays) == 2 and replays[-1]["written"] == 0 and replays[-1]["dropped"] > 0
    assert "claim refused" in replays[-1]["reason"], replays
    # The first run's output of batch 2 reached the log and was aborted.
    uncommitted = read_all(broker.bootstrap, pipeline.sink, OUT_PARTITIONS, "read_uncommitted", deadline_s=30)
    assert len(uncommitted) > RECORDS - len(POISON)
    pipeline.check()


def _restart_the_broker_and_resume(
    pipeline: Pipeline, broker: BrokerProcess, child: Any, batch: int = 1
) -> None:
    """SIGKILL and restart the broker under a commit stopped at its fault point, let the commit go
    on, and wait until batch ``batch``'s commit finished one way or the other (the query may fail on
    the restart)."""
    broker.kill()
    broker.start()
    for pid in _in_session(child.pid, "T"):
        os.kill(pid, signal.SIGCONT)
    _wait_for(
        lambda: any(r["batchId"] >= batch for r in pipeline.reports()) or child.poll() is not None,
        QUERY_DEADLINE_S,
        "the commit after the broker restart",
    )


@pytest.mark.timeout(400)
def test_broker_killed_before_the_claim(broker: BrokerProcess, tmp_path: Path) -> None:
    """The commit process stops as its commit of batch 1 starts, before it stages anything; the
    broker is SIGKILLed and restarted, which loses the batch's acquisitions (they are not durable);
    the commit goes on through the dead connection and retries with a new producer: its claim is
    refused and the batch dropped (or it succeeds if the records were acquired again meanwhile by
    the same member), and the records come back in a later batch."""
    pipeline = Pipeline(broker, tmp_path)
    child = pipeline.start("run", fault="sink.commit.start@1:stop")
    try:
        _wait_for(
            lambda: bool(_in_session(child.pid, "T")), QUERY_DEADLINE_S, "the commit to stop before its claim"
        )
        assert [r["batchId"] for r in pipeline.reports()] == [0]
        _restart_the_broker_and_resume(pipeline, broker, child)
    finally:
        _kill(child)
    first = [r for r in pipeline.reports() if r["batchId"] == 1]
    if first:  # the commit survived the restart
        assert first[0]["inDoubt"] == 0, first
        assert (first[0]["dropped"] > 0 and "claim refused" in first[0]["reason"]) or (
            first[0]["written"] > 0 and not first[0]["dropped"]
        ), first
    pipeline.drain()
    pipeline.check()


@pytest.mark.timeout(400)
@pytest.mark.parametrize("batch", [0, 1])
def test_broker_killed_after_the_claim(broker: BrokerProcess, tmp_path: Path, batch: int) -> None:
    """The commit process stops right after its claim is durable (in the query's first micro-batch,
    or its second); the broker is SIGKILLed and restarted; the commit goes on, fails on the dead
    connection and retries with a new producer."""
    pipeline = Pipeline(broker, tmp_path)
    child = pipeline.start("run", fault=f"sink.after_claim@{batch}:stop")
    try:
        _wait_for(
            lambda: bool(_in_session(child.pid, "T")), QUERY_DEADLINE_S, "the commit to stop after its claim"
        )
        _restart_the_broker_and_resume(pipeline, broker, child, batch)
    finally:
        _kill(child)
    pipeline.drain()
    pipeline.check()


@pytest.mark.timeout(400)
def test_broker_killed_after_the_decision(
    broker: BrokerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker kills itself right after the first commit decision is logged, before any marker;
    restarted, it completes the commit; the retried commit's claim is refused (already acknowledged)."""
    pipeline = Pipeline(broker, tmp_path)
    broker.kill()
    monkeypatch.setenv("SHAREQ_CRASH_AT", "txn.after_prepare")
    broker.start()
    monkeypatch.delenv("SHAREQ_CRASH_AT")
    child = pipeline.start("run")
    try:
        assert broker.process is not None
        broker.process.wait(QUERY_DEADLINE_S)  # it died at the decision
        broker.start()
        _wait_for(
            lambda: bool(pipeline.reports()) or child.poll() is not None,
            QUERY_DEADLINE_S,
            "the commit after the broker restart",
        )
    finally:
        _kill(child)
    first = pipeline.reports()
    if first:  # the commit survived the restart: its retry found the decided claim
        assert first[0]["written"] == 0 and "claim refused" in first[0]["reason"], first
    pipeline.drain()
    pipeline.check()


@pytest.mark.timeout(300)
def test_a_task_failure_is_retried_without_side_effects(broker: BrokerProcess, tmp_path: Path) -> None:
    """An executor's Python worker dies in the sink's write on the first attempt: Spark retries the
    task; the dead attempt had sent nothing, so the output is exact."""
    pipeline = Pipeline(broker, tmp_path)
    child = pipeline.start("drain", fault="sink.write@1")
    try:
        code = child.wait(QUERY_DEADLINE_S)
    finally:
        _kill(child)
    assert code == 0, pipeline.log_tail()
    log = (tmp_path / "query-1.log").read_text(errors="replace")
    assert "SHAREQ_FAULT=sink.write@1: the task's Python worker exits" in log
    assert [r["batchId"] for r in pipeline.reports() if r["dropped"]] == []
    pipeline.check()


@pytest.mark.timeout(300)
def test_a_lease_lost_to_lock_expiry_drops_the_batch(broker: BrokerProcess, tmp_path: Path) -> None:
    """Without renewals, a commit that starts after the locks lapsed finds its records AVAILABLE:
    the batch is dropped and its records come back in a later batch."""
    pipeline = Pipeline(broker, tmp_path)
    child = pipeline.start("drain", fault=f"sink.commit.start@1:sleep={LOCK_MS / 1000 + 3}", renew=False)
    try:
        code = child.wait(QUERY_DEADLINE_S)
    finally:
        _kill(child)
    assert code == 0, pipeline.log_tail()
    # (An earlier batch may lose its lease too: the first batch of a run waits for Python workers.)
    dropped = {r["batchId"]: r for r in pipeline.reports() if r["dropped"]}
    assert 1 in dropped and dropped[1]["written"] == 0
    assert "invalid_record_state" in dropped[1]["reason"]
    pipeline.check()


def _refused(query: Any) -> str:
    """The error a query ended with (it must end, and with an error)."""
    from pyspark.errors import StreamingQueryException

    try:
        ended = query.awaitTermination(QUERY_DEADLINE_S)
    except StreamingQueryException as error:
        return str(error)
    query.stop()
    raise AssertionError("the query was not refused" if ended else "the query did not end")


@pytest.mark.timeout(400)
def test_one_side_only_or_a_stateful_query_is_refused(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:

    pipeline = Pipeline(broker, tmp_path)

    def source(exactly_once: bool) -> Any:
        return (
            spark.readStream.format("shareq")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", pipeline.source)
            .option("group.id", pipeline.group)
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", "100")
            .option("exactlyOnce", str(exactly_once).lower())
            .load()
        )

    def sink(df: Any, name: str) -> Any:
        return (
            df.writeStream.format("shareq")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", pipeline.sink)
            .option("exactlyOnce", "true")
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(availableNow=True)
            .start()
        )

    # An exactly-once sink behind an at-least-once source: refused at the first commit, nothing written.
    error = _refused(sink(source(False).select("key", "value"), "sink-only"))
    assert "no shareq source with .option('exactlyOnce', 'true')" in error
    # An exactly-once source into any other sink: refused once the first batch was not claimed.
    query = (
        source(True)
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "source-only"))
        .trigger(availableNow=True)
        .start()
    )
    assert "must be a shareq sink with .option('exactlyOnce', 'true')" in _refused(query)
    # State: a dropped batch would be counted twice.
    deduplicated = source(True).dropDuplicates(["value"]).select("key", "value")
    assert "stateless queries only" in _refused(sink(deduplicated, "stateful"))
    assert read_all(broker.bootstrap, pipeline.sink, OUT_PARTITIONS, "read_uncommitted", deadline_s=30) == []


@pytest.mark.timeout(300)
def test_a_micro_batch_cap_that_cuts_an_acquisition_goes_on(spark: Any, tmp_path: Path) -> None:
    """The broker hands out whole producer batches, so a micro-batch cap below one leaves the rest
    of the acquisition held for the next micro-batch. Once the sink claimed the first batch, the
    start offset passes it while its acquisition still holds the carried records: the query must go
    on (with the broker's default lock duration no renewal happens before its next batch)."""
    from shareq.client import Admin, Producer

    running = BrokerProcess(tmp_path / "data", "share.transactional.acks.enable=true").start()
    try:
        with Admin(running.bootstrap) as admin:
            admin.create_topic("in", 1)
            admin.create_topic("out", 1)
        with Producer(running.bootstrap) as producer:  # one producer batch of 300 records
            for i in range(300):
                producer.send("in", f"r{i}".encode(), partition=0)
            producer.flush()
        query = (
            spark.readStream.format("shareq")
            .option("kafka.bootstrap.servers", running.bootstrap)
            .option("subscribe", "in")
            .option("group.id", "cut")
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", "100")
            .option("exactlyOnce", "true")
            .load()
            .select("key", "value")
            .writeStream.format("shareq")
            .option("kafka.bootstrap.servers", running.bootstrap)
            .option("topic", "out")
            .option("exactlyOnce", "true")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(QUERY_DEADLINE_S)
        assert query.exception() is None
        values = read_all(running.bootstrap, "out", 1, "read_committed", deadline_s=30)
        assert sorted(values) == sorted(f"r{i}" for i in range(300))
        from shareq.spark.eos import eos_reports

        # three micro-batches of 100, each claimed: the acquisition of 300 was cut twice
        assert [r["claimed"] for r in eos_reports(str(tmp_path / "ckpt"))] == [100, 100, 100]
    finally:
        running.kill()
