"""Inputs and outputs of the share-partition engine: frozen values, compared directly in tests."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from shareq.protocol.acknowledge_type import AcknowledgeType
from shareq.share.persister import WriteStateParams
from shareq.share.record_state import RecordState

if TYPE_CHECKING:
    from shareq.share.backoff import RedeliveryBackoff


class AcquireMode(enum.Enum):
    """``share.acquire.mode``: whole log batches (may exceed max_records) or exactly max_records."""

    BATCH_OPTIMIZED = "batch_optimized"
    RECORD_LIMIT = "record_limit"


class ResetPolicy(enum.Enum):
    """``share.auto.offset.reset``: where a share-partition without persisted state starts."""

    EARLIEST = "earliest"
    LATEST = "latest"
    BY_DURATION = "by_duration"


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareConfig:
    """Group configuration the engine obeys; replaceable at runtime for later acquisitions."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000
    dlq_enabled: bool = False
    renew_enabled: bool = True
    """``share.renew.acknowledge.enable``: off, a RENEW acknowledgement is refused."""
    persist_retry_backoff_ms: int = 1_000
    """Delay before a lock expiry or member release whose write failed is tried again."""
    backoff: RedeliveryBackoff | None = None
    """Redelivery backoff (None: records come back at once, as Kafka's)."""
    delay_ceiling_ms: int = 900_000
    """The longest delay a client may ask for on a RELEASE (longer ones are capped)."""
    window_count: bool = False
    """``count`` window mode: only AVAILABLE, ACQUIRED and ARCHIVING records count against
    ``max_record_locks`` (bounded by a span guard); off, Kafka's span rule."""
    durable_counts: bool = False
    """Acquisitions are written (their delivery counts survive a crash) before they are handed out."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AcquiredRecords:
    """One AcquiredRecords entry of a ShareFetch response."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingWrite:
    """A durable write the shell must perform, then report with ``complete(handle, ok, now)``."""

    handle: int
    params: WriteStateParams


@dataclass(frozen=True, slots=True, kw_only=True)
class AcquireResult:
    """What one acquire leased; ``lock_deadline`` is absolute (ms) or None if nothing was acquired.

    ``write`` is set when records that vanished from the log (compaction) were found and must be
    archived durably.
    """

    records: tuple[AcquiredRecords, ...]
    acquired_count: int
    lock_deadline: int | None
    write: PendingWrite | None = None
    counts: PendingWrite | None = None
    """With crash-durable counts: the write of the acquired records' delivery counts, which must
    be durable before they are handed out (completed like any write; it changes no state)."""


class AcknowledgementBatch(NamedTuple):
    """``first..last`` acknowledged with one type, or one type per offset.

    A tuple: the server builds one per wire batch, hundreds a request when every tenth record is
    rejected (``tuple.__new__`` with the three fields costs a fraction of a keyword constructor)."""

    first_offset: int
    last_offset: int
    types: tuple[AcknowledgeType, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AcknowledgeResult:
    """``write`` is None when nothing needs persisting (renewals only); then it already applied."""

    write: PendingWrite | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CompleteResult:
    """Outcome of ``complete``: ``writes`` are follow-ups (a rolled-back ack whose lock had lapsed,
    or the SPSO a commit moved past what the writes in flight together made durable);
    ``records_released`` tells the shell that parked fetches may now find AVAILABLE records;
    ``archiving`` that records became ARCHIVING, durably: the dead-letter writer has work."""

    committed: bool
    spso: int
    records_released: bool
    writes: tuple[PendingWrite, ...] = ()
    archiving: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkerResult:
    """Outcome of a transaction marker on one share-partition.

    ``resolved`` counts the staged records the marker settled; ``write`` is the release of aborted
    records whose owner or lock is gone (it runs like a lock expiry); ``archiving`` tells the shell
    the dead-letter writer has work (a committed REJECT with the DLQ on)."""

    resolved: int
    spso: int
    write: PendingWrite | None = None
    archiving: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RunView:
    """An introspection view of one run (adjacent equal runs merged)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    member: str | None
    producer_id: int | None = None
    """The producer id of the transaction holding a TX_PENDING run."""
    available_at: int = 0
    """An AVAILABLE run's redelivery due time (epoch ms; 0: acquirable now)."""
