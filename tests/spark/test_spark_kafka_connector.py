"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10) against shareq, each read
compared with shareq's batch source on the same topic: a team's existing Spark jobs run on shareq
unchanged, and shareq's source gives what Spark's gives for the same options."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.xdist_group("spark"),
    pytest.mark.usefixtures("spark_kafka_connector"),
]

PER_PARTITION = 100
COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "timestampType")


def _create(broker: Any, topic: str, partitions: int) -> None:
    from shareq.client import Admin

    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, partitions)
        admin.cluster.wait_for_topic(topic, 10)


def _read(spark: Any, broker: Any, fmt: str, **options: str) -> Any:
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _rows(df: Any, *, headers: bool = False) -> list[tuple[Any, ...]]:
    columns = [*COLUMNS, "headers"] if headers else list(COLUMNS)
    out = []
    for r in df.select(*columns).collect():
        row = [bytes(v) if isinstance(v, bytearray) else v for v in r]
        if headers:
            row[-1] = tuple((h.key, None if h.value is None else bytes(h.value)) for h in r.headers or ())
        out.append(tuple(row))
    return sorted(out, key=lambda row: (row[0], row[1], row[2]))


def _same(spark: Any, broker: Any, *, headers: bool = False, **options: str) -> list[tuple[Any, ...]]:
    """The rows of Spark's connector and of shareq's batch source for the same options; asserts equal."""
    theirs = _rows(_read(spark, broker, "kafka", **options), headers=headers)
    ours = _rows(_read(spark, broker, "shareq", **options), headers=headers)
    assert ours == theirs
    return theirs


@pytest.fixture(scope="module")
def stamped(broker: Any) -> tuple[str, int]:
    """Two partitions; record i of each has offset i and timestamp base + i seconds (recent, so no
    retention deletes them)."""
    from shareq.client import Producer

    base = (int(time.time()) - 3600) * 1000
    _create(broker, "kstamped", 2)
    with Producer(broker.bootstrap) as producer:
        for p in range(2):
            for i in range(PER_PARTITION):
                key = None if i % 10 == 0 else f"k{i}".encode()
                producer.send(
                    "kstamped", f"{p}-{i}".encode(), key=key, partition=p, timestamp_ms=base + i * 1000
                )
        producer.flush()
    return "kstamped", base


@pytest.mark.timeout(300)
def test_batch_reads_by_offsets_and_timestamps_match_sparks_connector(
    spark: Any, broker: Any, stamped: tuple[str, int]
) -> None:
    t, base = stamped

    def at(i: int) -> int:
        return base + i * 1000

    assert len(_same(spark, broker, subscribe=t)) == 2 * PER_PARTITION
    assert len(_same(spark, broker, subscribe=t, startingOffsets="earliest", endingOffsets="latest")) == 200
    offsets = {t: {"0": 10, "1": -2}}
    ending = {t: {"0": 20, "1": -1}}
    assert (
        len(
            _same(
                spark,
                broker,
                subscribe=t,
                startingOffsets=json.dumps(offsets),
                endingOffsets=json.dumps(ending),
            )
        )
        == 10 + 100
    )
    assert len(_same(spark, broker, subscribe=t, startingTimestamp=str(at(50)))) == 100
    assert len(_same(spark, broker, subscribe=t, endingTimestamp=str(at(20)))) == 40
    by_ts = json.dumps({t: {"0": at(10), "1": at(90)}})
    end_ts = json.dumps({t: {"0": at(30), "1": base * 2}})
    assert (
        len(
            _same(
                spark, broker, subscribe=t, startingOffsetsByTimestamp=by_ts, endingOffsetsByTimestamp=end_ts
            )
        )
        == 30
    )
    # Precedence: a timestamp for all partitions, then per partition, then offsets.
    rows = _same(
        spark,
        broker,
        subscribe=t,
        startingTimestamp=str(at(90)),
        startingOffsetsByTimestamp=json.dumps({t: {"0": base, "1": base}}),
        startingOffsets="earliest",
    )
    assert len(rows) == 20
    late = str(base * 2)
    assert (
        _same(spark, broker, subscribe=t, startingTimestamp=late, startingOffsetsByTimestampStrategy="latest")
        == []
    )
    for fmt in ("kafka", "shareq"):  # no record that late, strategy "error": both fail
        with pytest.raises(Exception):  # noqa: B017 - each connector words it its own way
            _read(spark, broker, fmt, subscribe=t, startingTimestamp=late).collect()
    assert len(_same(spark, broker, subscribe=t, minPartitions="7")) == 200


