"""The streaming share-group source against a real broker: drain, failed rows, crash and restart,
two queries in one group."""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.xdist_group("spark")]

LOCK_MS = 15_000  # the broker accepts 15 s to 60 s
DELIVERY_LIMIT = 3


def _create(broker: Any, topic: str, partitions: int) -> None:
    from shareq.client import Admin

    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, partitions)


def _produce(broker: Any, topic: str, values: list[bytes], *, batch: int = 1000) -> None:
    """Produce in batches of ``batch`` records (a share group hands out whole batches)."""
    from shareq.client import Producer

    with Producer(broker.bootstrap) as producer:
        for i, value in enumerate(values):
            producer.send(topic, value, key=str(i).encode())
            if i % batch == batch - 1:
                producer.flush()
        producer.flush()


def _share_stream(spark: Any, broker: Any, topic: str, group: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("shareq")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("group.id", group)
        .option("startingOffsets", "earliest")
        .option("share.record.lock.duration.ms", str(LOCK_MS))
        .option("share.delivery.count.limit", str(DELIVERY_LIMIT))
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _holders(broker: Any, group: str) -> int:
    """How many members of the share group hold at least one partition."""
    from shareq.client import Admin

    with Admin(broker.bootstrap) as admin:
        return sum(1 for m in admin.describe_share_group(group).members if any(m.assignment.values()))


def _drained(broker: Any, topic: str, group: str) -> dict[int, tuple[int, int]]:
    """Partitions whose share-partition start offset is still behind the log end: (SPSO, end).

    Empty when every record was acknowledged or archived: nothing is left to deliver."""
    from shareq.client import Admin

    with Admin(broker.bootstrap) as admin:
        ends = admin.list_offsets(topic)
        starts = admin.describe_share_group_offsets(group, {topic: sorted(ends)})
        return {
            p: (starts[(topic, p)].start_offset, info.offset)
            for p, info in ends.items()
            if starts[(topic, p)].start_offset < info.offset
        }


def _assert_drained(broker: Any, topic: str, group: str) -> None:
    deadline = time.monotonic() + 20
    while (left := _drained(broker, topic, group)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == {}, f"records still deliverable (partition: (start offset, end)): {left}"


def _wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def _parquet_offsets(spark: Any, path: Path) -> list[tuple[int, int]]:
    """(partition, offset) of every row a file sink has committed under ``path`` so far."""
    from pyspark.errors import AnalysisException

    if not path.exists() or not any(path.rglob("*.parquet")):
        return []
    try:
        rows = spark.read.parquet(str(path)).select("partition", "offset").collect()
    except AnalysisException:
        return []  # files written, but no batch committed to the sink's log yet
    return [(r.partition, r.offset) for r in rows]


@pytest.mark.timeout(240)
def test_available_now_drains_the_group_into_parquet(spark: Any, broker: Any, tmp_path: Path) -> None:
    _create(broker, "drain", 3)
    values = [f"order-{i}".encode() for i in range(600)]
    _produce(broker, "drain", values, batch=20)
    df = _share_stream(spark, broker, "drain", "g-drain", maxRecordsPerTrigger="250", minPartitions="6")
    query = (
        df.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    # The limit split the drain into micro-batches, and is a hard cap (a share group hands out
    # whole producer batches; what goes beyond the cap waits for the next micro-batch).
    assert len(sizes) >= 3 and max(sizes) <= 250, sizes

    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(bytes(r.value) for r in rows) == sorted(values)  # every record, once
    assert all(r.deliveryCount == 1 and r.topic == "drain" for r in rows)
    _assert_drained(broker, "drain", "g-drain")


@pytest.mark.timeout(240)
def test_failed_rows_are_rejected_or_archived_after_the_delivery_limit(
    spark: Any, broker: Any, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    from shareq.spark import acknowledge_failed

    _create(broker, "orders-in", 2)
    good = [json.dumps({"id": i, "amount": i * 10}).encode() for i in range(200)]
    malformed = [b"{not json", b"\xff\xfe", b"[]"]
    poison = [json.dumps({"id": -1, "poison": True}).encode()]
    _produce(broker, "orders-in", good[:100] + malformed + poison + good[100:])
    seen_poison = tmp_path / "poison-deliveries"
    seen_poison.mkdir()
    bootstrap = broker.bootstrap

    def process(batch: Any, batch_id: int) -> None:
        parsed = batch.withColumn("order", F.from_json(F.col("value").cast("string"), "id long, amount long"))
        ok = parsed.where(F.col("order.amount").isNotNull())
        bad = parsed.where(F.col("order.id").isNull())
        flaky = parsed.where(F.col("order.id") == -1)  # fails transiently every time: released
        ok.select("topic", "partition", "offset", "order.*").write.mode("overwrite").parquet(
            str(tmp_path / "good" / f"batch={batch_id}")
        )
        acknowledge_failed(bad, bootstrap_servers=bootstrap, group_id="g-orders", ack_type="reject")
        for r in flaky.select("deliveryCount").collect():
            (seen_poison / f"{batch_id}-{r.deliveryCount}").touch()
        acknowledge_failed(flaky, bootstrap_servers=bootstrap, group_id="g-orders", ack_type="release")

    query = (
        _share_stream(spark, broker, "orders-in", "g-orders")
        .writeStream.foreachBatch(process)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None

    written = spark.read.parquet(str(tmp_path / "good")).collect()
    assert sorted(r.id for r in written) == list(range(200))  # malformed rows never reach the sink
    # The released record came back until the delivery limit, then the broker archived it.
    counts = sorted(int(p.name.split("-")[1]) for p in seen_poison.iterdir())
    assert counts == list(range(1, DELIVERY_LIMIT + 1))
    _assert_drained(broker, "orders-in", "g-orders")


@pytest.mark.timeout(240)
def test_failed_rows_released_come_back_after_the_groups_backoff(
    spark: Any, broker: Any, tmp_path: Path
) -> None:
    """``failedRows=release``: a row marked failed (REJECT) is RELEASEd instead, so it comes back
    after the group's redelivery backoff (0.5 s, then 1 s) until the delivery limit archives it."""
    from shareq.spark import acknowledge_failed

    _create(broker, "retry-in", 1)
    _produce(broker, "retry-in", [b"ok-%d" % i for i in range(20)] + [b"flaky"], batch=5)
    seen = tmp_path / "flaky-deliveries"
    seen.mkdir()
    bootstrap = broker.bootstrap

    def process(batch: Any, batch_id: int) -> None:
        flaky = batch.where(batch.value.cast("string") == "flaky").select(
            "topic", "partition", "offset", "deliveryCount"
        )
        for r in flaky.collect():
            (seen / f"{r.deliveryCount}-{time.monotonic()}").touch()
        acknowledge_failed(flaky, bootstrap_servers=bootstrap, group_id="g-retry", ack_type="reject")

    df = _share_stream(
        spark,
        broker,
        "retry-in",
        "g-retry",
        failedRows="release",
        **{"shareq.redelivery.backoff.ms": "500", "shareq.redelivery.backoff.jitter": "0"},
    )
    query = (
        df.writeStream.foreachBatch(process)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        _wait_for(lambda: len(list(seen.iterdir())) >= DELIVERY_LIMIT, 120, "the flaky row's deliveries")
        _wait_for(lambda: not _drained(broker, "retry-in", "g-retry"), 60, "the flaky row archived")
    finally:
        query.stop()
    deliveries = sorted((int(p.name.split("-")[0]), float(p.name.split("-", 1)[1])) for p in seen.iterdir())
    assert [count for count, _ in deliveries] == list(range(1, DELIVERY_LIMIT + 1))  # released, not rejected
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(deliveries)]
    assert gaps[0] >= 0.5 and gaps[1] >= 1.0, gaps


_CRASHING_QUERY = textwrap.dedent(
    """
    import sys
    from shareq.spark.local import local_spark
    bootstrap, out, ckpt, lock_ms = sys.argv[1:5]
    spark = local_spark("shareq-crash")
    query = (
        spark.readStream.format("shareq")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "crash")
        .option("group.id", "g-crash")
        .option("startingOffsets", "earliest")
        .option("share.record.lock.duration.ms", lock_ms)
        .option("maxRecordsPerTrigger", "50")
        .load()
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", ckpt)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    query.awaitTermination()
    """
)


@pytest.mark.timeout(280)
def test_a_killed_query_restarted_from_its_checkpoint_loses_nothing(
    spark: Any, broker: Any, tmp_path: Path
) -> None:
    _create(broker, "crash", 3)
    values = [f"c{i}".encode() for i in range(1000)]
    _produce(broker, "crash", values, batch=50)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    script = tmp_path / "crashing_query.py"
    script.write_text(_CRASHING_QUERY)
    child = subprocess.Popen(
        [sys.executable, str(script), broker.bootstrap, str(out), str(ckpt), str(LOCK_MS)],
        env=dict(os.environ),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Kill it (driver, JVM and workers) once it has written something but not everything.
        _wait_for(lambda: len(_parquet_offsets(spark, out)) >= 100, 150, "the first query's output")
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
    assert len(set(_parquet_offsets(spark, out))) < len(values)

    query = (
        _share_stream(spark, broker, "crash", "g-crash", maxRecordsPerTrigger="400")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        # Records the dead query held come back when their locks lapse.
        _wait_for(lambda: len(set(_parquet_offsets(spark, out))) == len(values), 150, "every record")
    finally:
        query.stop()
    got = spark.read.parquet(str(out)).collect()
    assert {bytes(r.value) for r in got} == set(values)  # at least once: nothing lost


@pytest.mark.timeout(240)
def test_two_queries_in_one_share_group_split_the_work(spark: Any, broker: Any, tmp_path: Path) -> None:
    _create(broker, "split", 1)  # one partition, two consumers: only a share group can do this
    values = [f"s{i}".encode() for i in range(1500)]
    queries = []
    for name in ("a", "b"):
        queries.append(
            _share_stream(spark, broker, "split", "g-split", maxRecordsPerTrigger="100")
            .writeStream.format("parquet")
            .option("path", str(tmp_path / name))
            .option("checkpointLocation", str(tmp_path / f"ckpt-{name}"))
            .trigger(processingTime="300 milliseconds")
            .start()
        )
    try:
        _wait_for(lambda: all(q.lastProgress is not None for q in queries), 120, "both queries to run")
        # A member that joins second is assigned at its first heartbeat after the group's assignment
        # interval: produce once both hold the partition, or the first may drain it alone.
        _wait_for(lambda: _holders(broker, "g-split") == 2, 60, "both members to hold the partition")
        _produce(broker, "split", values, batch=50)

        def union() -> set[tuple[int, int]]:
            return set(_parquet_offsets(spark, tmp_path / "a")) | set(_parquet_offsets(spark, tmp_path / "b"))

        _wait_for(lambda: len(union()) == len(values), 150, "every record in one of the outputs")
    finally:
        for q in queries:
            q.stop()
    a = set(_parquet_offsets(spark, tmp_path / "a"))
    b = set(_parquet_offsets(spark, tmp_path / "b"))
    assert a and b  # both members got work
    assert len(a & b) <= len(values) // 10  # and mostly different records (overlap only on redelivery)


@pytest.mark.timeout(200)
def test_locks_are_renewed_through_a_micro_batch_slower_than_the_lock(spark: Any, broker: Any) -> None:
    import threading

    from shareq.client import ShareConsumer

    _create(broker, "slow", 1)
    _produce(broker, "slow", [f"w{i}".encode() for i in range(100)])
    slow_batch_started = threading.Event()
    seen: list[tuple[int, int]] = []

    def process(batch: Any, batch_id: int) -> None:
        rows = batch.select("offset", "deliveryCount").collect()
        seen.extend((r.offset, r.deliveryCount) for r in rows)
        if rows and not slow_batch_started.is_set():
            slow_batch_started.set()
            time.sleep(LOCK_MS / 1000 + 8)  # outlive the acquisition lock

    query = (
        _share_stream(spark, broker, "slow", "g-slow")
        .writeStream.foreachBatch(process)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        assert slow_batch_started.wait(120)
        # Another member of the group polls through the slow batch: renewed locks keep it out.
        with ShareConsumer(broker.bootstrap, "g-slow", topics=["slow"]) as rival:
            stolen: list[Any] = []
            deadline = time.monotonic() + LOCK_MS / 1000 + 5
            while time.monotonic() < deadline:
                stolen += rival.poll(1.0)
        _wait_for(lambda: _drained(broker, "slow", "g-slow") == {}, 60, "the slow batch's acknowledgement")
    finally:
        query.stop()
    assert stolen == []
    assert sorted(seen) == [(o, 1) for o in range(100)]


@pytest.mark.timeout(240)
def test_micro_batches_larger_than_kafkas_default_window_deliver_every_record_once(
    spark: Any, broker: Any, tmp_path: Path
) -> None:
    partitions, per_partition, trigger = 2, 9_000, 12_000
    _create(broker, "wide", partitions)
    values = [f"w-{i}".encode() for i in range(partitions * per_partition)]
    _produce(broker, "wide", values, batch=500)
    df = _share_stream(spark, broker, "wide", "g-wide", maxRecordsPerTrigger=str(trigger), minPartitions="4")
    query = (
        df.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    # Kafka's default window would cap a micro-batch at 2,000 records per partition (4,000 here).
    assert max(sizes) > partitions * 2_000, sizes
    assert max(sizes) < trigger + partitions * 500, sizes
    rows = spark.read.parquet(str(tmp_path / "out")).select("value", "deliveryCount").collect()
    assert sorted(bytes(r.value) for r in rows) == sorted(values)  # every record, once
    assert all(r.deliveryCount == 1 for r in rows)
    _assert_drained(broker, "wide", "g-wide")


def test_the_window_is_raised_for_max_records_per_trigger_and_capped_by_the_broker(
    broker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from shareq.spark.options import ShareSourceOptions
    from shareq.spark.stream import ShareDriver

    bound = int(broker.broker.config["group.share.max.partition.max.record.locks"])
    _create(broker, "window", 1)

    def driver_window(group: str, trigger: int, **extra: str) -> int | None:
        options = ShareSourceOptions.parse(
            {
                "kafka.bootstrap.servers": broker.bootstrap,
                "subscribe": "window",
                "group.id": group,
                "maxRecordsPerTrigger": str(trigger),
                **extra,
            }
        )
        driver = ShareDriver(options)
        try:
            return driver.window
        finally:
            driver.close()

    with caplog.at_level(logging.INFO, logger="shareq.spark.stream"):
        assert driver_window("g-window-fits", 7_000) == 7_000
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        # Above the broker's bound: the source takes the bound, says so, and carries on.
        assert driver_window("g-window-capped", 5 * bound) == bound
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("g-window-capped" in w and str(bound) in w for w in warnings), warnings
    # A window the query sets itself is left alone.
    assert driver_window("g-window-own", 9_000, **{"share.partition.max.record.locks": "3000"}) == 3_000
