"""Idempotent-producer state of one partition: epochs and the last five batches per producer id.

Kafka's rules (ProducerStateManager / ProducerAppendInfo), kept here in one place:

- a batch whose (epoch, first sequence, last sequence) matches one of the producer's last five
  batches is a retried duplicate: the log answers with the original offsets and writes nothing;
- an epoch below the known one is fenced (:class:`InvalidProducerEpochError`);
- a new epoch must start at sequence 0, and within an epoch the first sequence of a batch must
  follow the last one (wrapping at 2**31), else :class:`OutOfOrderSequenceError`;
- a producer id never seen (or whose data retention removed) may start at any sequence.

Open transactions and aborted transactions (``transactions.py``) ride in the same snapshot.

The state is rebuilt on open from batch headers alone, or loaded from the snapshot written on
close; :meth:`ProducerStateManager.check` never mutates, :meth:`ProducerStateManager.update` commits.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass

from .errors import InvalidProducerEpochError, OutOfOrderSequenceError
from .transactions import PartitionTxnState

BATCHES_PER_PRODUCER = 5
_MAX_SEQUENCE = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Where one idempotent batch landed."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


class ProducerEntry:
    """One producer id's epoch and last batches (oldest first)."""

    __slots__ = ("batches", "epoch")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_PER_PRODUCER)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _fields(b: BatchMetadata) -> tuple[int, int, int, int]:
    return (b.first_seq, b.last_seq, b.first_offset, b.last_offset)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (last_seq == _MAX_SEQUENCE and next_seq == 0)


class ProducerStateManager:
    """All producer ids that wrote idempotent batches to one partition."""

    __slots__ = ("producers", "txns")

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.txns = PartitionTxnState()

    def __len__(self) -> int:
        return len(self.producers)

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """Validate an incoming batch; return the original batch if it is a duplicate.

        Raises :class:`InvalidProducerEpochError` or :class:`OutOfOrderSequenceError`.
        """
        entry = self.producers.get(producer_id)
        if entry is None:
            return None
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id} wrote with epoch {epoch}, but epoch {entry.epoch} is current"
            )
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"producer {producer_id} started epoch {epoch} at sequence {first_seq}, expected 0"
                )
            return None
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        if entry.batches and not _in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"producer {producer_id} epoch {epoch}: sequence {first_seq} does not follow {entry.last_seq}"
            )
        return None

    def update(self, producer_id: int, epoch: int, batch: BatchMetadata | None) -> None:
        """Record an appended batch (``batch=None`` for a control batch, which only moves the epoch)."""
        entry = self.producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        elif epoch < entry.epoch:
            return
        if batch is not None:
            entry.batches.append(batch)

    def to_json(self, offset: int) -> str:
        """A snapshot valid for a log whose end offset is ``offset``."""
        return json.dumps(
            {
                "version": 1,
                "offset": offset,
                "producers": [
                    [pid, e.epoch, [list(_fields(b)) for b in e.batches]] for pid, e in self.producers.items()
                ],
                "transactions": self.txns.to_json(),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> tuple[int, ProducerStateManager]:
        """Parse a snapshot; raises ``ValueError`` (or ``KeyError``/``TypeError``) if malformed."""
        data = json.loads(text)
        if data.get("version") != 1:
            raise ValueError("unknown producer snapshot version")
        state = cls()
        for pid, epoch, batches in data["producers"]:
            entry = state.producers[int(pid)] = ProducerEntry(int(epoch))
            for first_seq, last_seq, first_offset, last_offset in batches:
                entry.batches.append(
                    BatchMetadata(int(first_seq), int(last_seq), int(first_offset), int(last_offset))
                )
        state.txns = PartitionTxnState.from_json(data.get("transactions", {}))
        return int(data["offset"]), state
