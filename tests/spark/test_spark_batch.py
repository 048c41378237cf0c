"""Batch source and both sinks round-trip data through a real broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.xdist_group("spark")]


def _create(broker: Any, topic: str, partitions: int) -> None:
    from shareq.client import Admin

    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, partitions)


def _consume_all(broker: Any, topic: str, partitions: int) -> list[Any]:
    from shareq.client import Consumer

    out: list[Any] = []
    with Consumer(broker.bootstrap) as consumer:
        for p in range(partitions):
            end = consumer.offsets(topic, -1, [p])[p].offset
            offset = 0
            while offset < end:
                result = consumer.fetch(topic, p, offset)
                out.extend(result.records)
                offset = result.next_offset
    return out


@pytest.mark.timeout(180)
def test_batch_write_then_batch_read_round_trips(spark: Any, broker: Any) -> None:
    _create(broker, "numbers", 3)
    rows = [(f"k{i}".encode(), f"v{i}".encode(), i % 3, [("h", str(i).encode())]) for i in range(300)]
    df = spark.createDataFrame(
        rows, "key binary, value binary, partition int, headers array<struct<key:string,value:binary>>"
    )
    (
        df.repartition(4)
        .write.format("shareq")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", "numbers")
        .mode("append")
        .save()
    )

    read = (
        spark.read.format("shareq")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "numbers")
        .option("includeHeaders", "true")
        .option("minPartitions", "6")
        .load()
    )
    assert read.rdd.getNumPartitions() >= 6  # more tasks than the topic's 3 partitions
    got = read.collect()
    assert len(got) == 300
    by_value = {bytes(r.value): r for r in got}
    for i in range(300):
        r = by_value[f"v{i}".encode()]
        assert bytes(r.key) == f"k{i}".encode()
        assert r.partition == i % 3 and r.topic == "numbers"
        assert [(h.key, bytes(h.value)) for h in r.headers] == [("h", str(i).encode())]
        assert r.deliveryCount is None and r.timestamp is not None
    offsets = {(r.partition, r.offset) for r in got}
    assert offsets == {(p, o) for p in range(3) for o in range(100)}

    # Offset ranges, Spark-Kafka style: [start, end) per partition, JSON (naming every partition,
    # -2 earliest, -1 latest) or earliest/latest.
    ranged = (
        spark.read.format("shareq")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "numbers")
        .option("startingOffsets", json.dumps({"numbers": {"0": 10, "1": 95, "2": -2}}))
        .option("endingOffsets", json.dumps({"numbers": {"0": 20, "1": -1, "2": 0}}))
        .load()
        .select("partition", "offset")
        .collect()
    )
    assert sorted((r.partition, r.offset) for r in ranged) == [(0, o) for o in range(10, 20)] + [
        (1, o) for o in range(95, 100)
    ]


@pytest.mark.timeout(180)
def test_stream_write_with_topic_column(spark: Any, broker: Any, tmp_path: Path) -> None:
    _create(broker, "out-a", 2)
    _create(broker, "out-b", 1)
    source = tmp_path / "in"
    source.mkdir()
    (source / "part.json").write_text(
        "\n".join(
            json.dumps({"topic": "out-a" if i % 2 else "out-b", "key": f"k{i}", "value": f"v{i}"})
            for i in range(50)
        )
    )
    query = (
        spark.readStream.schema("topic string, key string, value string")
        .json(str(source))
        .writeStream.format("shareq")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    a = _consume_all(broker, "out-a", 2)
    b = _consume_all(broker, "out-b", 1)
    assert sorted(r.value for r in a) == sorted(f"v{i}".encode() for i in range(50) if i % 2)
    assert sorted(r.value for r in b) == sorted(f"v{i}".encode() for i in range(50) if not i % 2)
    # The default partitioner hashes keys: one key always lands in one partition.
    assert all(r.key == r.value.replace(b"v", b"k") for r in a + b)
