"""Retention deleting records a share group has not finished with: the SPSO follows the log start.

Records below the new log start can never be delivered again. The share-partition archives them
(the ones a consumer still holds included; acknowledging those is INVALID_RECORD_STATE), persists
the new start offset and carries on from the log start without OFFSET_OUT_OF_RANGE.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from shareq.client import (
    Admin,
    ConfigResource,
    ConsumerRecord,
    OffsetSpec,
    Producer,
    ResourceType,
    ShareConsumer,
)
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

CONFIG = {
    "share.coordinator.state.topic.num.partitions": "3",
    "group.share.auto.offset.reset": "earliest",
    "log.retention.check.interval.ms": "100",
    "log.segment.bytes": "1024",  # a topic's segment.bytes is at least 1 MiB, as in Kafka
}
TOTAL = 30


def _spso(admin: Admin) -> int:
    return admin.describe_share_group_offsets("g")[("aging", 0)].start_offset


def test_retention_past_the_spso_moves_it_and_consumption_carries_on(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d", CONFIG) as broker, Admin(broker.bootstrap) as admin:
        admin.create_topic("aging", 1)
        producer = Producer(broker.bootstrap)
        try:
            for i in range(TOTAL):  # one batch per record, a few batches per segment
                producer.send("aging", b"%03d" % i + b"x" * 200, partition=0)
                producer.flush()
        finally:
            producer.close()

        consumer = ShareConsumer(broker.bootstrap, "g", topics=["aging"], max_poll_records=5)
        try:
            held: list[ConsumerRecord] = []
            deadline = time.monotonic() + 20
            while len(held) < 5:
                assert time.monotonic() < deadline, f"only {len(held)} records arrived"
                held += consumer.poll(0.5, max_records=5 - len(held))
            assert [r.offset for r in held] == [0, 1, 2, 3, 4]
            for record in held[:3]:
                consumer.acknowledge(record)
            assert consumer.commit() == {("aging", 0): ErrorCode.none}
            assert _spso(admin) == 3, "offsets 3 and 4 are still acquired"

            # Retention now deletes every segment but the active one, records 3 and 4 included.
            admin.alter_configs(ConfigResource(ResourceType.TOPIC, "aging"), {"retention.ms": "1"})
            deadline = time.monotonic() + 10
            log_start = 0
            while log_start == 0:
                assert time.monotonic() < deadline, "retention never ran"
                log_start = admin.list_offsets("aging", spec=OffsetSpec.EARLIEST)[0].offset
                time.sleep(0.05)
            assert 5 < log_start < TOTAL
            # The retention sweep moves the SPSO without waiting for a fetch.
            while _spso(admin) != log_start:
                assert time.monotonic() < deadline, f"SPSO stuck at {_spso(admin)}, log start {log_start}"
                time.sleep(0.05)
            assert admin.describe_share_group_offsets("g")[("aging", 0)].lag == TOTAL - log_start

            # The holder of 3 and 4 learns they are gone.
            consumer.acknowledge(held[3])
            assert consumer.commit() == {("aging", 0): ErrorCode.invalid_record_state}

            rest: list[ConsumerRecord] = []
            while len(rest) < TOTAL - log_start:
                assert time.monotonic() < deadline + 10, f"only {len(rest)} later records arrived"
                for record in consumer.poll(0.5):
                    if record.offset >= log_start:  # not one acquired before the move and still buffered
                        consumer.acknowledge(record)
                        rest.append(record)
            assert [r.offset for r in rest] == list(range(log_start, TOTAL))
            assert {r.delivery_count for r in rest} == {1}
            assert all(code == ErrorCode.none for code in consumer.commit().values())
        finally:
            consumer.close()
        offsets = admin.describe_share_group_offsets("g")[("aging", 0)]
        assert (offsets.start_offset, offsets.lag) == (TOTAL, 0)


def test_log_start_moved_without_retention_is_found_by_the_next_fetch(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d", CONFIG) as broker, Admin(broker.bootstrap) as admin:
        admin.create_topic("aging", 1)
        producer = Producer(broker.bootstrap)
        try:
            for i in range(10):
                producer.send("aging", b"%d" % i, partition=0)
                producer.flush()
        finally:
            producer.close()
        consumer = ShareConsumer(broker.bootstrap, "g", topics=["aging"], max_poll_records=2)
        try:
            first: list[ConsumerRecord] = []
            deadline = time.monotonic() + 20
            while len(first) < 2:
                assert time.monotonic() < deadline
                first += consumer.poll(0.5, max_records=2 - len(first))
            for record in first:
                consumer.acknowledge(record)
            consumer.commit()
            assert _spso(admin) == 2
            # DeleteRecords-style move inside a segment: nothing tells the share-partition.
            partition = broker.broker.partition("aging", 0)
            assert partition is not None
            broker.call(partition.log.advance_log_start, 6)
            rest: list[ConsumerRecord] = []
            while len(rest) < 4:
                assert time.monotonic() < deadline, f"only {len(rest)} records arrived"
                for record in consumer.poll(0.5):
                    consumer.acknowledge(record)
                    rest.append(record)
            assert [r.offset for r in rest] == [6, 7, 8, 9]
            assert all(code == ErrorCode.none for code in consumer.commit().values())
        finally:
            consumer.close()
        assert _spso(admin) == 10
