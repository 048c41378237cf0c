"""Fetch byte limits and offset errors (via kio), and the periodic retention sweep."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.list_offsets.v7 import request as list_v7
from kio_wire import KioConnection

from shareq.embedded import EmbeddedBroker
from shareq.log import iter_batches
from shareq.log.records import Record, encode_batch

pytestmark = [pytest.mark.integration]


def fetch(
    connection: KioConnection, offset: int, partition_max: int, max_bytes: int, wait_ms: int = 0
) -> object:
    request = fetch_v12.FetchRequest(
        cluster_id=None,
        max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=1,
        max_bytes=max_bytes,
        topics=(
            fetch_v12.FetchTopic(
                topic="f",
                partitions=(
                    fetch_v12.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=partition_max
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    return connection.send(request).responses[0].partitions[0]


@pytest.mark.timeout(30)
def test_fetch_limits_out_of_range_and_empty_long_poll(embedded_broker: EmbeddedBroker) -> None:
    partition = embedded_broker.call(embedded_broker.broker.create_topic, "f", 1)
    assert partition.partitions == 1
    log = embedded_broker.broker.partition("f", 0)
    assert log is not None
    batch = encode_batch([Record(value=b"x" * 1000)])
    for _ in range(10):
        embedded_broker.call(lambda: log.log.append(batch, now_ms=int(time.time() * 1000)))
    connection = KioConnection(embedded_broker.bootstrap)
    try:
        two = fetch(connection, 0, partition_max=2 * len(batch) + 10, max_bytes=10**6)
        assert two.error_code == ErrorCode.none and two.high_watermark == 10 and two.log_start_offset == 0
        # up to the limit, as Kafka answers: two whole batches and 10 bytes of the third
        assert len(two.records) == 2 * len(batch) + 10
        assert [h.base_offset for _, h in iter_batches(two.records[: 2 * len(batch)])] == [0, 1]
        assert two.records[2 * len(batch) : 2 * len(batch) + 8] == (2).to_bytes(8, "big")
        one = fetch(connection, 3, partition_max=10**6, max_bytes=1)  # at least one whole batch
        assert [h.base_offset for _, h in iter_batches(one.records)] == [3]
        beyond = fetch(connection, 11, partition_max=10**6, max_bytes=10**6)
        assert beyond.error_code == ErrorCode.offset_out_of_range
        started = time.monotonic()
        at_end = fetch(connection, 10, partition_max=10**6, max_bytes=10**6, wait_ms=300)
        waited = time.monotonic() - started
        assert at_end.error_code == ErrorCode.none and at_end.records in (b"", None)
        assert 0.25 <= waited < 3.0, waited
    finally:
        connection.close()


@pytest.mark.timeout(30)
def test_retention_sweep_runs_on_its_timer(tmp_path: Path) -> None:
    config = {
        "log.retention.check.interval.ms": "100",
        "log.retention.ms": "60000",
        "log.segment.bytes": "2000",
    }
    with EmbeddedBroker(tmp_path / "d", config) as broker:
        broker.call(broker.broker.create_topic, "old", 1)
        partition = broker.broker.partition("old", 0)
        assert partition is not None
        hour_ago = int(time.time() * 1000) - 3_600_000
        for i in range(10):
            batch = encode_batch([Record(value=b"y" * 500, timestamp=hour_ago)], base_timestamp=hour_ago)
            broker.call(lambda b=batch, t=hour_ago + i: partition.log.append(b, now_ms=t))
        connection = KioConnection(broker.bootstrap)
        request = list_v7.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=(
                list_v7.ListOffsetsTopic(
                    name="old", partitions=(list_v7.ListOffsetsPartition(partition_index=0, timestamp=-2),)
                ),
            ),
        )
        try:
            deadline = time.monotonic() + 10
            earliest = 0
            while earliest == 0 and time.monotonic() < deadline:
                earliest = connection.send(request).topics[0].partitions[0].offset
                time.sleep(0.05)
            assert earliest > 0, "the retention timer never removed the expired segments"
        finally:
            connection.close()
