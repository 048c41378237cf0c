"""Long polls woken by produce and by released records, member expiry by the broker's timer, and
group metadata surviving a restart."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio_wire import KioConnection
from share_consumers import SHARE_BROKER, create_topic, produce, user_records
from share_requests import acknowledge, fetch, heartbeat

from shareq.embedded import EmbeddedBroker
from shareq.share.persister import SharePartitionKey

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def long_fetch(conn: KioConnection, member: str, epoch: int, tid: uuid.UUID, wait_ms: int) -> Any:
    """Partition 0 joins the session at epoch 0; later fetches use the session as it is."""
    return fetch(conn, member, epoch, tid, (0,) if epoch == 0 else (), wait_ms=wait_ms)


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


def in_background(fn: Any) -> tuple[threading.Thread, list[tuple[Any, float]]]:
    """Run ``fn`` on a thread; its (result, seconds taken) lands in the returned list."""
    result: list[tuple[Any, float]] = []
    thread = threading.Thread(target=lambda: result.append(timed(fn)), daemon=True)
    thread.start()
    return thread, result


def wait_until_parked(broker: EmbeddedBroker, key: SharePartitionKey) -> None:
    share = broker.broker.share
    assert share is not None
    deadline = time.monotonic() + 5
    while broker.call(share.partitions.parked, key) == 0:
        assert time.monotonic() < deadline, "the fetch never parked"
        time.sleep(0.005)


def test_parked_fetch_wakes_on_produce_and_on_release(tmp_path: Path, persister: str) -> None:
    with EmbeddedBroker(tmp_path / "d", config={**SHARE_BROKER, "share.persister": persister}) as broker:
        create_topic(broker.bootstrap, "park", 1)
        info = broker.broker.topics.get("park")
        assert info is not None
        a, b = KioConnection(broker.bootstrap), KioConnection(broker.bootstrap)
        try:
            for conn, member in ((a, "A" * 22), (b, "B" * 22)):
                assert heartbeat(conn, member, 0, ("park",)).error_code == ErrorCode.none
            assert acquired(long_fetch(a, "A" * 22, 0, info.topic_id, 0)) == []
            key = SharePartitionKey(group_id="g", topic_id=info.topic_id, partition=0)
            # A parks on an empty partition; a produce wakes it long before max_wait
            waiter, result = in_background(lambda: long_fetch(a, "A" * 22, 1, info.topic_id, 10_000))
            wait_until_parked(broker, key)
            produce(broker.bootstrap, "park", [b"p0", b"p1"], 1, 2)
            plog = broker.broker.partition("park", 0)
            assert plog is not None
            end, count = broker.call(lambda: user_records(plog.log))
            assert count == 2
            lo, hi = end - 2, end - 1  # 0 and 1, or after the in-log persister's first state
            waiter.join(timeout=15)
            assert result, "A's long poll did not return"
            (response, took) = result[0]
            assert acquired(response) == [(lo, hi, 1)] and took < 5.0
            # B parks (A holds everything); A's RELEASE wakes it with the records
            assert acquired(long_fetch(b, "B" * 22, 0, info.topic_id, 0)) == []
            waiter, result = in_background(lambda: long_fetch(b, "B" * 22, 1, info.topic_id, 10_000))
            wait_until_parked(broker, key)  # else B's answer would just be immediate
            release = acknowledge(a, "A" * 22, 2, info.topic_id, [(lo, hi, 2)])  # RELEASE
            assert release.responses[0].partitions[0].error_code == ErrorCode.none
            waiter.join(timeout=15)
            assert result, "B's long poll did not return"
            (woken, took) = result[0]
            assert acquired(woken) == [(lo, hi, 2)] and took < 5.0
        finally:
            a.close()
            b.close()


def test_silent_member_expires_and_its_records_go_to_others(tmp_path: Path, persister: str) -> None:
    config = {
        **SHARE_BROKER,
        "group.share.min.session.timeout.ms": "500",
        "group.share.session.timeout.ms": "800",
    }
    with EmbeddedBroker(tmp_path / "d", config={**config, "share.persister": persister}) as broker:
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


def test_groups_and_initialized_partitions_survive_a_restart(tmp_path: Path, persister: str) -> None:
    with EmbeddedBroker(tmp_path / "d", config={**SHARE_BROKER, "share.persister": persister}) as broker:
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
    with EmbeddedBroker(tmp_path / "d", config={**SHARE_BROKER, "share.persister": persister}) as broker:
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
