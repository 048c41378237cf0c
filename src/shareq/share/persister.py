"""The persister contract between share-partitions and durable share state.

A share-partition never writes durable state itself (persist before commit): it hands a
``WriteStateParams`` to a ``Persister`` and commits its in-memory transition only once the write
has succeeded. The shapes follow Kafka's share-state RPCs (InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState, ReadShareGroupStateSummary),
so the built-in persister and a remote one are interchangeable.
"""

from __future__ import annotations

import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

# Delivery states as persisted (the same byte ids as RecordState): only these three are durable;
# ACQUIRED is never written (a lease does not survive a restart) and ARCHIVING is written as-is
# so a dead-letter hand-off can resume after a crash.
STATE_AVAILABLE = 0
STATE_ACKNOWLEDGED = 2
STATE_ARCHIVING = 3
STATE_ARCHIVED = 4

NO_START_OFFSET = -1
"""``start_offset`` of a write that does not move the SPSO (a ShareUpdate's "not changing")."""

UNINITIALIZED_DELIVERY_COMPLETE_COUNT = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class SharePartitionKey:
    """Identity of one share-partition: a group's view of one topic-partition.

    The hash is computed once and kept: every state write looks the key up in several dicts,
    and hashing a uuid inside a dataclass each time costs more than the lookup itself.
    """

    group_id: str
    topic_id: uuid.UUID
    partition: int
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash((self.group_id, self.topic_id, self.partition))
            object.__setattr__(self, "_hash", h)
        return h

    def __reduce__(self) -> tuple[Any, tuple[str, uuid.UUID, int]]:
        # Without the cached hash: string hashes differ between processes.
        return _share_partition_key, (self.group_id, self.topic_id, self.partition)


def _share_partition_key(group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartitionKey:
    return SharePartitionKey(group_id=group_id, topic_id=topic_id, partition=partition)


class StateBatch(NamedTuple):
    """A run of offsets ``first_offset..last_offset`` (inclusive) sharing one state and count.

    A tuple, in the order of the wire's state batch: a write with a REJECT every tenth record
    carries hundreds, which the engine builds and the share coordinator packs as they are."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


_tuple_new = tuple.__new__


def state_batch(first_offset: int, last_offset: int, delivery_state: int, delivery_count: int) -> StateBatch:
    """``StateBatch(...)`` without the named tuple's keyword ``__new__`` in Python: for the
    engine's writes and the coordinator's replay, which build them by the hundred. Same value."""
    return _tuple_new(StateBatch, (first_offset, last_offset, delivery_state, delivery_count))


class RedeliveryDelay(NamedTuple):
    """AVAILABLE offsets ``first_offset..last_offset`` not acquirable before ``due_ms`` (epoch ms):
    a redelivery backoff, durable so that a restart honours the rest of the delay."""

    first_offset: int
    last_offset: int
    due_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingTxnBatch:
    """Offsets ``first_offset..last_offset`` staged (TX_PENDING) by transaction ``producer_id``.

    ``delivery_state`` is what the transaction's COMMIT marker makes of them (2 ACKNOWLEDGED; 3
    ARCHIVING for a REJECT with a dead-letter queue; 4 ARCHIVED), ``ack_type`` the staged
    acknowledge type (1 ACCEPT, 3 REJECT, 0 GAP); an ABORT marker drops the entry.
    """

    producer_id: int
    producer_epoch: int
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int
    ack_type: int


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteStateParams:
    """A durable change to one share-partition.

    ``state_batches`` are the runs that changed (a delta); ``start_offset`` is the new SPSO or
    ``NO_START_OFFSET``. A writer whose ``state_epoch`` is older than the stored one is fenced.
    """

    key: SharePartitionKey
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...]
    staged: tuple[PendingTxnBatch, ...] = ()
    """Acknowledgements a transaction stages (written as a transactional update: the transaction's
    marker resolves them); a staging write carries nothing else."""
    delays: tuple[RedeliveryDelay, ...] = ()
    """Due times of AVAILABLE records among ``state_batches`` (ascending, disjoint); the offsets of
    ``state_batches`` that none covers have none (any earlier one is gone)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareState:
    """The whole durable state of one share-partition, as read back."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...]
    pending_txn_batches: tuple[PendingTxnBatch, ...] = ()
    """Staged acknowledgements whose transaction has not ended (TX_PENDING after a restart)."""
    delays: tuple[RedeliveryDelay, ...] = ()
    """Redelivery due times of AVAILABLE records (ascending, disjoint)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareStateSummary:
    """What lag computation needs (KIP-1226) without the state batches."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int


class PersisterError(Exception):
    """A persister operation failed; ``error_code`` is the Kafka error code to surface."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


async def refused(error: Exception) -> None:
    """What ``write_state`` returns for a write it could not queue: the error, raised when awaited
    (like a failed write), so callers handle both in one place."""
    raise error


class Persister(Protocol):
    """Durable share state. Every method completes only once its effect is durable.

    Failures raise ``PersisterError`` (for example FENCED_STATE_EPOCH,
    COORDINATOR_LOAD_IN_PROGRESS, KAFKA_STORAGE_ERROR).
    """

    async def initialize_state(
        self, key: SharePartitionKey, *, state_epoch: int, start_offset: int
    ) -> None: ...

    async def read_state(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareState | None:
        """The stored state, or None when the share-partition was never initialized."""
        ...

    def write_state(self, params: WriteStateParams) -> Coroutine[Any, Any, None]:
        """Queue ``params`` at the call, then await its durability.

        Writes of one share-partition take effect in the order of the calls, not of the awaits:
        each may move the start offset, so a write queued late by a task that ran late could
        move it back over records another write settled.
        """
        ...

    async def delete_state(self, key: SharePartitionKey) -> None: ...

    async def read_state_summary(self, key: SharePartitionKey) -> ShareStateSummary | None: ...

    async def end_transaction(self, producer_id: int, producer_epoch: int, *, commit: bool) -> None:
        """Make a transaction's COMMIT or ABORT durable for everything it staged (KIP-1289)."""
        ...
