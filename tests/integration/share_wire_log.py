"""Records the share-group requests a client sends to the real broker, and reads share-partition state.

It wraps the broker's own ShareGroupHeartbeat / ShareFetch / ShareAcknowledge handlers (they still
answer; nothing is simulated) so tests can assert the sequence a client sent.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from shareq.embedded import EmbeddedBroker
from shareq.persister.in_log_recovery import scan_forward
from shareq.share import RecordState
from shareq.share.persister import SharePartitionKey

AVAILABLE, ACQUIRED, TERMINAL = "available", "acquired", "terminal"
ARCHIVING = "archiving"
SHARE_APIS = {76: "heartbeat", 78: "fetch", 79: "ack"}


@dataclass
class ShareWireLog:
    broker: EmbeddedBroker
    calls: list[tuple[str, int, Any]] = field(default_factory=list)
    acks: list[tuple[uuid.UUID, int, int, int, tuple[int, ...], bool]] = field(default_factory=list)

    def install(self) -> ShareWireLog:
        table = self.broker.broker.handlers
        for api_key, kind in SHARE_APIS.items():
            versions = table.versions[api_key]
            handler = table.get(api_key)
            assert handler is not None
            self.broker.call(table.register, api_key, versions, self._wrap(kind, handler))
        return self

    def _wrap(self, kind: str, handler: Any) -> Any:
        def recording(request: Any, ctx: Any) -> Any:
            if kind == "heartbeat":
                detail: Any = (request.member_id, request.subscribed_topic_names)
                self.calls.append((kind, request.member_epoch, detail))
            else:
                self.calls.append((kind, request.share_session_epoch, request))
                renew = bool(getattr(request, "is_renew_ack", False))
                for t in request.topics:
                    for p in t.partitions:
                        for b in p.acknowledgement_batches:
                            self.acks.append(
                                (
                                    t.topic_id,
                                    p.partition_index,
                                    b.first_offset,
                                    b.last_offset,
                                    tuple(b.acknowledge_types),
                                    renew,
                                )
                            )
            return handler(request, ctx)

        return recording

    def states(self, group: str, tid: uuid.UUID, part: int) -> dict[int, str]:
        """Offset -> state for every offset of the log; offsets below the SPSO are ``terminal``.

        The in-log persister's share-state records are not records of the share-partition: above
        the SPSO they are left out (never acquired, they have no state of their own)."""

        def read() -> dict[int, str]:
            share = self.broker.broker.share
            assert share is not None
            sp = share.partitions.cached(SharePartitionKey(group_id=group, topic_id=tid, partition=part))
            info = self.broker.broker.topics.by_id(tid)
            assert info is not None
            plog = self.broker.broker.partition(info.name, part)
            assert plog is not None
            end = plog.log.log_end_offset
            out = {off: AVAILABLE for off in range(end)}
            if sp is None:
                return out
            for off in range(min(sp.spso, end)):
                out[off] = TERMINAL
            state_records, _ = scan_forward(plog.log, sp.spso, end)
            for off, _ in state_records:
                out.pop(off, None)
            for run in sp.runs():
                name = (
                    TERMINAL
                    if run.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
                    else run.state.name.lower()
                )
                for off in range(run.first_offset, run.last_offset + 1):
                    out[off] = name
            return out

        result: dict[int, str] = self.broker.call(read)
        return result
