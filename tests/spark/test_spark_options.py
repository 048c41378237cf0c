"""Spark Kafka options on the shareq sources and sink mean what they mean in Spark's connector
(timestamps through ListOffsets, assign, subscribePattern, failOnDataLoss, kafka.* settings, a hard
maxRecordsPerTrigger), and an option a source or sink would not honour is refused by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.xdist_group("spark")]

BASE_MS = 1_700_000_000_000
PER_PARTITION = 100


def _create(broker: Any, topic: str, partitions: int) -> None:
    from shareq.client import Admin

    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, partitions)


def _produce_stamped(broker: Any, topic: str, partitions: int) -> None:
    """Record i of each partition has timestamp BASE_MS + i seconds (and offset i)."""
    from shareq.client import Producer

    with Producer(broker.bootstrap) as producer:
        for p in range(partitions):
            for i in range(PER_PARTITION):
                producer.send(topic, f"{p}-{i}".encode(), partition=p, timestamp_ms=BASE_MS + i * 1000)
        producer.flush()


def _read(spark: Any, broker: Any, **options: str) -> Any:
    reader = spark.read.format("shareq").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _offsets(df: Any) -> set[tuple[str, int, int]]:
    return {(r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect()}


def _span(topic: str, partition: int, first: int, end: int) -> set[tuple[str, int, int]]:
    return {(topic, partition, o) for o in range(first, end)}


@pytest.fixture(scope="module")
def stamped(broker: Any) -> str:
    _create(broker, "stamped", 2)
    _produce_stamped(broker, "stamped", 2)
    return "stamped"


@pytest.mark.timeout(240)
def test_timestamps_resolve_to_offsets_with_sparks_precedence(spark: Any, broker: Any, stamped: str) -> None:
    t = stamped
    at = {i: str(BASE_MS + i * 1000) for i in (10, 20, 30, 50, 90)}
    # startingTimestamp: every partition from the first record at or after it.
    got = _offsets(_read(spark, broker, subscribe=t, startingTimestamp=at[50]))
    assert got == _span(t, 0, 50, 100) | _span(t, 1, 50, 100)
    # endingTimestamp is exclusive: records before it.
    got = _offsets(_read(spark, broker, subscribe=t, endingTimestamp=at[20]))
    assert got == _span(t, 0, 0, 20) | _span(t, 1, 0, 20)
    # Per partition; a partition with no record that late ends at the log end.
    got = _offsets(
        _read(
            spark,
            broker,
            subscribe=t,
            startingOffsetsByTimestamp=json.dumps({t: {"0": int(at[10]), "1": int(at[90])}}),
            endingOffsetsByTimestamp=json.dumps({t: {"0": int(at[30]), "1": BASE_MS * 2}}),
        )
    )
    assert got == _span(t, 0, 10, 30) | _span(t, 1, 90, 100)
    # A timestamp for all partitions beats one per partition, which beats offsets.
    got = _offsets(
        _read(
            spark,
            broker,
            subscribe=t,
            startingTimestamp=at[90],
            startingOffsetsByTimestamp=json.dumps({t: {"0": BASE_MS, "1": BASE_MS}}),
            startingOffsets=json.dumps({t: {"0": 0, "1": 0}}),
        )
    )
    assert got == _span(t, 0, 90, 100) | _span(t, 1, 90, 100)
    got = _offsets(
        _read(
            spark,
            broker,
            subscribe=t,
            startingOffsetsByTimestamp=json.dumps({t: {"0": int(at[90]), "1": int(at[90])}}),
            startingOffsets="earliest",
        )
    )
    assert got == _span(t, 0, 90, 100) | _span(t, 1, 90, 100)


@pytest.mark.timeout(240)
def test_a_starting_timestamp_past_every_record_follows_the_strategy(
    spark: Any, broker: Any, stamped: str
) -> None:
    late = str(BASE_MS * 2)
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):
        _read(spark, broker, subscribe=stamped, startingTimestamp=late).collect()
    read = _read(
        spark, broker, subscribe=stamped, startingTimestamp=late, startingOffsetsByTimestampStrategy="latest"
    )
    assert read.count() == 0
    # Per-partition timestamps must name every partition read, as in Spark.
    with pytest.raises(Exception, match="must name every partition"):
        _read(
            spark, broker, subscribe=stamped, startingOffsetsByTimestamp=json.dumps({stamped: {"0": BASE_MS}})
        ).collect()


@pytest.mark.timeout(240)
def test_assign_and_subscribe_pattern_pick_partitions_and_topics(spark: Any, broker: Any) -> None:
    from shareq.client import Producer

    for topic, partitions in (("pat-a", 2), ("pat-b", 1), ("other-a", 1)):
        _create(broker, topic, partitions)
    with Producer(broker.bootstrap) as producer:
        for topic, partitions in (("pat-a", 2), ("pat-b", 1), ("other-a", 1)):
            for p in range(partitions):
                for _ in range(5):
                    producer.send(topic, b"v", partition=p)
        producer.flush()
    got = _offsets(_read(spark, broker, assign=json.dumps({"pat-a": [1], "pat-b": [0]})))
    assert got == _span("pat-a", 1, 0, 5) | _span("pat-b", 0, 0, 5)
    got = _offsets(_read(spark, broker, subscribePattern="pat-.*"))
    assert got == _span("pat-a", 0, 0, 5) | _span("pat-a", 1, 0, 5) | _span("pat-b", 0, 0, 5)
    with pytest.raises(Exception, match="exactly one of"):
        _read(spark, broker, subscribe="pat-a", assign=json.dumps({"pat-a": [0]})).collect()
    with pytest.raises(Exception, match="do not exist"):
        _read(spark, broker, assign=json.dumps({"pat-b": [3]})).collect()


@pytest.mark.timeout(240)
def test_fail_on_data_loss_fails_or_reads_from_the_log_start(spark: Any, broker: Any) -> None:
    from shareq.client import Admin, Producer

    _create(broker, "lossy", 1)
    with Producer(broker.bootstrap) as producer:
        for i in range(50):
            producer.send("lossy", str(i).encode(), partition=0)
        producer.flush()
    with Admin(broker.bootstrap) as admin:
        admin.delete_records("lossy", {0: 20})
    starting = json.dumps({"lossy": {"0": 5}})
    with pytest.raises(Exception, match="no longer in the log"):
        _read(spark, broker, subscribe="lossy", startingOffsets=starting).collect()
    got = _offsets(_read(spark, broker, subscribe="lossy", startingOffsets=starting, failOnDataLoss="false"))
    assert got == _span("lossy", 0, 20, 50)


@pytest.mark.timeout(240)
def test_options_the_connector_would_not_honour_are_refused_by_name(
    spark: Any, broker: Any, stamped: str, tmp_path: Path
) -> None:
    # A misspelt option fails at load(), before any read.
    with pytest.raises(Exception, match=r"(?i)unknown option 'startingOffset'"):
        _read(spark, broker, subscribe=stamped, startingOffset="earliest")
    with pytest.raises(Exception, match=r"'auto\.offset\.reset' is not supported"):
        _read(spark, broker, subscribe=stamped, **{"kafka.auto.offset.reset": "earliest"})
    with pytest.raises(Exception, match=r"'kafka\.ssl\.truststore\.location' is not supported"):
        _read(spark, broker, subscribe=stamped, **{"kafka.ssl.truststore.location": "/x.jks"})
    with pytest.raises(Exception, match="can't be 'latest' for a batch query"):
        _read(spark, broker, subscribe=stamped, startingOffsets="latest").collect()
    # Settings the client honours pass through.
    assert _read(spark, broker, subscribe=stamped, **{"kafka.client.id": "options-test"}).count() == 200

    def stream() -> Any:
        return (
            spark.readStream.format("shareq")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", stamped)
            .option("group.id", "g-refused")
        )

    for name, value, reason in (
        ("endingOffsets", "latest", "has no end"),
        ("startingTimestamp", str(BASE_MS), "'earliest' or 'latest'"),
        ("maxOffsetsPerTrigger", "10", "use 'maxRecordsPerTrigger'"),
    ):
        with pytest.raises(Exception, match=reason):
            query = (
                stream()
                .option(name, value)
                .load()
                .writeStream.format("memory")
                .queryName(f"refused_{name}")
                .option("checkpointLocation", str(tmp_path / name))
                .start()
            )
            try:
                query.awaitTermination(60)
                raise AssertionError(query.exception() or "the query ran")
            finally:
                query.stop()

    df = spark.createDataFrame([(b"v",)], "value binary")

    def writer() -> Any:
        return (
            df.write.format("shareq")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", "sunk")
        )

    with pytest.raises(Exception, match=r"'kafka\.compression\.type' is not supported"):
        writer().option("kafka.compression.type", "lz4").mode("append").save()
    _create(broker, "sunk", 1)
    writer().option("kafka.acks", "all").option("kafka.linger.ms", "5").mode("append").save()
    assert _read(spark, broker, subscribe="sunk").count() == 1


@pytest.mark.timeout(300)
def test_max_records_per_trigger_is_a_hard_cap_with_whole_batches(
    spark: Any, broker: Any, tmp_path: Path
) -> None:
    from shareq.client import Producer

    _create(broker, "capped", 2)
    with Producer(broker.bootstrap) as producer:
        for i in range(3000):
            producer.send("capped", str(i).encode(), partition=i % 2)
            if i % 1000 == 999:
                producer.flush()  # batches of 500 records per partition, beyond the cap below
        producer.flush()
    query = (
        spark.readStream.format("shareq")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "capped")
        .option("group.id", "g-capped")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", "300")
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(240)
    assert query.exception() is None
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes and max(sizes) <= 300 and len(sizes) >= 10, sizes
    rows = spark.read.parquet(str(tmp_path / "out")).select("value", "deliveryCount").collect()
    assert sorted(int(r.value) for r in rows) == list(range(3000))  # every record, once
    assert {r.deliveryCount for r in rows} == {1}  # held back, not released and redelivered


def test_a_broker_feature_the_query_needs_is_named_at_start(spark: Any, broker: Any, tmp_path: Path) -> None:
    """exactlyOnce against a broker that does not serve transactional acknowledgements (this module's
    broker leaves share.transactional.acks.enable off): the source and the sink refuse as the query
    starts, naming the setting, before anything is acquired or written."""
    _create(broker, "needs-kip-1289", 1)

    def source(exactly_once: bool) -> Any:
        return (
            spark.readStream.format("shareq")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "needs-kip-1289")
            .option("group.id", "g-needs-kip-1289")
            .option("exactlyOnce", str(exactly_once).lower())
            .load()
        )

    def start(df: Any, sink: str, name: str) -> None:
        writer = (
            df.select("value").writeStream.format(sink).option("checkpointLocation", str(tmp_path / name))
        )
        if sink == "shareq":
            writer = (
                writer.option("kafka.bootstrap.servers", broker.bootstrap)
                .option("topic", "needs-kip-1289")
                .option("exactlyOnce", "true")
            )
        query = writer.start()
        try:
            query.awaitTermination(60)
            raise AssertionError(query.exception() or "the query ran")
        finally:
            query.stop()

    words = r"the broker does not serve transactional acknowledgements \(KIP-1289"
    words += r".*share\.transactional\.acks\.enable=true"
    with pytest.raises(Exception, match=r"the shareq sink has exactlyOnce set, but " + words):
        start(source(False), "shareq", "sink")
    with pytest.raises(
        Exception, match=r"the shareq source reads share group g-needs-kip-1289, but " + words
    ):
        start(source(True), "noop", "source")
