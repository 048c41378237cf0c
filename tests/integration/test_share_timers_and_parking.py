"""Long polls woken by produce and by released records, member expiry by the broker's timer, and
group metadata surviving a restart."""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio_wire import KioConnection
from share_consumers import SHARE_BROKER, create_topic, produce
from test_share_bad_input import ACK, FETCH, heartbeat

from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def long_fetch(conn: KioConnection, member: str, epoch: int, tid: uuid.UUID, wait_ms: int) -> Any:
    return conn.send(
        FETCH.ShareFetchRequest(
            group_id="g",
            member_id=member,
            share_session_epoch=epoch,
            max_wait=datetime.timedelta(milliseconds=wait_ms),
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=500,
            batch_size=500,
            topics=(
                FETCH.FetchTopic(
                    topic_id=tid,
                    partitions=(FETCH.FetchPartition(partition_index=0, acknowledgement_batches=()),),
                ),
            )
            if epoch == 0
            else (),
            forgotten_topics_data=(),
        )
    )


def acquired(response: Any) -> list[tuple[int, int, int]]:
    return [
        (r.first_offset, r.last_offset, r.delivery_count)
        for t in response.responses
        for p in t.partitions
        for r in p.acquired_records
    ]


def timed(fn: Any) -> tuple[Any, float]:
    started = time.monotonic()
    out = fn()
    return out, time.monotonic() - started


def test_parked_fetch_wakes_on_produce_and_on_release(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d", config=SHARE_BROKER) as broker:
        create_topic(broker.bootstrap, "park", 1)
        info = broker.broker.topics.get("park")
        assert info is not None
        a, b = KioConnection(broker.bootstrap), KioConnection(broker.bootstrap)
        try:
            for conn, member in ((a, "A" * 22), (b, "B" * 22)):
                assert heartbeat(conn, member, 0, ("park",)).error_code == ErrorCode.none
            assert acquired(long_fetch(a, "A" * 22, 0, info.topic_id, 0)) == []
            # A parks on an empty partition; a produce wakes it long before max_wait
            threading.Timer(0.3, produce, args=(broker.bootstrap, "park", [b"p0", b"p1"], 1, 2)).start()
            response, took = timed(lambda: long_fetch(a, "A" * 22, 1, info.topic_id, 10_000))
            assert acquired(response) == [(0, 1, 1)] and 0.25 < took < 5.0
            # B parks (A holds everything); A's RELEASE wakes it with the records
            assert acquired(long_fetch(b, "B" * 22, 0, info.topic_id, 0)) == []
            result: list[Any] = []
            waiter = threading.Thread(
                target=lambda: result.append(timed(lambda: long_fetch(b, "B" * 22, 1, info.topic_id, 10_000)))
            )
            waiter.start()
            time.sleep(0.3)  # let B park (its answer would otherwise just be immediate)
            release = a.send(
                ACK.ShareAcknowledgeRequest(
                    group_id="g",
                    member_id="A" * 22,
                    share_session_epoch=2,
                    topics=(
                        ACK.AcknowledgeTopic(
                            topic_id=info.topic_id,
                            partitions=(
                                ACK.AcknowledgePartition(
                                    partition_index=0,
                                    acknowledgement_batches=(
                                        ACK.AcknowledgementBatch(
                                            first_offset=0, last_offset=1, acknowledge_types=(2,)
                                        ),
                                    ),
                                ),
                            ),
                        ),
                    ),
                )
            )
            assert release.responses[0].partitions[0].error_code == ErrorCode.none
            waiter.join(timeout=15)
            (woken, took) = result[0]
            assert acquired(woken) == [(0, 1, 2)] and took < 5.0
        finally:
            a.close()
            b.close()


def test_silent_member_expires_and_its_records_go_to_others(tmp_path: Path) -> None:
    config = {
        **SHARE_BROKER,
        "group.share.min.session.timeout.ms": "500",
        "group.share.session.timeout.ms": "800",
    }
    with EmbeddedBroker(tmp_path / "d", config=config) as broker:
        create_topic(broker.bootstrap, "silent", 1)
        produce(broker.bootstrap, "silent", [b"s%d" % i for i in range(5)], 1, per_batch=5)
        info = broker.broker.topics.get("silent")
        assert info is not None
        a, b = KioConnection(broker.bootstrap), KioConnection(broker.bootstrap)
        try:
            assert heartbeat(a, "A" * 22, 0, ("silent",)).error_code == ErrorCode.none
            assert acquired(long_fetch(a, "A" * 22, 0, info.topic_id, 0)) == [(0, 4, 1)]
            # A goes silent; B keeps heartbeating and long-polls: the session timeout (not the
            # 30 s lock) hands A's records over
            joined = heartbeat(b, "B" * 22, 0, ("silent",))
            assert long_fetch(b, "B" * 22, 0, info.topic_id, 0).error_code == ErrorCode.none
            epoch, session_epoch = joined.member_epoch, 1
            started = time.monotonic()
            got: list[tuple[int, int, int]] = []
            while not got and time.monotonic() - started < 10:
                hb = heartbeat(b, "B" * 22, epoch, None)
                assert hb.error_code == ErrorCode.none
                epoch = hb.member_epoch
                got = acquired(long_fetch(b, "B" * 22, session_epoch, info.topic_id, 200))
                session_epoch += 1
            assert got == [(0, 4, 2)] and time.monotonic() - started < 5
            # the expired member is gone: its heartbeat and its session are refused
            assert heartbeat(a, "A" * 22, 1, None).error_code == ErrorCode.unknown_member_id
            assert (
                long_fetch(a, "A" * 22, 1, info.topic_id, 0).error_code == ErrorCode.share_session_not_found
            )
        finally:
            a.close()
            b.close()


def test_groups_and_initialized_partitions_survive_a_restart(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d", config=SHARE_BROKER) as broker:
        create_topic(broker.bootstrap, "keep", 2)
        conn = KioConnection(broker.bootstrap)
        try:
            joined = heartbeat(conn, "A" * 22, 0, ("keep",))
            assert (
                joined.assignment is not None
                and sum(len(t.partitions) for t in joined.assignment.topic_partitions) == 2
            )
        finally:
            conn.close()
        share = broker.broker.share
        assert share is not None
        before = broker.call(share.coordinator.initialized_partitions, "g")
        epoch_before = broker.call(share.coordinator.describe, "g").group_epoch
    with EmbeddedBroker(tmp_path / "d", config=SHARE_BROKER) as broker:
        share = broker.broker.share
        assert share is not None
        assert broker.call(share.coordinator.initialized_partitions, "g") == before
        conn = KioConnection(broker.bootstrap)
        try:
            rejoined = heartbeat(conn, "A" * 22, 0, ("keep",))
            assert rejoined.error_code == ErrorCode.none
            assert rejoined.member_epoch > epoch_before  # epochs stay monotonic across restarts
        finally:
            conn.close()
