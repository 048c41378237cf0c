"""Kafka 4.4's Java producer in a consume-transform-produce loop, against Kafka 4.4 and against shareq.

With transaction.version 2 finalized the Java client takes KIP-890 part 2's path: no AddPartitionsToTxn and no
AddOffsetsToTxn (Produce v12+ and TxnOffsetCommit v5 add the partitions), and EndTxn v5, which bumps the
producer epoch at every commit and abort. Kafka's ``TransactionalMessageCopier`` drives it (with random
aborts, each rewinding the consumer), and the observations are the ones a user has: what a read_committed
consumer sees, the group's committed offset, and the producer's epoch as ``kafka-transactions`` describes it.
"""

from __future__ import annotations

import re
import time

import pytest
from compat_support import FAST, Server, create_topic, produce
from confluent_kafka import Consumer, TopicPartition
from test_compat_tools import TOOLS, ok, tool

import kafka_harness

pytestmark = pytest.mark.timeout(180)

COUNT = 40


def _read_committed(server: Server, topic: str, count: int) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": "unused",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            **FAST,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[str] = []
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            for message in consumer.consume(100, timeout=0.2):
                if message.error() is None:
                    values.append(message.value().decode())
        # anything past ``count`` would be a duplicate: read a little longer to see it
        values += [m.value().decode() for m in consumer.consume(100, timeout=1.0) if m.error() is None]
        return values
    finally:
        consumer.close()


def _committed(server: Server, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, **FAST})
    try:
        return int(consumer.committed([TopicPartition(topic, 0)], timeout=15)[0].offset)
    finally:
        consumer.close()


def _describe(server: Server, transactional_id: str) -> dict[str, str]:
    out = ok(tool(server, "TransactionsCommand", "describe", "--transactional-id", transactional_id))
    header, row = (re.split(r"\s{2,}|\t", line.strip()) for line in out.strip().splitlines()[-2:])
    return dict(zip(header, row, strict=False))


def test_java_producer_copies_exactly_once_with_epoch_bumps(server: Server, names: tuple[str, str]) -> None:
    """Every input record lands once in the output as read_committed sees it, aborted attempts included;
    the group's offset is committed with the transactions; every EndTxn bumped the producer's epoch (TV1
    keeps epoch 0 for the producer's whole life)."""
    source, group = names
    sink = source + "-out"
    txn_id = "copier-" + source
    create_topic(server, source)
    create_topic(server, sink)
    values = [f"v{i}" for i in range(COUNT)]
    produce(server, source, [v.encode() for v in values])
    out = ok(
        kafka_harness.run_tool(
            TOOLS + "TransactionalMessageCopier",
            *("--broker-list", server.bootstrap),
            *("--input-topic", source, "--input-partition", "0", "--output-topic", sink),
            *("--transactional-id", txn_id, "--consumer-group", group),
            *("--max-messages", str(COUNT), "--transaction-size", "10", "--enable-random-aborts"),
            timeout=120,
        )
    )
    assert '"remaining":0' in out.replace(" ", ""), out[-2000:]
    assert _read_committed(server, sink, COUNT) == values
    assert _committed(server, group, source) == COUNT
    described = _describe(server, txn_id)
    assert described["TransactionState"] == "CompleteCommit", described
    assert int(described["ProducerEpoch"]) >= COUNT // 10, described
