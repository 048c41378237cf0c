"""The classic group coordinator: JoinGroup, SyncGroup, Heartbeat and LeaveGroup with Kafka's
rebalance semantics, sans-I/O.

Every call takes ``now_ms``; ``next_deadline()`` says when ``expire`` is due (member sessions,
member ids awaiting their second JoinGroup, the join and sync phases' rebalance timeouts).
Requests that Kafka answers later (a JoinGroup until every member has rejoined, a follower's
SyncGroup until the leader's assignment arrives) are *parked*: the call returns no response,
and a later result carries a ``JoinCompleted`` / ``SyncCompleted`` for that member. Results
also carry records for the shell to append to the group-metadata log before it answers.
Refusals raise ``ClassicRequestError`` and change nothing.

States: Empty -> PreparingRebalance (join phase) -> CompletingRebalance (sync phase) -> Stable,
and back to PreparingRebalance on any membership or protocol change. A rebalance of an empty
group waits ``initial_rebalance_delay_ms`` (extended while members keep arriving, up to the
rebalance timeout) so that consumers starting together form one generation.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from shareq.coordinators.group.records import CoordinatorRecord

from .admin import ClassicGroupAdmin
from .errors import ClassicErrorCode, ClassicRequestError, ClassicStateError
from .group import ClassicGroup, ClassicGroupState, ClassicMember
from .messages import (
    ClassicResult,
    Completion,
    JoinCompleted,
    JoinRequest,
    JoinResponse,
    LeavingMember,
    SyncCompleted,
    SyncRequest,
    SyncResponse,
)
from .records import ClassicGroupValue, ClassicMemberValue, group_record

E = ClassicErrorCode
S = ClassicGroupState

_MEMBER, _PENDING, _PHASE = 0, 1, 2


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicConfig:
    """Broker settings of classic groups (Kafka's names and defaults)."""

    min_session_timeout_ms: int = 6_000
    """``group.min.session.timeout.ms``"""
    max_session_timeout_ms: int = 1_800_000
    """``group.max.session.timeout.ms``"""
    initial_rebalance_delay_ms: int = 3_000
    """``group.initial.rebalance.delay.ms``"""
    max_size: int = 2**31 - 1
    """``group.max.size``"""


def _err(code: ClassicErrorCode, message: str) -> ClassicRequestError:
    return ClassicRequestError(code, message)


def _default_member_id(client_id: str) -> str:
    return f"{client_id}-{uuid.uuid4()}"


class _Changes:
    """Records and completions gathered while one call mutates."""

    __slots__ = ("completions", "records")

    def __init__(self) -> None:
        self.records: list[CoordinatorRecord] = []
        self.completions: list[Completion] = []

    def result(
        self, response: JoinResponse | SyncResponse | None = None, *, member_id: str = ""
    ) -> ClassicResult:
        return ClassicResult(
            records=tuple(self.records),
            completions=tuple(self.completions),
            response=response,
            member_id=member_id,
        )


class ClassicGroupCoordinator(ClassicGroupAdmin):
    """All classic groups of this broker, keyed by group id."""

    def __init__(
        self,
        config: ClassicConfig | None = None,
        *,
        new_member_id: Callable[[str], str] = _default_member_id,
    ) -> None:
        self.config = config or ClassicConfig()
        self._new_member_id = new_member_id
        self._groups: dict[str, ClassicGroup] = {}
        self._deadlines: list[tuple[int, int, str, str]] = []

    # ----------------------------------------------------------------- JoinGroup

    def join(self, request: JoinRequest, *, now_ms: int) -> ClassicResult:
        gid, mid, iid = request.group_id, request.member_id, request.group_instance_id
        if not gid:
            raise _err(E.INVALID_GROUP_ID, "group id must not be empty")
        cfg = self.config
        if not cfg.min_session_timeout_ms <= request.session_timeout_ms <= cfg.max_session_timeout_ms:
            raise _err(
                E.INVALID_SESSION_TIMEOUT,
                f"session timeout {request.session_timeout_ms} ms is outside "
                f"[{cfg.min_session_timeout_ms}, {cfg.max_session_timeout_ms}]",
            )
        if not request.protocol_type or not request.protocols:
            raise _err(E.INCONSISTENT_GROUP_PROTOCOL, "protocol type and protocols must be set")
        group = self._groups.get(gid)
        if group is None and mid:
            raise _err(E.UNKNOWN_MEMBER_ID, f"member {mid} is not in group {gid}")
        if group is not None:
            self._check_protocols(group, request, excluding=mid or None)
        changes = _Changes()
        if not mid:
            if group is not None and iid is not None and iid in group.static:
                return self._rejoin_static(group, request, now_ms, changes)
            size = 0 if group is None else len(group.members) + len(group.pending)
            if size >= cfg.max_size:
                raise _err(E.GROUP_MAX_SIZE_REACHED, f"group {gid} has reached its maximum size")
            group = self.ensure_group(gid)
            new_id = self._new_member_id(request.client_id)
            if iid is None and request.require_known_member_id:
                deadline = now_ms + request.session_timeout_ms
                group.pending[new_id] = deadline
                self._push(deadline, _PENDING, gid, new_id)
                return changes.result(JoinResponse(error=E.MEMBER_ID_REQUIRED, member_id=new_id))
            self._add_member(group, new_id, request, now_ms, changes)
            return changes.result(member_id=new_id)
        assert group is not None
        if mid in group.pending:
            del group.pending[mid]
            self._add_member(group, mid, request, now_ms, changes)
            return changes.result(member_id=mid)
        member = self._validate_member(group, mid, iid)
        changed = member.protocols != request.protocols or member.protocol_type != request.protocol_type
        if group.state is S.PREPARING_REBALANCE:
            self._update_member(member, request)
            self._park_join(member)
            self._maybe_complete_join(group, now_ms, changes)
            return changes.result(member_id=mid)
        if group.state is S.COMPLETING_REBALANCE and not changed:
            return changes.result(self._join_response(group, member))
        if group.state is S.STABLE and not changed and mid != group.leader:
            self._touch(group, member, now_ms)
            return changes.result(self._join_response(group, member, members=False))
        if group.state is S.EMPTY:
            raise _err(E.UNKNOWN_MEMBER_ID, f"member {mid} is not in group {gid}")
        self._update_member(member, request)
        self._prepare_rebalance(group, now_ms, changes)
        self._park_join(member)
        self._maybe_complete_join(group, now_ms, changes)
        return changes.result(member_id=mid)

    def _check_protocols(self, group: ClassicGroup, request: JoinRequest, *, excluding: str | None) -> None:
        candidates = group.candidate_protocols(excluding=excluding)
        if candidates is None:
            return
        if group.protocol_type != request.protocol_type or not (
            candidates & {p.name for p in request.protocols}
        ):
            raise _err(
                E.INCONSISTENT_GROUP_PROTOCOL,
                f"group {group.group_id} uses protocol type {group.protocol_type!r} with "
                f"protocols {sorted(candidates)}",
            )

    def _validate_member(self, group: ClassicGroup, mid: str, iid: str | None) -> ClassicMember:
        if iid is not None:
            owner = group.static.get(iid)
            if owner is None and mid not in group.members:
                raise _err(E.UNKNOWN_MEMBER_ID, f"instance {iid} is not in group {group.group_id}")
            if owner is not None and owner != mid:
                raise _err(
                    E.FENCED_INSTANCE_ID, f"instance {iid} is member {owner} of {group.group_id}, not {mid}"
                )
        member = group.members.get(mid)
        if member is None:
            raise _err(E.UNKNOWN_MEMBER_ID, f"member {mid} is not in group {group.group_id}")
        return member

    def _add_member(
        self, group: ClassicGroup, mid: str, request: JoinRequest, now_ms: int, changes: _Changes
    ) -> None:
        member = ClassicMember(
            member_id=mid,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
        )
        if not group.members:
            group.protocol_type = request.protocol_type
        group.members[mid] = member
        if request.group_instance_id is not None:
            group.static[request.group_instance_id] = mid
        if group.leader is None or group.leader not in group.members:
            group.leader = mid
        self._park_join(member)
        if group.state is S.PREPARING_REBALANCE:
            group.new_member_added = True
        else:
            self._prepare_rebalance(group, now_ms, changes)
        self._maybe_complete_join(group, now_ms, changes)

    def _rejoin_static(
        self, group: ClassicGroup, request: JoinRequest, now_ms: int, changes: _Changes
    ) -> ClassicResult:
        """A known group.instance.id joins with a new member id: it replaces the old member; a
        Stable group with unchanged protocols keeps its generation and assignment (no rebalance)."""
        assert request.group_instance_id is not None
        old_id = group.static[request.group_instance_id]
        member = group.members.pop(old_id)
        fenced = E.FENCED_INSTANCE_ID
        if member.awaiting_join:
            changes.completions.append(
                JoinCompleted(
                    group_id=group.group_id,
                    member_id=old_id,
                    response=JoinResponse(error=fenced, member_id=old_id),
                )
            )
        if member.awaiting_sync:
            changes.completions.append(
                SyncCompleted(group_id=group.group_id, member_id=old_id, response=SyncResponse(error=fenced))
            )
        member.awaiting_join = member.awaiting_sync = False
        new_id = self._new_member_id(request.client_id)
        member.member_id = new_id
        group.members[new_id] = member
        group.static[request.group_instance_id] = new_id
        if group.leader == old_id:
            group.leader = new_id
        changed = member.protocols != request.protocols
        self._update_member(member, request)
        if group.state is S.STABLE and not changed:
            self._touch(group, member, now_ms)
            leader = new_id == group.leader
            return changes.result(self._join_response(group, member, members=leader, skip_assignment=leader))
        if group.state is not S.PREPARING_REBALANCE:
            self._prepare_rebalance(group, now_ms, changes)
        self._park_join(member)
        self._maybe_complete_join(group, now_ms, changes)
        return changes.result(member_id=new_id)

    @staticmethod
    def _update_member(member: ClassicMember, request: JoinRequest) -> None:
        member.protocol_type = request.protocol_type
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.client_id, member.client_host = request.client_id, request.client_host

    @staticmethod
    def _park_join(member: ClassicMember) -> None:
        member.awaiting_join = True
        member.session_deadline = None

    def _join_response(
        self,
        group: ClassicGroup,
        member: ClassicMember,
        *,
        members: bool | None = None,
        skip_assignment: bool = False,
    ) -> JoinResponse:
        is_leader = member.member_id == group.leader
        return JoinResponse(
            generation=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader or "",
            skip_assignment=skip_assignment,
            member_id=member.member_id,
            members=group.join_members() if (is_leader if members is None else members) else (),
        )

    # ----------------------------------------------------------------- rebalance phases

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int, changes: _Changes) -> None:
        if group.state is S.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                m.pending_sync = False
                if m.awaiting_sync:
                    m.awaiting_sync = False
                    changes.completions.append(
                        SyncCompleted(
                            group_id=group.group_id,
                            member_id=m.member_id,
                            response=SyncResponse(error=E.REBALANCE_IN_PROGRESS),
                        )
                    )
                    self._touch(group, m, now_ms)
        timeout = group.rebalance_timeout_ms()
        delay = self.config.initial_rebalance_delay_ms
        if group.state is S.EMPTY and delay > 0:
            group.initial_delay = True
            group.initial_delay_cap = now_ms + timeout
            group.new_member_added = False
            deadline = now_ms + min(delay, timeout)
        else:
            group.initial_delay = False
            deadline = now_ms + timeout
        group.state = S.PREPARING_REBALANCE
        group.phase_deadline = deadline
        self._push(deadline, _PHASE, group.group_id, "")

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int, changes: _Changes) -> None:
        if group.state is not S.PREPARING_REBALANCE:
            return
        if group.members and (group.initial_delay or not group.all_joined()):
            return
        self._complete_join(group, now_ms, changes)

    def _complete_join(self, group: ClassicGroup, now_ms: int, changes: _Changes) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start a generation."""
        for m in [m for m in group.members.values() if not m.awaiting_join and m.group_instance_id is None]:
            self._drop(group, m.member_id, changes)
        group.pending.clear()
        group.initial_delay = False
        group.generation += 1
        if not group.members:
            group.state = S.EMPTY
            group.protocol_name = None
            group.leader = None
            group.phase_deadline = None
            self._record(group, changes)
            return
        group.protocol_name = self._select_protocol(group)
        if group.leader not in group.members or not group.members[group.leader].awaiting_join:
            joined = [m.member_id for m in group.members.values() if m.awaiting_join]
            group.leader = joined[0] if joined else next(iter(group.members))
        group.state = S.COMPLETING_REBALANCE
        deadline = now_ms + group.rebalance_timeout_ms()
        group.phase_deadline = deadline
        self._push(deadline, _PHASE, group.group_id, "")
        self._record(group, changes)
        for m in group.members.values():
            m.pending_sync = True
            if m.awaiting_join:
                m.awaiting_join = False
                changes.completions.append(
                    JoinCompleted(
                        group_id=group.group_id, member_id=m.member_id, response=self._join_response(group, m)
                    )
                )
            self._touch(group, m, now_ms)

    @staticmethod
    def _select_protocol(group: ClassicGroup) -> str:
        candidates = group.candidate_protocols()
        if not candidates:
            raise ClassicStateError(f"members of {group.group_id} share no protocol")
        votes: dict[str, int] = dict.fromkeys(candidates, 0)
        for m in group.members.values():
            for p in m.protocols:
                if p.name in candidates:
                    votes[p.name] += 1
                    break
        leader = group.members.get(group.leader or "") or next(iter(group.members.values()))
        preference = {p.name: i for i, p in enumerate(leader.protocols)}
        return max(candidates, key=lambda n: (votes[n], -preference.get(n, 0)))

    # ----------------------------------------------------------------- SyncGroup

    def sync(self, request: SyncRequest, *, now_ms: int) -> ClassicResult:
        group = self._groups.get(request.group_id)
        if group is None or group.state is S.EMPTY:
            raise _err(E.UNKNOWN_MEMBER_ID, f"member {request.member_id} is not in group {request.group_id}")
        member = self._validate_member(group, request.member_id, request.group_instance_id)
        if request.generation != group.generation:
            raise _err(
                E.ILLEGAL_GENERATION, f"generation {request.generation} is not the group's {group.generation}"
            )
        if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
            request.protocol_name is not None and request.protocol_name != group.protocol_name
        ):
            raise _err(E.INCONSISTENT_GROUP_PROTOCOL, "protocol type or name does not match the group's")
        if group.state is S.PREPARING_REBALANCE:
            raise _err(E.REBALANCE_IN_PROGRESS, f"group {group.group_id} is rebalancing")
        changes = _Changes()
        member.pending_sync = False
        if group.state is S.STABLE:
            self._touch(group, member, now_ms)
            return changes.result(self._sync_response(group, member))
        if member.member_id != group.leader:
            member.awaiting_sync = True
            member.session_deadline = None
            return changes.result(member_id=member.member_id)
        assignments = dict(request.assignments)
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        group.state = S.STABLE
        group.phase_deadline = None
        self._record(group, changes)
        for m in group.members.values():
            if m.awaiting_sync:
                m.awaiting_sync = False
                changes.completions.append(
                    SyncCompleted(
                        group_id=group.group_id, member_id=m.member_id, response=self._sync_response(group, m)
                    )
                )
                self._touch(group, m, now_ms)
        self._touch(group, member, now_ms)
        return changes.result(self._sync_response(group, member))

    @staticmethod
    def _sync_response(group: ClassicGroup, member: ClassicMember) -> SyncResponse:
        return SyncResponse(
            protocol_type=group.protocol_type, protocol_name=group.protocol_name, assignment=member.assignment
        )

    # ----------------------------------------------------------------- Heartbeat

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        *,
        group_instance_id: str | None = None,
        now_ms: int,
    ) -> ClassicErrorCode:
        """NONE, or REBALANCE_IN_PROGRESS while the join phase runs (the member must rejoin)."""
        group = self._groups.get(group_id)
        if group is None or group.state is S.EMPTY:
            raise _err(E.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {group_id}")
        member = self._validate_member(group, member_id, group_instance_id)
        if generation != group.generation:
            raise _err(E.ILLEGAL_GENERATION, f"generation {generation} is not the group's {group.generation}")
        if member.session_deadline is not None:
            self._touch(group, member, now_ms)
        return E.REBALANCE_IN_PROGRESS if group.state is S.PREPARING_REBALANCE else E.NONE

    # ----------------------------------------------------------------- LeaveGroup

    def leave(self, group_id: str, members: tuple[LeavingMember, ...], *, now_ms: int) -> ClassicResult:
        """Remove members (LeaveGroup v3+ batches them); one error code per member."""
        group = self._groups.get(group_id)
        changes = _Changes()
        errors: list[ClassicErrorCode] = []
        for leaving in members:
            if group is None:
                errors.append(E.UNKNOWN_MEMBER_ID)
                continue
            mid, iid = leaving.member_id, leaving.group_instance_id
            if iid is not None:
                owner = group.static.get(iid)
                if owner is None:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
                if mid and mid != owner:
                    errors.append(E.FENCED_INSTANCE_ID)
                    continue
                mid = owner
            if mid in group.pending:
                del group.pending[mid]
                self._maybe_complete_join(group, now_ms, changes)
                errors.append(E.NONE)
            elif mid in group.members:
                self._remove(group, mid, now_ms, changes)
                errors.append(E.NONE)
            else:
                errors.append(E.UNKNOWN_MEMBER_ID)
        result = changes.result()
        return ClassicResult(records=result.records, completions=result.completions, errors=tuple(errors))

    def _remove(self, group: ClassicGroup, mid: str, now_ms: int, changes: _Changes) -> None:
        self._drop(group, mid, changes)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms, changes)
        self._maybe_complete_join(group, now_ms, changes)

    def _drop(self, group: ClassicGroup, mid: str, changes: _Changes) -> None:
        member = group.members.pop(mid)
        if member.group_instance_id is not None and group.static.get(member.group_instance_id) == mid:
            del group.static[member.group_instance_id]
        gone = E.UNKNOWN_MEMBER_ID
        if member.awaiting_join:
            changes.completions.append(
                JoinCompleted(
                    group_id=group.group_id, member_id=mid, response=JoinResponse(error=gone, member_id=mid)
                )
            )
        if member.awaiting_sync:
            changes.completions.append(
                SyncCompleted(group_id=group.group_id, member_id=mid, response=SyncResponse(error=gone))
            )
        if group.leader == mid:
            group.leader = next(iter(group.members), None)

    # ----------------------------------------------------------------- timers

    def loaded(self, now_ms: int) -> None:
        """After replay: every member of a group restored Stable gets a fresh session from now."""
        for group in self._groups.values():
            for member in group.members.values():
                self._touch(group, member, now_ms)

    def _touch(self, group: ClassicGroup, member: ClassicMember, now_ms: int) -> None:
        member.session_deadline = now_ms + member.session_timeout_ms
        self._push(member.session_deadline, _MEMBER, group.group_id, member.member_id)

    def _push(self, deadline: int, kind: int, gid: str, mid: str) -> None:
        heapq.heappush(self._deadlines, (deadline, kind, gid, mid))

    def _live(self, deadline: int, kind: int, gid: str, mid: str) -> bool:
        group = self._groups.get(gid)
        if group is None:
            return False
        if kind == _MEMBER:
            member = group.members.get(mid)
            return member is not None and member.session_deadline == deadline
        if kind == _PENDING:
            return group.pending.get(mid) == deadline
        return group.phase_deadline == deadline

    def next_deadline(self) -> int | None:
        """The earliest deadline (ms) at which ``expire`` has something to do."""
        heap = self._deadlines
        while heap:
            if self._live(*heap[0]):
                return heap[0][0]
            heapq.heappop(heap)
        return None

    def expire(self, now_ms: int) -> ClassicResult:
        """Expire member sessions, unanswered member ids and rebalance timeouts due by ``now_ms``."""
        changes = _Changes()
        while (deadline := self.next_deadline()) is not None and deadline <= now_ms:
            _, kind, gid, mid = heapq.heappop(self._deadlines)
            group = self._groups[gid]
            if kind == _MEMBER:
                self._remove(group, mid, now_ms, changes)
            elif kind == _PENDING:
                del group.pending[mid]
                self._maybe_complete_join(group, now_ms, changes)
            elif group.state is S.PREPARING_REBALANCE:
                self._join_phase_timeout(group, now_ms, changes)
            elif group.state is S.COMPLETING_REBALANCE:
                group.phase_deadline = None
                for m in [m for m in group.members.values() if m.pending_sync]:
                    self._remove(group, m.member_id, now_ms, changes)
        return changes.result()

    def _join_phase_timeout(self, group: ClassicGroup, now_ms: int, changes: _Changes) -> None:
        if group.initial_delay and group.new_member_added and now_ms < group.initial_delay_cap:
            group.new_member_added = False
            deadline = min(now_ms + self.config.initial_rebalance_delay_ms, group.initial_delay_cap)
            group.phase_deadline = deadline
            self._push(deadline, _PHASE, group.group_id, "")
            return
        group.initial_delay = False
        self._complete_join(group, now_ms, changes)

    # ----------------------------------------------------------------- records

    def _record(self, group: ClassicGroup, changes: _Changes) -> None:
        changes.records.append(
            group_record(
                group.group_id,
                ClassicGroupValue(
                    protocol_type=group.protocol_type or "",
                    generation=group.generation,
                    protocol_name=group.protocol_name or "",
                    leader=group.leader or "",
                    members=tuple(
                        ClassicMemberValue(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            session_timeout_ms=m.session_timeout_ms,
                            rebalance_timeout_ms=m.rebalance_timeout_ms,
                            metadata=m.metadata(group.protocol_name),
                            assignment=m.assignment,
                        )
                        for m in group.members.values()
                    )
                    if group.state is S.STABLE
                    else (),
                ),
            )
        )
