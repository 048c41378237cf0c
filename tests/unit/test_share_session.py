"""Share sessions: epochs across ShareFetch and ShareAcknowledge, incremental partitions, limits."""

from __future__ import annotations

import uuid

import pytest

from shareq.share.session import (
    SessionAction,
    ShareSessionCache,
    ShareSessionError,
    ShareSessionErrorCode,
    TopicIdPartition,
)

T = uuid.UUID(int=7)
P0, P1, P2 = (TopicIdPartition(topic_id=T, partition=i) for i in range(3))


def code_of(fn: object, *args: object, **kwargs: object) -> ShareSessionErrorCode:
    with pytest.raises(ShareSessionError) as info:
        fn(*args, **kwargs)  # type: ignore[operator]
    return info.value.code


def test_librdkafka_sequence_fetch_ack_close() -> None:
    cache = ShareSessionCache()
    opened = cache.fetch("g", "m", 0, now_ms=0, topics=[P0, P1])
    assert opened.action is SessionAction.OPENED and opened.next_epoch == 1
    assert opened.partitions == {P0, P1}
    assert cache.fetch("g", "m", 1, now_ms=1).next_epoch == 2  # topics=[] keeps the session's partitions
    assert cache.acknowledge("g", "m", 2, now_ms=2).next_epoch == 3  # ShareAcknowledge advances it too
    upd = cache.fetch("g", "m", 3, now_ms=3)
    assert upd.partitions == {P0, P1} and upd.next_epoch == 4
    closed = cache.acknowledge("g", "m", -1, now_ms=4)
    assert closed.action is SessionAction.CLOSED and closed.partitions == {P0, P1}
    assert len(cache) == 0
    assert code_of(cache.fetch, "g", "m", 4, now_ms=5) is ShareSessionErrorCode.SHARE_SESSION_NOT_FOUND


def test_wrong_epoch_is_rejected_and_changes_nothing() -> None:
    cache = ShareSessionCache()
    cache.fetch("g", "m", 0, now_ms=0, topics=[P0])
    assert (
        code_of(cache.fetch, "g", "m", 2, now_ms=1, topics=[P1])
        is ShareSessionErrorCode.INVALID_SHARE_SESSION_EPOCH
    )
    assert (
        code_of(cache.acknowledge, "g", "m", 5, now_ms=1) is ShareSessionErrorCode.INVALID_SHARE_SESSION_EPOCH
    )
    upd = cache.fetch("g", "m", 1, now_ms=2)
    assert upd.partitions == {P0} and upd.next_epoch == 2


def test_acknowledge_cannot_open_and_needs_a_session() -> None:
    cache = ShareSessionCache()
    assert (
        code_of(cache.acknowledge, "g", "m", 0, now_ms=0) is ShareSessionErrorCode.INVALID_SHARE_SESSION_EPOCH
    )
    assert code_of(cache.acknowledge, "g", "m", 1, now_ms=0) is ShareSessionErrorCode.SHARE_SESSION_NOT_FOUND
    assert code_of(cache.acknowledge, "g", "m", -1, now_ms=0) is ShareSessionErrorCode.SHARE_SESSION_NOT_FOUND
    assert code_of(cache.fetch, "g", "m", -1, now_ms=0) is ShareSessionErrorCode.SHARE_SESSION_NOT_FOUND


def test_incremental_add_and_forget() -> None:
    cache = ShareSessionCache()
    cache.fetch("g", "m", 0, now_ms=0, topics=[P0, P1])
    upd = cache.fetch("g", "m", 1, now_ms=1, topics=[P2], forgotten=[P0])
    assert upd.added == {P2} and upd.removed == {P0} and upd.partitions == {P1, P2}
    # Forgetting something not in the session is a no-op; re-listing a held partition adds nothing.
    upd = cache.fetch("g", "m", 2, now_ms=2, topics=[P1], forgotten=[P0])
    assert upd.added == frozenset() and upd.removed == frozenset() and upd.partitions == {P1, P2}


