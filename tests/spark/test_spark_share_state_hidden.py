"""The Spark batch source on a topic whose partitions carry share-state control batches (the in-log
persister's SHARE_CHECKPOINT / SHARE_DELTA): it reads exactly the user records."""

from __future__ import annotations

import time
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.xdist_group("spark")]

TOPIC = "with-share-state"


def _append_share_state(broker: Any, partition: int, count: int) -> None:
    from shareq.log.records import CONTROL_TYPE_SHARE_DELTA, encode_share_control_batch

    def append() -> None:
        target = broker.broker.partition(TOPIC, partition)
        now = int(time.time() * 1000)
        for i in range(count):
            target.log.append(encode_share_control_batch(CONTROL_TYPE_SHARE_DELTA, b"%06d" % i), now_ms=now)

    broker.call(append)


@pytest.mark.timeout(180)
def test_batch_read_skips_share_state(spark: Any, broker: Any) -> None:
    from shareq.client import Admin, Producer

    with Admin(broker.bootstrap) as admin:
        admin.create_topic(TOPIC, 2)
    producer = Producer(broker.bootstrap)
    expected: set[tuple[int, bytes]] = set()
    try:
        for chunk in range(5):
            for p in range(2):
                _append_share_state(broker, p, 300)  # a run longer than one fetch, then records
                for i in range(10):
                    value = b"p%d-%d-%d" % (p, chunk, i)
                    producer.send(TOPIC, value, partition=p)
                    expected.add((p, value))
                producer.flush()
        for p in range(2):
            _append_share_state(broker, p, 300)  # and share state at the end
    finally:
        producer.close()

    rows = (
        spark.read.format("shareq")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", TOPIC)
        .load()
        .select("partition", "offset", "value")
        .collect()
    )
    assert len(rows) == len(expected)
    assert {(r.partition, bytes(r.value)) for r in rows} == expected
    assert all(r.offset % 310 >= 300 for r in rows)  # the offsets the records were given
