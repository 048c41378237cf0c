"""A share consumer whose connection drops: its share session closes and its records are released.

Kafka's ShareSessionCache removes the session a connection opened (ShareFetch epoch 0) when that
connection disconnects, and the member's acquired records are released at once; a later consumer
gets them without waiting for the acquisition lock (30 s here) or the member's group session.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from share_consumers import SHARE_BROKER, consume_then_die, create_topic, poll_values, produce, share_consumer

from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_killed_consumer_records_return_when_its_connection_closes(tmp_path: Path, persister: str) -> None:
    config = {**SHARE_BROKER, "group.share.record.lock.duration.ms": "30000", "share.persister": persister}
    with EmbeddedBroker(tmp_path / "d", config=config) as broker:
        create_topic(broker.bootstrap, "drops", 1)
        produce(broker.bootstrap, "drops", [b"d%d" % i for i in range(20)], 1, per_batch=20)
        assert consume_then_die(broker.bootstrap, "drops") == 20
        killed = time.monotonic()
        # The dead member is still in the group (its heartbeats stop; the group session is 45 s),
        # but its share session went with its connection.
        deadline = time.monotonic() + 10
        while broker.call(lambda: len(broker.broker.share.sessions)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert broker.call(lambda: len(broker.broker.share.sessions)) == 0
        consumer = share_consumer(broker.bootstrap, "g", ["drops"])
        try:
            got = poll_values(consumer, lambda out: len(out) >= 20, timeout=15)
            assert sorted(m.offset() for m in got) == list(range(20))
            assert {m.delivery_count() for m in got} == {2}, "the same records, delivered again"
            assert time.monotonic() - killed < 15, "well before the 30 s acquisition lock"
        finally:
            consumer.close()
