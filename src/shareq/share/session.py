"""Share sessions: the per-member fetch context shared by ShareFetch and ShareAcknowledge.

A session is keyed by (group id, member id), not by connection: librdkafka's share consumer
fetches on the leader connection while it heartbeats on another, and Kafka's epochs are per
member. One epoch sequence spans both RPCs, as in Kafka's ``SharePartitionManager``:

- ShareFetch epoch 0 opens a session (replacing the member's old one) holding the listed
  partitions; it may not carry acknowledgements (``INVALID_REQUEST``) and its forgotten topics
  are ignored.
- Any other epoch must equal the session's next expected epoch (``INVALID_SHARE_SESSION_EPOCH``),
  if the session exists (``SHARE_SESSION_NOT_FOUND``); a ShareFetch then adds its topics and
  removes its forgotten ones, and the epoch advances (wrapping from 2**31-1 to 1).
- ShareAcknowledge may not open a session (epoch 0 is ``INVALID_SHARE_SESSION_EPOCH``); with a
  valid epoch it advances the sequence without changing the partitions.
- Epoch -1 on either closes the session: the caller processes the request's acknowledgements
  first, then releases the member's remaining acquired records in the returned partitions.

At most ``max_sessions`` (``group.share.max.share.sessions``) live at once; opening one more fails
with ``SHARE_SESSION_LIMIT_REACHED`` (replacing a member's own session does not count).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


class ShareSessionErrorCode(enum.IntEnum):
    """Kafka error codes for session faults (map at the edge with ``ErrorCode(code.value)``)."""

    INVALID_REQUEST = 42
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    SHARE_SESSION_LIMIT_REACHED = 133


class ShareSessionError(Exception):
    """The peer's request does not fit its session; the cache is unchanged."""

    def __init__(self, code: ShareSessionErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class TopicIdPartition:
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareSessionKey:
    group_id: str
    member_id: str


class SessionAction(enum.Enum):
    OPENED = "opened"
    UPDATED = "updated"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionUpdate:
    """The outcome of one request against the session cache.

    ``partitions`` are the session's partitions after the request (for ``CLOSED``: those it held,
    whose acquired records the caller releases). ``released`` are partitions of a replaced
    session that the new one no longer holds (epoch 0 over an existing session); Kafka leaves
    their records to the acquisition-lock timeout, the caller may release them at once.
    ``next_epoch`` is what the member must send next (``None`` once closed).
    """

    key: ShareSessionKey
    action: SessionAction
    partitions: frozenset[TopicIdPartition]
    added: frozenset[TopicIdPartition] = frozenset()
    removed: frozenset[TopicIdPartition] = frozenset()
    released: frozenset[TopicIdPartition] = frozenset()
    next_epoch: int | None = None


class ShareSession:
    """One member's session: its partitions, next expected epoch and last use."""

    __slots__ = ("connection_id", "key", "last_used_ms", "next_epoch", "partitions")

    def __init__(
        self, key: ShareSessionKey, partitions: set[TopicIdPartition], now_ms: int, connection_id: str | None
    ) -> None:
        self.key = key
        self.partitions = partitions
        self.next_epoch = 1
        self.last_used_ms = now_ms
        self.connection_id = connection_id

    def advance(self, now_ms: int) -> None:
        self.next_epoch = 1 if self.next_epoch == _MAX_EPOCH else self.next_epoch + 1
        self.last_used_ms = now_ms


class ShareSessionCache:
    """All share sessions of this broker."""

    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[ShareSessionKey, ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get(ShareSessionKey(group_id=group_id, member_id=member_id))

    def fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        *,
        now_ms: int,
        topics: Iterable[TopicIdPartition] = (),
        forgotten: Iterable[TopicIdPartition] = (),
        has_acknowledgements: bool = False,
        connection_id: str | None = None,
    ) -> SessionUpdate:
        """Apply a ShareFetch's session fields (``topics`` = its FetchTopic partitions).

        ``connection_id`` (on epoch 0) ties the session to the connection that opened it, for
        ``connection_closed``.
        """
        key = self._key(group_id, member_id)
        wanted = set(topics)
        forget = set(forgotten)
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                raise ShareSessionError(
                    ShareSessionErrorCode.INVALID_REQUEST,
                    "a share fetch opening a session cannot acknowledge",
                )
            old = self._sessions.get(key)
            if old is None and len(self._sessions) >= self.max_sessions:
                raise ShareSessionError(
                    ShareSessionErrorCode.SHARE_SESSION_LIMIT_REACHED,
                    f"the broker already has {self.max_sessions} share sessions",
                )
            session = ShareSession(key, wanted, now_ms, connection_id)
            self._sessions[key] = session
            return SessionUpdate(
                key=key,
                action=SessionAction.OPENED,
                partitions=frozenset(wanted),
                added=frozenset(wanted),
                released=frozenset(old.partitions - wanted) if old else frozenset(),
                next_epoch=session.next_epoch,
            )
        if epoch == FINAL_EPOCH:
            return self._close(key)
        session = self._expect(key, epoch)
        added = wanted - session.partitions
        removed = (forget & session.partitions) - wanted
        session.partitions |= added
        session.partitions -= removed
        session.advance(now_ms)
        return SessionUpdate(
            key=key,
            action=SessionAction.UPDATED,
            partitions=frozenset(session.partitions),
            added=frozenset(added),
            removed=frozenset(removed),
            next_epoch=session.next_epoch,
        )

    def acknowledge(self, group_id: str, member_id: str, epoch: int, *, now_ms: int) -> SessionUpdate:
        """Apply a ShareAcknowledge's session epoch (it advances the same sequence as ShareFetch)."""
        key = self._key(group_id, member_id)
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(
                ShareSessionErrorCode.INVALID_SHARE_SESSION_EPOCH,
                "ShareAcknowledge cannot open a share session",
            )
        if epoch == FINAL_EPOCH:
            return self._close(key)
        session = self._expect(key, epoch)
        session.advance(now_ms)
        return SessionUpdate(
            key=key,
            action=SessionAction.UPDATED,
            partitions=frozenset(session.partitions),
            next_epoch=session.next_epoch,
        )

    def remove_member(self, group_id: str, member_id: str) -> SessionUpdate | None:
        """Close the member's session (it left the group or its group session expired)."""
        key = ShareSessionKey(group_id=group_id, member_id=member_id)
        return self._close(key) if key in self._sessions else None

    def connection_closed(self, connection_id: str) -> tuple[SessionUpdate, ...]:
        """Close the sessions opened on a connection that went away."""
        keys = [k for k, s in self._sessions.items() if s.connection_id == connection_id]
        return tuple(self._close(k) for k in keys)

    def _key(self, group_id: str, member_id: str) -> ShareSessionKey:
        if not group_id or not member_id:
            raise ShareSessionError(
                ShareSessionErrorCode.INVALID_REQUEST, "group id and member id are required"
            )
        return ShareSessionKey(group_id=group_id, member_id=member_id)

    def _expect(self, key: ShareSessionKey, epoch: int) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(
                ShareSessionErrorCode.SHARE_SESSION_NOT_FOUND,
                f"no share session for member {key.member_id} of group {key.group_id}",
            )
        if epoch != session.next_epoch:
            raise ShareSessionError(
                ShareSessionErrorCode.INVALID_SHARE_SESSION_EPOCH,
                f"expected share session epoch {session.next_epoch}, got {epoch}",
            )
        return session

    def _close(self, key: ShareSessionKey) -> SessionUpdate:
        session = self._sessions.pop(key, None)
        if session is None:
            raise ShareSessionError(
                ShareSessionErrorCode.SHARE_SESSION_NOT_FOUND,
                f"no share session for member {key.member_id} of group {key.group_id}",
            )
        return SessionUpdate(key=key, action=SessionAction.CLOSED, partitions=frozenset(session.partitions))
