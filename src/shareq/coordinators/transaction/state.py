"""The transaction coordinator's vocabulary: states, error codes and one transactional id's metadata.

State ids are Kafka's (``TransactionState``), so the durable records read like Kafka's
``TransactionLogValue``. Error codes carry Kafka's numbers; the server edge maps them to
``ErrorCode`` members.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767

TV_0 = 0
"""``transaction.version`` of a client that predates KIP-890 (Kafka's ``TransactionVersion.TV_0``)."""
TV_2 = 2
"""``transaction.version`` 2 (KIP-890 part 2): the producer epoch is bumped at every EndTxn (v5) and
partitions are added implicitly by Produce (v12+) and TxnOffsetCommit (v5)."""


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def display(self) -> str:
        """Kafka's name (DescribeTransactions, ListTransactions)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class TxnErrorCode(enum.IntEnum):
    NONE = 0
    COORDINATOR_LOAD_IN_PROGRESS = 14
    NOT_COORDINATOR = 16
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTIONAL_ID_NOT_FOUND = 105
    PRODUCER_FENCED = 90
    TRANSACTION_ABORTABLE = 120


class TxnRequestError(Exception):
    """A request the coordinator refuses; nothing changed."""

    def __init__(self, code: TxnErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnMetadata:
    """One transactional id as ``__transaction_state`` holds it (Kafka's TransactionLogValue)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = field(default=frozenset())
    start_ms: int = -1
    update_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    """The producer id before the last rotation at an EndTxn that exhausted the epoch (TV2), so a
    retry of that EndTxn is recognised."""
    next_producer_id: int = NO_PRODUCER_ID
    """In Prepare*: the producer id the transactional id takes at completion (TV2, epoch exhausted)."""
    client_version: int = TV_0
    """The ``transaction.version`` of the request that last moved this transaction (Kafka's
    ``ClientTransactionVersion``): TV_2 when the epoch is bumped at every EndTxn."""

    @property
    def tv2(self) -> bool:
        return self.client_version >= TV_2
