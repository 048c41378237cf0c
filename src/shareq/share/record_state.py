"""Record delivery states and the transitions between them, as data.

The whole rule lives in the tables below: ACKNOWLEDGED and ARCHIVED are sinks, AVAILABLE only goes to
ACQUIRED, nothing transitions to itself. TX_PENDING (KIP-1289) is one more row: an acknowledgement
staged by a transaction, entered only from ACQUIRED and left only through the transaction's COMMIT
marker (to the acknowledgement's target) or ABORT marker (back to ACQUIRED, then released as usual).
The ids 0-4 are the wire/persisted ids of Kafka's ``RecordState``; TX_PENDING (5) is never persisted
under that id: staged acknowledgements are durable as transactional updates of the state log.
"""

from __future__ import annotations

import enum

from shareq.protocol.acknowledge_type import AcknowledgeType
from shareq.share.errors import IllegalStateTransition


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3
    ARCHIVED = 4
    TX_PENDING = 5


TRANSITIONS: dict[RecordState, frozenset[RecordState]] = {
    RecordState.AVAILABLE: frozenset({RecordState.ACQUIRED}),
    RecordState.ACQUIRED: frozenset(
        {
            RecordState.AVAILABLE,
            RecordState.ACKNOWLEDGED,
            RecordState.ARCHIVING,
            RecordState.ARCHIVED,
            RecordState.TX_PENDING,
        }
    ),
    RecordState.ACKNOWLEDGED: frozenset(),
    RecordState.ARCHIVING: frozenset({RecordState.ARCHIVED}),
    RecordState.ARCHIVED: frozenset(),
    RecordState.TX_PENDING: frozenset(
        {RecordState.ACKNOWLEDGED, RecordState.ARCHIVING, RecordState.ARCHIVED, RecordState.ACQUIRED}
    ),
}
"""Transitions a client, a lock or a transaction marker can cause."""

TXN_ACK_TYPES: frozenset[AcknowledgeType] = frozenset(
    {AcknowledgeType.ACCEPT, AcknowledgeType.REJECT, AcknowledgeType.GAP}
)
"""Acknowledge types a transaction may stage (GAP for control-record offsets under read_committed)."""

FORCED_ARCHIVE_FROM: frozenset[RecordState] = frozenset({RecordState.AVAILABLE})
"""States the engine itself may archive outside the table: records that vanished from the log
(compaction) are archived so they do not pin the SPSO, and records loaded with their deliveries
used up are diverted."""

FORCED_ARCHIVE_TO: frozenset[RecordState] = frozenset({RecordState.ARCHIVED, RecordState.ARCHIVING})
"""What a forced archive may give: ARCHIVED, or ARCHIVING for the dead-letter queue (a record loaded
with its deliveries used up, under crash-durable counts)."""

TERMINAL: frozenset[RecordState] = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})

ACK_TARGET: dict[AcknowledgeType, RecordState] = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
    AcknowledgeType.RENEW: RecordState.ACQUIRED,
}
"""Acknowledge type -> intended state (RELEASE is subject to the diversion rule)."""


def validate_transition(old: RecordState, new: RecordState, *, forced_archive: bool = False) -> None:
    """Raise ``IllegalStateTransition`` unless ``old -> new`` is allowed."""
    if new in TRANSITIONS[old]:
        return
    if forced_archive and new in FORCED_ARCHIVE_TO and old in FORCED_ARCHIVE_FROM:
        return
    raise IllegalStateTransition(f"illegal record-state transition {old.name} -> {new.name}")


def release_target(delivery_count: int, delivery_count_limit: int, *, dlq_enabled: bool) -> RecordState:
    """Where a record being made AVAILABLE goes: AVAILABLE, or archived once its deliveries ran out."""
    if delivery_count < delivery_count_limit:
        return RecordState.AVAILABLE
    return RecordState.ARCHIVING if dlq_enabled else RecordState.ARCHIVED


def ack_target(ack: AcknowledgeType, *, dlq_enabled: bool) -> RecordState:
    """Where an acknowledgement takes a record (applied now, or when the transaction that staged it
    commits): ``ACK_TARGET``'s state, except that REJECT goes ARCHIVING when there is a DLQ (the
    dead-letter writer archives it after). RELEASE is then subject to the diversion rule."""
    if ack is AcknowledgeType.REJECT and dlq_enabled:
        return RecordState.ARCHIVING
    return ACK_TARGET[ack]


ACK_TARGETS: dict[bool, dict[AcknowledgeType, RecordState]] = {
    dlq: {ack: ack_target(ack, dlq_enabled=dlq) for ack in AcknowledgeType} for dlq in (False, True)
}
"""``ack_target`` as a table per ``dlq_enabled`` (looked up per run on the acknowledge path)."""
