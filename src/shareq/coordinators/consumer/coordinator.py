"""KIP-848 consumer groups: ConsumerGroupHeartbeat with a server-side assignor, sans-I/O.

A join, leave, subscription change or topic metadata change bumps the group epoch and recomputes
the target assignment at once, with the assignor most members ask for (``group.remote.assignor``),
else the first of ``group.consumer.assignors``. A member subscribes by topic names, by a regular
expression (matched against whole topic names, as Kafka's RE2/J ``matches()``), or both; the
expression is resolved against the topics that exist at each heartbeat, so a topic created later
joins the subscription on the next one. Each member then reconciles towards its target:

1. partitions it owns but is no longer targeted are revoked first: the member is answered with
   its assignment minus them and keeps its epoch until a heartbeat reports (``owned``) that it
   no longer holds them (within the rebalance timeout, or it is removed);
2. then it moves to the new epoch and receives its target minus the partitions other members
   still hold or are still revoking; those come on a later heartbeat, once released.

So no partition is ever owned by two members at once. While a member reconciles, its heartbeat
responses ask it back within ``RECONCILING_HEARTBEAT_INTERVAL_MS`` instead of the group's
interval: the partitions it waits for reach it a fraction of a second after their old owner
releases them, so a join costs about one interval (the old owners learning of the revocation),
not two. Every change to a group or a member leaves
its durable record in ``take_records()`` (``records.py``: written only when state changes, not per
heartbeat), which the shell appends before answering; ``replay`` and ``loaded`` rebuild the groups
after a restart, so members carry on with their epochs and assignments. Time comes in as
``now_ms``; ``next_deadline()`` and ``expire()`` drive session and revocation timeouts.
"""

from __future__ import annotations

import functools
import heapq
import re
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from shareq.coordinators.classic.errors import ClassicErrorCode, ClassicRequestError
from shareq.coordinators.group.records import CoordinatorRecord

from . import records as rec
from .assignor import ASSIGNORS, RANGE, UNIFORM, Assignment