def test_initial_fetch_replaces_old_session_and_rejects_acks() -> None:
    cache = ShareSessionCache()
    cache.fetch("g", "m", 0, now_ms=0, topics=[P0, P1])
    cache.fetch("g", "m", 1, now_ms=1)
    again = cache.fetch("g", "m", 0, now_ms=2, topics=[P1, P2], forgotten=[P0])
    assert again.action is SessionAction.OPENED and again.next_epoch == 1
    assert again.released == {P0} and again.partitions == {P1, P2}
    assert len(cache) == 1
    code = code_of(cache.fetch, "g", "m", 0, now_ms=3, topics=[P0], has_acknowledgements=True)
    assert code is ShareSessionErrorCode.INVALID_REQUEST
    assert cache.fetch("g", "m", 1, now_ms=4).next_epoch == 2


def test_sessions_are_per_group_and_member() -> None:
    cache = ShareSessionCache()
    cache.fetch("g", "a", 0, now_ms=0, topics=[P0])
    cache.fetch("g", "b", 0, now_ms=0, topics=[P1])
    cache.fetch("h", "a", 0, now_ms=0, topics=[P2])
    assert cache.fetch("g", "a", 1, now_ms=1).partitions == {P0}
    assert cache.fetch("h", "a", 1, now_ms=1).partitions == {P2}
    assert code_of(cache.fetch, "g", "a", 1, now_ms=1) is ShareSessionErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert code_of(cache.fetch, "", "a", 0, now_ms=1) is ShareSessionErrorCode.INVALID_REQUEST


def test_session_limit() -> None:
    cache = ShareSessionCache(max_sessions=2)
    cache.fetch("g", "a", 0, now_ms=0)
    cache.fetch("g", "b", 0, now_ms=0)
    assert code_of(cache.fetch, "g", "c", 0, now_ms=0) is ShareSessionErrorCode.SHARE_SESSION_LIMIT_REACHED
    cache.fetch("g", "a", 0, now_ms=1)  # replacing one's own session is fine at the cap
    cache.fetch("g", "b", -1, now_ms=1)
    cache.fetch("g", "c", 0, now_ms=2)
    assert len(cache) == 2


def test_default_limit_is_kafkas() -> None:
    assert ShareSessionCache().max_sessions == 2000


def test_epoch_wraps_to_one() -> None:
    cache = ShareSessionCache()
    cache.fetch("g", "m", 0, now_ms=0)
    session = cache.get("g", "m")
    assert session is not None
    session.next_epoch = 2**31 - 1
    assert cache.acknowledge("g", "m", 2**31 - 1, now_ms=1).next_epoch == 1


def test_member_removal_and_connection_close() -> None:
    cache = ShareSessionCache()
    cache.fetch("g", "a", 0, now_ms=0, topics=[P0], connection_id="c1")
    cache.fetch("g", "b", 0, now_ms=0, topics=[P1], connection_id="c2")
    cache.fetch("g", "c", 0, now_ms=0, topics=[P2], connection_id="c1")
    removed = cache.remove_member("g", "b")
    assert removed is not None and removed.partitions == {P1}
    assert cache.remove_member("g", "b") is None
    closed = cache.connection_closed("c1")
    assert sorted(u.key.member_id for u in closed) == ["a", "c"]
    assert len(cache) == 0


def test_session_reopened_on_a_new_connection_survives_the_old_one_closing() -> None:
    cache = ShareSessionCache()
    cache.fetch("g", "a", 0, now_ms=0, topics=[P0], connection_id="c1")
    cache.fetch("g", "a", 0, now_ms=1, topics=[P0], connection_id="c2")  # reconnected, epoch 0 again
    assert cache.connection_closed("c1") == ()
    assert cache.get("g", "a") is not None
    epoch = cache.fetch("g", "a", 1, now_ms=2, connection_id="c3")  # later epochs do not move it
    assert epoch.next_epoch == 2
    assert cache.connection_closed("c3") == ()
    (closed,) = cache.connection_closed("c2")
    assert closed.partitions == {P0} and len(cache) == 0
