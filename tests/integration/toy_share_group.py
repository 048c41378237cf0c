"""A toy share group registered on the real broker for client tests, until the broker serves share groups.

It is deliberately simple: one group, every member gets every partition of its topics, per-offset state in
dicts, locks never time out. It checks what the share-group protocol requires of a client (member epochs,
share-session epochs across ShareFetch and ShareAcknowledge, acknowledging only what one holds) and records
every call so tests can assert the sequence a client sent.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange
from shareq.server.context import RequestContext
from shareq.server.embedded import EmbeddedBroker

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = "available", "acquired", "acknowledged", "archived"
ZERO = datetime.timedelta(0)


@dataclass
class OffsetState:
    state: str = AVAILABLE
    delivery_count: int = 0
    owner: str | None = None


@dataclass
class ToyShareGroup:
    broker: EmbeddedBroker
    calls: list[tuple[str, int, Any]] = field(default_factory=list)
    members: dict[str, int] = field(default_factory=dict)
    sessions: dict[str, int] = field(default_factory=dict)  # member -> next expected session epoch
    session_parts: dict[str, set[tuple[uuid.UUID, int]]] = field(default_factory=dict)
    offsets: dict[tuple[uuid.UUID, int], dict[int, OffsetState]] = field(default_factory=dict)
    acks: list[tuple[uuid.UUID, int, int, int, tuple[int, ...], bool]] = field(default_factory=list)
    fence_next: bool = False
    reassign: dict[str, tuple[tuple[uuid.UUID, tuple[int, ...]], ...]] = field(default_factory=dict)
    max_acquire: int = 1_000_000

    def install(self) -> None:
        handlers = self.broker.broker.handlers
        self.broker.call(handlers.register, 76, VersionRange(1, 1), self.heartbeat)
        self.broker.call(handlers.register, 78, VersionRange(1, 2), self.share_fetch)
        self.broker.call(handlers.register, 79, VersionRange(1, 2), self.share_acknowledge)

    # -- membership --------------------------------------------------------------------------------

    def heartbeat(self, req: Any, ctx: RequestContext) -> Any:
        self.calls.append(("heartbeat", req.member_epoch, (req.member_id, req.subscribed_topic_names)))
        build = ctx.build
        base = {"throttle_time": ZERO, "heartbeat_interval": datetime.timedelta(milliseconds=100)}
        if self.fence_next and req.member_epoch > 0:
            self.fence_next = False
            self.members.pop(req.member_id, None)
            self.sessions.pop(req.member_id, None)
            return build(error_code=ErrorCode.fenced_member_epoch, member_epoch=-1, **base)
        if req.member_epoch == -1:
            self.members.pop(req.member_id, None)
            return build(error_code=ErrorCode.none, member_id=req.member_id, member_epoch=-1, **base)
        if req.member_epoch == 0:
            self.members[req.member_id] = 1
            parts = []
            for name in req.subscribed_topic_names or ():
                info = ctx.broker.topics.get(name)
                if info is not None:
                    parts.append(
                        build(
                            "TopicPartitions",
                            topic_id=info.topic_id,
                            partitions=tuple(range(info.partitions)),
                        )
                    )
            return build(
                error_code=ErrorCode.none,
                member_id=req.member_id,
                member_epoch=1,
                assignment=build("Assignment", topic_partitions=tuple(parts)),
                **base,
            )
        if self.members.get(req.member_id) != req.member_epoch:
            return build(error_code=ErrorCode.unknown_member_id, member_epoch=-1, **base)
        new = self.reassign.pop(req.member_id, None)
        if new is not None:  # a new assignment comes with a bumped member epoch
            self.members[req.member_id] = req.member_epoch + 1
            parts = tuple(build("TopicPartitions", topic_id=tid, partitions=ps) for tid, ps in new)
            return build(
                error_code=ErrorCode.none,
                member_id=req.member_id,
                member_epoch=req.member_epoch + 1,
                assignment=build("Assignment", topic_partitions=parts),
                **base,
            )
        return build(
            error_code=ErrorCode.none, member_id=req.member_id, member_epoch=req.member_epoch, **base
        )

    # -- sessions ----------------------------------------------------------------------------------

    def _session(self, member: str, epoch: int) -> ErrorCode:
        if epoch == 0:
            self.sessions[member] = 1
            return ErrorCode.none
        expected = self.sessions.get(member)
        if expected is None:
            return ErrorCode.share_session_not_found
        if epoch == -1:
            del self.sessions[member]
            for states in self.offsets.values():  # session close: the member's records go back
                for st in states.values():
                    if st.state == ACQUIRED and st.owner == member:
                        st.state, st.owner = AVAILABLE, None
            return ErrorCode.none
        if epoch != expected:
            return ErrorCode.invalid_share_session_epoch
        self.sessions[member] = expected + 1
        return ErrorCode.none

    def _apply_acks(self, member: str, tp: tuple[uuid.UUID, int], batches: Any, renew: bool) -> ErrorCode:
        states = self.offsets.setdefault(tp, {})
        for b in batches:
            self.acks.append((tp[0], tp[1], b.first_offset, b.last_offset, tuple(b.acknowledge_types), renew))
            for i, off in enumerate(range(b.first_offset, b.last_offset + 1)):
                st = states.get(off)
                if st is None or st.state != ACQUIRED or st.owner != member:
                    return ErrorCode.invalid_record_state
                t = b.acknowledge_types[0] if len(b.acknowledge_types) == 1 else b.acknowledge_types[i]
                if t == 4:
                    continue  # RENEW: lock extended, nothing else changes
                if t in (0, 1):
                    st.state, st.owner = ACKNOWLEDGED, None
                elif t == 2:
                    st.state, st.owner = AVAILABLE, None
                elif t == 3:
                    st.state, st.owner = ARCHIVED, None
        return ErrorCode.none

    def share_fetch(self, req: Any, ctx: RequestContext) -> Any:
        self.calls.append(("fetch", req.share_session_epoch, req))
        build = ctx.build
        code = self._session(req.member_id, req.share_session_epoch)
        if code is not ErrorCode.none:
            return build(
                throttle_time=ZERO,
                error_code=code,
                acquisition_lock_timeout=ZERO,
                responses=(),
                node_endpoints=(),
            )
        # the session remembers its partitions: listed ones join it, forgotten ones leave it
        parts = self.session_parts.setdefault(req.member_id, set())
        if req.share_session_epoch == 0:
            parts.clear()
        listed = {
            (t.topic_id, p.partition_index): p.acknowledgement_batches
            for t in req.topics
            for p in t.partitions
        }
        parts |= set(listed)
        for f in req.forgotten_topics_data:
            parts -= {(f.topic_id, p) for p in f.partitions}
        wanted = [(tid, part, listed.get((tid, part), ())) for tid, part in sorted(parts, key=str)]
        budget = min(req.max_records, self.max_acquire)
        out: dict[uuid.UUID, list[Any]] = {}
        for tid, part, batches in wanted:
            ack_code = self._apply_acks(req.member_id, (tid, part), batches, False)
            info = ctx.broker.topics.by_id(tid)
            assert info is not None
            log = ctx.broker.partition(info.name, part).log
            states = self.offsets.setdefault((tid, part), {})
            acquired: list[tuple[int, int]] = []
            for off in range(log.log_start_offset, log.log_end_offset):
                st = states.setdefault(off, OffsetState())
                if st.state == AVAILABLE and budget > 0:
                    st.state, st.owner = ACQUIRED, req.member_id
                    st.delivery_count += 1
                    acquired.append((off, st.delivery_count))
                    budget -= 1
            ranges: list[list[int]] = []
            for off, count in acquired:
                if ranges and ranges[-1][1] == off - 1 and ranges[-1][2] == count:
                    ranges[-1][1] = off
                else:
                    ranges.append([off, off, count])
            records = log.read(acquired[0][0], 1 << 20).records if acquired else b""
            out.setdefault(tid, []).append(
                build(
                    "PartitionData",
                    partition_index=part,
                    error_code=ErrorCode.none,
                    acknowledge_error_code=ack_code,
                    current_leader=build("LeaderIdAndEpoch", leader_id=-1, leader_epoch=-1),
                    records=records,
                    acquired_records=tuple(
                        build("AcquiredRecords", first_offset=a, last_offset=b, delivery_count=c)
                        for a, b, c in ranges
                    ),
                )
            )
        topics = [
            build("ShareFetchableTopicResponse", topic_id=tid, partitions=tuple(ps))
            for tid, ps in out.items()
        ]
        return build(
            throttle_time=ZERO,
            error_code=ErrorCode.none,
            acquisition_lock_timeout=datetime.timedelta(seconds=30),
            responses=tuple(topics),
            node_endpoints=(),
        )

    def share_acknowledge(self, req: Any, ctx: RequestContext) -> Any:
        renew = bool(getattr(req, "is_renew_ack", False))
        self.calls.append(("ack", req.share_session_epoch, req))
        build = ctx.build
        base = {
            "throttle_time": ZERO,
            "acquisition_lock_timeout": datetime.timedelta(seconds=30),
            "node_endpoints": (),
        }
        code = self._session(req.member_id, req.share_session_epoch)
        if code is not ErrorCode.none:
            return build(error_code=code, responses=(), **base)
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                c = self._apply_acks(
                    req.member_id, (t.topic_id, p.partition_index), p.acknowledgement_batches, renew
                )
                parts.append(
                    build(
                        "PartitionData",
                        partition_index=p.partition_index,
                        error_code=c,
                        current_leader=build("LeaderIdAndEpoch", leader_id=-1, leader_epoch=-1),
                    )
                )
            topics.append(
                build("ShareAcknowledgeTopicResponse", topic_id=t.topic_id, partitions=tuple(parts))
            )
        return build(error_code=ErrorCode.none, responses=tuple(topics), **base)

    # -- inspection --------------------------------------------------------------------------------

    def states(self, tid: uuid.UUID, part: int) -> dict[int, str]:
        return {off: st.state for off, st in sorted(self.offsets.get((tid, part), {}).items())}