E = ClassicErrorCode
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
_SESSION, _REVOKE = 0, 1
RECONCILING_HEARTBEAT_INTERVAL_MS = 250
"""The heartbeat interval given to a member whose assignment is still short of its target."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConfig:
    session_timeout_ms: int = 45_000
    """``group.consumer.session.timeout.ms``"""
    heartbeat_interval_ms: int = 5_000
    """``group.consumer.heartbeat.interval.ms``"""
    max_size: int = 2**31 - 1
    """``group.consumer.max.size``"""
    assignors: tuple[str, ...] = (UNIFORM, RANGE)
    """``group.consumer.assignors``: those clients may ask for; the first is the default."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    """-1: unchanged since the last heartbeat."""
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    """``None``: unchanged; ``""``: no longer subscribed by expression."""
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerHeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None
    """``None``: unchanged since the last response."""


@dataclass(slots=True, kw_only=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: frozenset[str] = frozenset()
    """Topic names subscribed to by name."""
    regex: str | None = None
    resolved: frozenset[str] = frozenset()
    """Existing topics subscribed to: by name, or matching ``regex``."""
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)
    revoking: Assignment = field(default_factory=dict)
    rebalance_timeout_ms: int = 300_000
    session_deadline: int = 0
    revoke_deadline: int | None = None


@dataclass(slots=True, kw_only=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    topics: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    """Subscribed topics that exist: name -> (topic id, partitions)."""
    assignor: str = UNIFORM
    """The assignor of the current target assignment."""

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.assignment_epoch != self.group_epoch:
            return "Assigning"
        if any(
            m.epoch != self.assignment_epoch or m.revoking or m.assigned != self.target.get(m.member_id, {})
            for m in self.members.values()
        ):
            return "Reconciling"
        return "Stable"


def _minus(a: Assignment, b: Mapping[uuid.UUID, frozenset[int]]) -> Assignment:
    out = {t: ps - b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _and(a: Assignment, b: Mapping[uuid.UUID, frozenset[int]]) -> Assignment:
    out = {t: ps & b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _err(code: ClassicErrorCode, message: str) -> ClassicRequestError:
    return ClassicRequestError(code, message)


def _compile(regex: str) -> re.Pattern[str]:
    try:
        return _compiled(regex)
    except re.error as error:
        raise _err(E.INVALID_REGULAR_EXPRESSION, f"invalid regular expression {regex!r}: {error}") from None


_compiled = functools.lru_cache(maxsize=256)(re.compile)


class ConsumerGroupCoordinator:
    """All KIP-848 consumer groups of this broker."""

    def __init__(
        self,
        config: ConsumerConfig | None = None,
        *,
        new_member_id: Callable[[], str] | None = None,
        group_timeouts: Callable[[str], tuple[int, int]] | None = None,
    ) -> None:
        """``group_timeouts(group_id)`` gives a group's (session timeout, heartbeat interval) in ms, its
        ``consumer.*`` group configs; without it every group has the broker's."""
        self.config = config or ConsumerConfig()
        self._group_timeouts = group_timeouts
        self._outbox: list[CoordinatorRecord] = []
        self._new_member_id = new_member_id or (lambda: str(uuid.uuid4()))
        self._groups: dict[str, ConsumerGroup] = {}
        self._deadlines: list[tuple[int, int, str, str]] = []

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self._groups.get(group_id)

    def group_ids(self) -> list[str]:
        return list(self._groups)

    def delete(self, group_id: str) -> None:
        group = self._groups.get(group_id)
        if group is None:
            raise _err(E.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
        if group.members:
            raise _err(E.NON_EMPTY_GROUP, f"group {group_id} is not empty")
        before = self._durable(group_id)
        del self._groups[group_id]
        self._changed(group_id, before)

    # ----------------------------------------------------------------- heartbeat

    def heartbeat(
        self, request: ConsumerHeartbeat, *, now_ms: int, topics: Mapping[str, tuple[uuid.UUID, int]]
    ) -> ConsumerHeartbeatResult:
        """One ConsumerGroupHeartbeat. Raises ``ClassicRequestError``; then nothing changed."""
        before = self._durable(request.group_id)
        result = self._heartbeat(request, now_ms=now_ms, topics=topics)
        self._changed(request.group_id, before)
        return result

    def _heartbeat(
        self, request: ConsumerHeartbeat, *, now_ms: int, topics: Mapping[str, tuple[uuid.UUID, int]]
    ) -> ConsumerHeartbeatResult:
        gid, epoch = request.group_id, request.member_epoch
        if not gid:
            raise _err(E.INVALID_REQUEST, "group id must not be empty")
        if request.server_assignor is not None and request.server_assignor not in self.config.assignors:
            raise _err(
                E.UNSUPPORTED_ASSIGNOR,
                f"assignor {request.server_assignor} is not one of {', '.join(self.config.assignors)}",
            )
        if request.subscribed_topic_regex:
            _compile(request.subscribed_topic_regex)
        group = self._groups.get(gid)
        mid = request.member_id
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            if group is None or mid not in group.members:
                raise _err(E.UNKNOWN_MEMBER_ID, f"member {mid} is not in group {gid}")
            self._remove(group, mid, topics)
            return ConsumerHeartbeatResult(
                member_id=mid, member_epoch=epoch, heartbeat_interval_ms=0, assignment=None
            )
        if epoch == JOIN_EPOCH:
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise _err(
                    E.INVALID_REQUEST, "subscribed topic names or a topic regex must be set when joining"
                )
            if group is not None and mid not in group.members and len(group.members) >= self.config.max_size:
                raise _err(E.GROUP_MAX_SIZE_REACHED, f"group {gid} is full")
        elif epoch < 0:
            raise _err(E.INVALID_REQUEST, f"invalid member epoch {epoch}")
        else:
            member = group.members.get(mid) if group is not None else None
            if member is None:
                raise _err(E.UNKNOWN_MEMBER_ID, f"member {mid} is not in group {gid}")
            if epoch != member.epoch and not (
                epoch == member.previous_epoch and self._owned_ok(member, request)
            ):
                raise _err(E.FENCED_MEMBER_EPOCH, f"epoch {epoch} is not the member's {member.epoch}")

        if group is None:
            group = ConsumerGroup(group_id=gid)
            self._groups[gid] = group
        bump = False
        if epoch == JOIN_EPOCH:
            if not mid:
                mid = self._new_member_id()
            old = group.members.pop(mid, None)
            if old is not None:
                bump = True  # a rejoin: its old assignment is released
            group.members[mid] = ConsumerMember(member_id=mid)
            bump = True
        member = group.members[mid]
        # null / -1 fields mean "unchanged since the last heartbeat" (KIP-848)
        if request.instance_id is not None:
            member.instance_id = request.instance_id
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        member.client_id, member.client_host = request.client_id, request.client_host
        if request.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.subscribed_topic_names is not None:
            member.subscribed = frozenset(request.subscribed_topic_names)
        if request.subscribed_topic_regex is not None:
            member.regex = request.subscribed_topic_regex or None
        if request.server_assignor is not None:
            if request.server_assignor != member.server_assignor:
                bump = True
            member.server_assignor = request.server_assignor
        bump |= self._refresh_topics(group, topics)
        if bump:
            self._bump(group)
        before = (member.epoch, dict(member.assigned))
        self._reconcile(group, member, request.owned, now_ms)
        self._touch(group, member, now_ms)
        changed = epoch == JOIN_EPOCH or (member.epoch, member.assigned) != before
        if request.owned is not None and request.owned != member.assigned:
            changed = True
        return ConsumerHeartbeatResult(
            member_id=mid,
            member_epoch=member.epoch,
            heartbeat_interval_ms=self._interval(group, member),
            assignment=dict(member.assigned) if changed else None,
        )

    def _interval(self, group: ConsumerGroup, member: ConsumerMember) -> int:
        """The group's heartbeat interval; a member still reconciling (revoking, or waiting for
        partitions that other members are releasing) is asked back within
        ``RECONCILING_HEARTBEAT_INTERVAL_MS``, so that it takes them up as soon as they are free
        rather than one whole interval later (clients follow the interval of each response)."""
        interval = self._timeouts(group.group_id)[1]
        if member.revoking or member.assigned != group.target.get(member.member_id, {}):
            return min(interval, RECONCILING_HEARTBEAT_INTERVAL_MS)
        return interval

    @staticmethod
    def _owned_ok(member: ConsumerMember, request: ConsumerHeartbeat) -> bool:
        """A heartbeat one epoch behind is accepted if its owned partitions are still assigned
        (its previous response was lost)."""
        if request.owned is None:
            return False
        return not _minus(request.owned, member.assigned)

    def _refresh_topics(self, group: ConsumerGroup, topics: Mapping[str, tuple[uuid.UUID, int]]) -> bool:
        """Resolve each member's subscription against ``topics``; whether anything changed."""
        changed = False
        for member in group.members.values():
            resolved = frozenset(n for n in member.subscribed if n in topics)
            if member.regex is not None:
                pattern = _compile(member.regex)
                resolved |= {n for n in topics if pattern.fullmatch(n)}
            if resolved != member.resolved:
                member.resolved = resolved
                changed = True
        subscribed = set().union(*(m.resolved for m in group.members.values()))
        fresh = {name: topics[name] for name in sorted(subscribed)}
        if fresh != group.topics:
            group.topics = fresh
            changed = True
        return changed

    def _choose_assignor(self, group: ConsumerGroup) -> str:
        """The assignor most members ask for (ties: the one listed first), else the default."""
        votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        if not votes:
            return self.config.assignors[0]
        order = {name: i for i, name in enumerate(self.config.assignors)}
        return min(votes, key=lambda name: (-votes[name], order.get(name, len(order))))

    def _bump(self, group: ConsumerGroup) -> None:
        group.group_epoch += 1
        name_to_id = {name: tid for name, (tid, _) in group.topics.items()}
        subscriptions = {
            mid: frozenset(name_to_id[n] for n in m.resolved if n in name_to_id)
            for mid, m in group.members.items()
        }
        partitions = dict(group.topics.values())
        group.assignor = self._choose_assignor(group)
        group.target = ASSIGNORS[group.assignor](subscriptions, partitions, group.target)
        group.assignment_epoch = group.group_epoch

    def _reconcile(
        self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None, now_ms: int
    ) -> None:
        target = group.target.get(member.member_id, {})
        if member.revoking:
            if owned is None or _and(owned, member.revoking):
                return  # still revoking
            member.revoking = {}
            member.revoke_deadline = None
        if member.epoch != group.assignment_epoch:
            revoke = _minus(member.assigned, target)
            if revoke:
                member.assigned = _and(member.assigned, target)
                member.revoking = revoke
                member.revoke_deadline = now_ms + member.rebalance_timeout_ms
                self._push(member.revoke_deadline, _REVOKE, group.group_id, member.member_id)
                return
            member.previous_epoch, member.epoch = member.epoch, group.assignment_epoch
        held: dict[uuid.UUID, set[int]] = {}
        for other in group.members.values():
            if other is member:
                continue
            for t, ps in (*other.assigned.items(), *other.revoking.items()):
                held.setdefault(t, set()).update(ps)
        frozen_held = {t: frozenset(ps) for t, ps in held.items()}
        member.assigned = _minus(target, frozen_held)

    def _remove(self, group: ConsumerGroup, mid: str, topics: Mapping[str, tuple[uuid.UUID, int]]) -> None:
        del group.members[mid]
        self._refresh_topics(group, topics)
        self._bump(group)

    # ----------------------------------------------------------------- offsets

    def validate_offset_commit(self, group_id: str, member_id: str, epoch: int) -> None:
        group = self._groups.get(group_id)
        if group is None:
            raise _err(E.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
        if epoch < 0 and not group.members:
            return
        member = group.members.get(member_id)
        if member is None:
            raise _err(E.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {group_id}")
        if epoch != member.epoch:
            raise _err(E.STALE_MEMBER_EPOCH, f"epoch {epoch} is not the member's {member.epoch}")

    # ----------------------------------------------------------------- timers

    def _touch(self, group: ConsumerGroup, member: ConsumerMember, now_ms: int) -> None:
        member.session_deadline = now_ms + self._timeouts(group.group_id)[0]
        self._push(member.session_deadline, _SESSION, group.group_id, member.member_id)

    def _timeouts(self, group_id: str) -> tuple[int, int]:
        if self._group_timeouts is not None:
            return self._group_timeouts(group_id)
        return self.config.session_timeout_ms, self.config.heartbeat_interval_ms

    def _push(self, deadline: int, kind: int, gid: str, mid: str) -> None:
        heapq.heappush(self._deadlines, (deadline, kind, gid, mid))

    def _live(self, deadline: int, kind: int, gid: str, mid: str) -> bool:
        group = self._groups.get(gid)
        member = group.members.get(mid) if group is not None else None
        if member is None:
            return False
        return (member.session_deadline if kind == _SESSION else member.revoke_deadline) == deadline

    def next_deadline(self) -> int | None:
        while self._deadlines:
            if self._live(*self._deadlines[0]):
                return self._deadlines[0][0]
            heapq.heappop(self._deadlines)
        return None

    def expire(self, now_ms: int, topics: Mapping[str, tuple[uuid.UUID, int]]) -> list[tuple[str, str]]:
        """Remove members whose session or revocation deadline passed; (group, member) removed."""
        removed = []
        while (deadline := self.next_deadline()) is not None and deadline <= now_ms:
            _, _, gid, mid = heapq.heappop(self._deadlines)
            before = self._durable(gid)
            self._remove(self._groups[gid], mid, topics)
            self._changed(gid, before)
            removed.append((gid, mid))
        return removed

    # ----------------------------------------------------------------- durability

    def take_records(self) -> list[CoordinatorRecord]:
        """The records of the changes made since the last call, to append in order."""
        out, self._outbox = self._outbox, []
        return out

    def _durable(self, group_id: str) -> tuple[bytes | None, dict[str, bytes]]:
        """The encoded durable state of a group: its record and its members' records."""
        group = self._groups.get(group_id)
        if group is None:
            return None, {}
        value = rec.encode_value(
            {
                "epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "assignor": group.assignor,
                "topics": {name: [str(tid), n] for name, (tid, n) in sorted(group.topics.items())},
            }
        )
        members = {mid: self._member_value(group, m) for mid, m in group.members.items()}
        return value, members

    @staticmethod
    def _member_value(group: ConsumerGroup, m: ConsumerMember) -> bytes:
        return rec.encode_value(
            {
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed": sorted(m.subscribed),
                "regex": m.regex,
                "resolved": sorted(m.resolved),
                "server_assignor": m.server_assignor,
                "epoch": m.epoch,
                "previous_epoch": m.previous_epoch,
                "assigned": rec.encode_assignment(m.assigned),
                "revoking": rec.encode_assignment(m.revoking),
                "target": rec.encode_assignment(group.target.get(m.member_id, {})),
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
            }
        )

    def _changed(self, group_id: str, before: tuple[bytes | None, dict[str, bytes]]) -> None:
        group_before, members_before = before
        group_after, members_after = self._durable(group_id)
        for mid, value in members_after.items():
            if members_before.get(mid) != value:
                self._outbox.append(rec.record(rec.member_key(group_id, mid), value))
        for mid in members_before.keys() - members_after.keys():
            self._outbox.append(rec.record(rec.member_key(group_id, mid), None))
        if group_after != group_before:
            self._outbox.append(rec.record(rec.group_key(group_id), group_after))

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one durable record (loading after a restart); ``loaded`` arms the timers after.
        Raises ``ClassicStateError`` for a corrupt record."""
        kind, group_id, member_id = rec.decode_key(key)
        if kind is rec.ConsumerRecordType.CONSUMER_GROUP:
            if value is None:
                self._groups.pop(group_id, None)
                return
            v = rec.decode_value(value)
            group = self._groups.setdefault(group_id, ConsumerGroup(group_id=group_id))
            group.group_epoch, group.assignment_epoch = int(v["epoch"]), int(v["assignment_epoch"])
            group.assignor = str(v["assignor"])
            group.topics = {name: (uuid.UUID(tid), int(n)) for name, (tid, n) in v["topics"].items()}
            return
        group = self._groups.setdefault(group_id, ConsumerGroup(group_id=group_id))
        if value is None:
            group.members.pop(member_id, None)
            group.target.pop(member_id, None)
            return
        v = rec.decode_value(value)
        group.members[member_id] = ConsumerMember(
            member_id=member_id,
            instance_id=v["instance_id"],
            rack_id=v["rack_id"],
            client_id=v["client_id"],
            client_host=v["client_host"],
            subscribed=frozenset(v["subscribed"]),
            regex=v["regex"],
            resolved=frozenset(v["resolved"]),
            server_assignor=v["server_assignor"],
            epoch=int(v["epoch"]),
            previous_epoch=int(v["previous_epoch"]),
            assigned=rec.decode_assignment(v["assigned"]),
            revoking=rec.decode_assignment(v["revoking"]),
            rebalance_timeout_ms=int(v["rebalance_timeout_ms"]),
        )
        group.target[member_id] = rec.decode_assignment(v["target"])

    def loaded(self, now_ms: int) -> None:
        """After replay: every member gets a fresh session (and revocation) deadline from now."""
        for group in self._groups.values():
            for member in group.members.values():
                self._touch(group, member, now_ms)
                if member.revoking:
                    member.revoke_deadline = now_ms + member.rebalance_timeout_ms
                    self._push(member.revoke_deadline, _REVOKE, group.group_id, member.member_id)
