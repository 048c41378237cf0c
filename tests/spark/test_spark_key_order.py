"""The Spark share-group source on a key-ordered group (``shareq.share.ordering=key``): across
micro-batches a key's records come in offset order, a key's next records only in a micro-batch
after the one that held its earlier ones (which the source acknowledged first), and a released
record comes back before the later records of its key."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.xdist_group("spark")]


@pytest.mark.timeout(240)
def test_a_keys_records_come_in_order_across_micro_batches(spark: Any, broker: Any) -> None:
    from shareq.client import Admin, ConfigResource, Producer, ResourceType

    topic, group = "keyed", "g-keyed"
    keys = [b"k%d" % (i % 5) for i in range(200)]
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, 1)
        admin.alter_configs(ConfigResource(ResourceType.GROUP, group), {"shareq.share.ordering": "key"})
    with Producer(broker.bootstrap) as producer:
        for i, key in enumerate(keys):
            producer.send(topic, b"v%d" % i, key=key, partition=0)
            if i % 7 == 6:
                producer.flush()  # small producer batches: micro-batches end inside a key's run
        producer.flush()
    seen: list[tuple[int, bytes, int]] = []  # (micro-batch, key, offset) of every record accepted
    released: list[int] = []
    bootstrap = broker.bootstrap

    def process(frame: Any, batch_id: int) -> None:
        from shareq.spark import acknowledge_failed

        rows = frame.select("topic", "partition", "offset", "deliveryCount", "key").collect()
        # a first delivery at an offset divisible by 40 fails: it and the later records of its key
        # in this micro-batch are released, as a key-ordered pipeline does
        failing = {bytes(r.key) for r in rows if r.offset % 40 == 0 and r.deliveryCount == 1}
        first_failed = {
            k: min(r.offset for r in rows if bytes(r.key) == k and r.offset % 40 == 0) for k in failing
        }
        back = [r for r in rows if bytes(r.key) in failing and r.offset >= first_failed[bytes(r.key)]]
        acknowledge_failed(
            [tuple(r)[:4] for r in back], bootstrap_servers=bootstrap, group_id=group, ack_type="release"
        )
        released.extend(r.offset for r in back)
        gone = {r.offset for r in back}
        seen.extend((batch_id, bytes(r.key), r.offset) for r in rows if r.offset not in gone)

    query = (
        spark.readStream.format("shareq")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("group.id", group)
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", "23")
        .load()
        .writeStream.foreachBatch(process)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None
    assert released, "no record was released"
    assert sorted(o for _, _, o in seen) == list(range(200))  # every record accepted, once
    batches = {b for b, _, _ in seen}
    assert len(batches) >= 5
    for key in set(keys):
        mine = sorted((b, o) for b, k, o in seen if k == key)
        offsets = [o for _, o in mine]
        assert offsets == sorted(offsets), f"{key!r} out of order across micro-batches: {mine}"