@pytest.mark.timeout(300)
def test_assign_pattern_headers_and_nulls_match_sparks_connector(spark: Any, broker: Any) -> None:
    from shareq.client import Producer

    for topic, partitions in (("kpat-a", 2), ("kpat-b", 1), ("kother", 1)):
        _create(broker, topic, partitions)
    with Producer(broker.bootstrap) as producer:
        for topic, partitions in (("kpat-a", 2), ("kpat-b", 1), ("kother", 1)):
            for p in range(partitions):
                for i in range(6):
                    headers = [("h", None), ("h", b"twice"), ("e", b"")] if i % 2 else []
                    value = None if i == 3 else f"{topic}-{i}".encode()
                    producer.send(topic, value, key=None if i % 3 else b"k", headers=headers, partition=p)
        producer.flush()
    assert len(_same(spark, broker, assign=json.dumps({"kpat-a": [1], "kpat-b": [0]}))) == 12
    rows = _same(spark, broker, headers=True, subscribePattern="kpat-.*", includeHeaders="true")
    assert len(rows) == 18 and {r[0] for r in rows} == {"kpat-a", "kpat-b"}
    assert any(r[4] is None for r in rows) and any(r[3] is None for r in rows)
    assert any(r[-1] == (("h", None), ("h", b"twice"), ("e", b"")) for r in rows)


@pytest.mark.timeout(300)
def test_fail_on_data_loss_matches_sparks_connector(spark: Any, broker: Any) -> None:
    from shareq.client import Admin, Producer

    _create(broker, "klossy", 1)
    with Producer(broker.bootstrap) as producer:
        for i in range(50):
            producer.send("klossy", str(i).encode(), partition=0)
        producer.flush()
    with Admin(broker.bootstrap) as admin:
        admin.delete_records("klossy", {0: 20})
    starting = json.dumps({"klossy": {"0": 5}})
    rows = _same(spark, broker, subscribe="klossy", startingOffsets=starting, failOnDataLoss="false")
    assert [r[2] for r in rows] == list(range(20, 50))
    for fmt in ("kafka", "shareq"):
        with pytest.raises(Exception):  # noqa: B017 - each connector words it its own way
            _read(spark, broker, fmt, subscribe="klossy", startingOffsets=starting).collect()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_sparks_connector_writes_every_codec_that_shareq_reads_back(
    spark: Any, broker: Any, codec: str
) -> None:
    topic = f"kwrite-{codec}"
    _create(broker, topic, 2)
    rows = [
        (f"k{i}".encode() if i % 4 else None, f"v{i}".encode(), [("n", str(i).encode())]) for i in range(500)
    ]
    df = spark.createDataFrame(
        rows, "key binary, value binary, headers array<struct<key:string,value:binary>>"
    )
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("kafka.compression.type", codec)
        .option("topic", topic)
        .option("includeHeaders", "true")
        .save()
    )
    got = _same(spark, broker, headers=True, subscribe=topic, includeHeaders="true")
    assert sorted(r[4] for r in got) == sorted(v for _, v, _ in rows)
    assert all(r[-1] == (("n", r[4][1:]),) for r in got)


@pytest.mark.timeout(420)
def test_sparks_streaming_read_stops_and_restarts_from_its_checkpoint(
    spark: Any, broker: Any, tmp_path: Path
) -> None:
    from shareq.client import Producer

    topic = "kstream"
    _create(broker, topic, 3)

    def produce(first: int, n: int) -> None:
        with Producer(broker.bootstrap) as producer:
            for i in range(first, first + n):
                producer.send(topic, str(i).encode(), key=str(i).encode())
            producer.flush()

    def run_once() -> None:
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "700")
            .load()
            .select("topic", "partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(240)
        assert query.exception() is None

    produce(0, 2000)
    run_once()
    produce(2000, 1500)  # while stopped
    run_once()  # restarted from the checkpoint
    produce(3500, 500)
    run_once()
    out = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(int(r.value) for r in out) == list(range(4000))  # none lost, none twice
    ours = {(r[0], r[1], r[2]) for r in _rows(_read(spark, broker, "shareq", subscribe=topic))}
    assert {(r.topic, r.partition, r.offset) for r in out} == ours


@pytest.mark.timeout(300)
@pytest.mark.parametrize("option", ["startingOffsets", "endingOffsets"])
def test_offsets_json_naming_some_partitions_is_refused_as_by_sparks_connector(
    spark: Any, broker: Any, stamped: tuple[str, int], option: str
) -> None:
    """Spark's connector wants every partition of a subscribed topic in the JSON (-2 earliest,
    -1 latest); leaving one out fails the query rather than reading it from a default."""
    t, _base = stamped
    partial = json.dumps({t: {"0": 10}})
    for fmt in ("kafka", "shareq"):
        with pytest.raises(Exception, match="-1 for latest, -2 for earliest"):
            _read(spark, broker, fmt, subscribe=t, **{option: partial}).collect()
