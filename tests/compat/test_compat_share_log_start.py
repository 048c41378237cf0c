"""A share-partition whose log start moves (DeleteRecords) past records it still holds: deleted
records are never delivered again, the released ones above the new log start are, and the start offset
leaves the deleted records behind, as on Kafka."""

from __future__ import annotations

import pytest
from compat_support import (
    Server,
    count_at_least,
    create_topic,
    earliest_group,
    poll_for,
    poll_until,
    produce,
    share_consumer,
    wait_equal,
)
from confluent_kafka import AcknowledgeType

from shareq.client import Admin

pytestmark = pytest.mark.timeout(120)


def _start_offset(server: Server, group: str, topic: str) -> tuple[int, int]:
    with Admin(server.bootstrap) as admin:
        offsets = admin.describe_share_group_offsets(group, {topic: [0]})
    found = offsets[(topic, 0)]
    return found.start_offset, found.lag


@pytest.mark.parametrize("deleted_to", [3, 5])
def test_records_deleted_below_released_ones(server: Server, names: tuple[str, str], deleted_to: int) -> None:
    """Offsets 0-4 released, 5-19 accepted; then DeleteRecords to ``deleted_to``: what is left of the
    released records is delivered again, nothing else is, and once the next record is accepted the
    start offset is at or above the new log start with no lag left."""
    topic, group = names
    create_topic(server, topic)
    earliest_group(server, group)
    produce(server, topic, [b"d%d" % i for i in range(20)])
    consumer = share_consumer(server, group, [topic], explicit=True)
    try:

        def decide(message: object) -> None:
            kind = AcknowledgeType.RELEASE if message.offset() < 5 else AcknowledgeType.ACCEPT  # type: ignore[attr-defined]
            consumer.acknowledge(message, kind)

        first = poll_until(consumer, count_at_least(20), on_message=decide)
        assert sorted(m.offset() for m in first) == list(range(20))
        consumer.commit_sync()
        wait_equal(lambda: _start_offset(server, group, topic), (0, 5), timeout=10)
        with Admin(server.bootstrap) as admin:
            admin.delete_records(topic, {0: deleted_to})
        again = poll_until(
            consumer,
            lambda got: len(got) >= 5 - deleted_to,
            timeout=10,
            on_message=lambda m: consumer.acknowledge(m, AcknowledgeType.ACCEPT),
        )
        assert sorted(m.offset() for m in again) == list(range(deleted_to, 5))
        consumer.commit_sync()
        assert poll_for(consumer, 1.0) == []
        produce(server, topic, [b"last"])
        last = poll_until(
            consumer, count_at_least(1), on_message=lambda m: consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        )
        assert [m.offset() for m in last] == [20]
        consumer.commit_sync()
        # Kafka reports the start offset of its previous share-state write (a known difference, see
        # test_reported_start_offset_follows_state_writes), so only the bounds both keep are checked:
        # never below the new log start, and no lag left for deleted or acknowledged records.
        wait_equal(lambda: _start_offset(server, group, topic)[1], 0, timeout=10)
        start, _lag = _start_offset(server, group, topic)
        assert deleted_to <= start <= 21
    finally:
        consumer.close()
