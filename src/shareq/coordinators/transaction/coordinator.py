"""The transaction coordinator: one state machine per transactional id, sans-I/O.

Every change is returned as a :class:`TxnWrite` and takes effect only through :meth:`replay`,
which the shell calls once the record is durable in ``__transaction_state`` (loading at start is
the same replay). A write in PrepareCommit/PrepareAbort is a decision: the shell then writes the
markers to every participant and persists :meth:`complete`'s CompleteCommit/CompleteAbort.

Transitions follow Kafka's ``TransactionCoordinator``; for a client before KIP-890 (TV1):

- unknown id: InitProducerId gives a new producer id at epoch 0; anything else is
  INVALID_PRODUCER_ID_MAPPING;
- Empty or Complete*: InitProducerId bumps the epoch (a new id when it is exhausted);
  AddPartitions/AddOffsets opens the transaction (Ongoing); EndTxn matching the completed
  decision is a retry (NONE), otherwise INVALID_TXN_STATE;
- Ongoing: InitProducerId fences (PrepareAbort at epoch + 1, then retried); AddPartitions adds
  (NONE if already in); EndTxn decides (PrepareCommit/PrepareAbort); the timeout aborts at
  epoch + 1;
- Prepare*: CONCURRENT_TRANSACTIONS for every request.

With ``transaction.version`` 2 (KIP-890 part 2: EndTxn v5, Produce v12+, TxnOffsetCommit v5):

- partitions join implicitly (:meth:`add_partitions` from the produce and offset-commit paths;
  Empty or Complete* then opens the transaction) and may be verified without being added
  (:meth:`verify_partitions`, AddPartitionsToTxn v4+ with ``verify_only``);
- every EndTxn bumps the epoch: the decision is written at epoch + 1, so are its markers, and the
  producer continues at that epoch (a new producer id at epoch 0 when the epoch is exhausted);
- an EndTxn at the previous epoch (or, after a rotation, the previous producer id at the
  exhausted epoch) is a retry: NONE once complete, CONCURRENT_TRANSACTIONS while preparing;
- an abort with no transaction open (Empty, Complete*) is allowed and bumps the epoch (the
  producer cannot know whether a partition was added), a commit then is INVALID_TXN_STATE.

A producer id or epoch that does not match the current one is fenced (PRODUCER_FENCED; the
server edge answers INVALID_PRODUCER_EPOCH to request versions that predate it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from .state import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_0,
    TV_2,
    TopicPartition,
    TxnErrorCode,
    TxnMetadata,
    TxnRequestError,
    TxnState,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnConfig:
    max_timeout_ms: int = 900_000
    """``transaction.max.timeout.ms``."""
    id_expiration_ms: int = 7 * 24 * 3600 * 1000
    """``transactional.id.expiration.ms``: an idle Empty/Complete id is forgotten after this."""


@dataclass(frozen=True, slots=True)
class TxnWrite:
    """Metadata to persist; a Prepare* state is a decision whose markers must follow."""

    metadata: TxnMetadata

    @property
    def decision(self) -> bool:
        return self.metadata.state.preparing


class TransactionCoordinator:
    """Transactional ids -> metadata; producer ids -> transactional id."""

    def __init__(self, config: TxnConfig | None = None) -> None:
        self.config = config if config is not None else TxnConfig()
        self._txns: dict[str, TxnMetadata] = {}
        self._by_producer: dict[int, str] = {}

    # -- state -----------------------------------------------------------------------------------

    def replay(self, transactional_id: str, metadata: TxnMetadata | None) -> None:
        """Apply one durable record (``None``: the id expired)."""
        old = self._txns.pop(transactional_id, None)
        if old is not None and self._by_producer.get(old.producer_id) == transactional_id:
            del self._by_producer[old.producer_id]
        if metadata is not None:
            self._txns[transactional_id] = metadata
            self._by_producer[metadata.producer_id] = transactional_id

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    def by_producer(self, producer_id: int) -> TxnMetadata | None:
        txn_id = self._by_producer.get(producer_id)
        return None if txn_id is None else self._txns.get(txn_id)

    def __iter__(self) -> Iterator[TxnMetadata]:
        return iter(list(self._txns.values()))

    def __len__(self) -> int:
        return len(self._txns)

    # -- InitProducerId --------------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
        now_ms: int,
        allocate: Callable[[], int],
    ) -> TxnWrite:
        """The metadata to persist for an InitProducerId.

        If a transaction is open, the write is its fencing PrepareAbort (at the next epoch): the
        caller completes that abort and calls again. Raises :class:`TxnRequestError`.
        """
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            raise TxnRequestError(
                TxnErrorCode.INVALID_TRANSACTION_TIMEOUT,
                f"transaction timeout {timeout_ms} ms is not within (0, {self.config.max_timeout_ms}]",
            )
        meta = self._txns.get(transactional_id)
        if meta is None or meta.state is TxnState.DEAD:
            if producer_id != NO_PRODUCER_ID:
                raise TxnRequestError(TxnErrorCode.INVALID_PRODUCER_ID_MAPPING, "unknown transactional id")
            return TxnWrite(
                TxnMetadata(
                    transactional_id=transactional_id,
                    producer_id=allocate(),
                    producer_epoch=0,
                    timeout_ms=timeout_ms,
                    state=TxnState.EMPTY,
                    update_ms=now_ms,
                )
            )
        if producer_id != NO_PRODUCER_ID and (
            producer_id != meta.producer_id or producer_epoch != meta.producer_epoch
        ):
            raise TxnRequestError(
                TxnErrorCode.PRODUCER_FENCED,
                f"producer {producer_id} epoch {producer_epoch} is not the current one",
            )
        if meta.state.preparing:
            raise TxnRequestError(TxnErrorCode.CONCURRENT_TRANSACTIONS, "a decision is being applied")
        if meta.state is TxnState.ONGOING:
            return self._fence_abort(meta, now_ms)
        if meta.producer_epoch + 1 >= MAX_PRODUCER_EPOCH:
            pid, epoch = allocate(), 0
        else:
            pid, epoch = meta.producer_id, meta.producer_epoch + 1
        return TxnWrite(
            dataclasses.replace(
                meta,
                producer_id=pid,
                producer_epoch=epoch,
                timeout_ms=timeout_ms,
                state=TxnState.EMPTY,
                partitions=frozenset(),
                start_ms=-1,
                update_ms=now_ms,
            )
        )

    def _fence_abort(self, meta: TxnMetadata, now_ms: int) -> TxnWrite:
        """Abort ``meta``'s open transaction at the next epoch, fencing its producer."""
        epoch = min(meta.producer_epoch + 1, MAX_PRODUCER_EPOCH - 1)
        return TxnWrite(
            dataclasses.replace(meta, producer_epoch=epoch, state=TxnState.PREPARE_ABORT, update_ms=now_ms)
        )

    # -- within a transaction --------------------------------------------------------------------

    def _current(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        meta = self._txns.get(transactional_id)
        if meta is None or meta.state is TxnState.DEAD or meta.producer_id != producer_id:
            raise TxnRequestError(
                TxnErrorCode.INVALID_PRODUCER_ID_MAPPING,
                f"producer {producer_id} is not the one of transactional id {transactional_id}",
            )
        if producer_epoch != meta.producer_epoch:
            raise TxnRequestError(
                TxnErrorCode.PRODUCER_FENCED,
                f"epoch {producer_epoch} of producer {producer_id} is not the current {meta.producer_epoch}",
            )
        return meta

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        now_ms: int,
        client_version: int = TV_0,
    ) -> TxnWrite | None:
        """AddPartitionsToTxn / AddOffsetsToTxn, or a partition added implicitly (``client_version``
        TV_2: Produce v12+, TxnOffsetCommit v5): ``None`` if every partition is in already."""
        meta = self._current(transactional_id, producer_id, producer_epoch)
        if meta.state.preparing:
            raise TxnRequestError(TxnErrorCode.CONCURRENT_TRANSACTIONS, "a decision is being applied")
        wanted = frozenset(partitions)
        if meta.state is TxnState.ONGOING:
            if wanted <= meta.partitions:
                return None
            return TxnWrite(
                dataclasses.replace(
                    meta, partitions=meta.partitions | wanted, update_ms=now_ms, client_version=client_version
                )
            )
        return TxnWrite(
            dataclasses.replace(
                meta,
                state=TxnState.ONGOING,
                partitions=wanted,
                start_ms=now_ms,
                update_ms=now_ms,
                client_version=client_version,
            )
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, TxnErrorCode]:
        """AddPartitionsToTxn v4+ with ``verify_only``: NONE for each partition in the open
        transaction, TRANSACTION_ABORTABLE for the others. Raises :class:`TxnRequestError`."""
        meta = self._current(transactional_id, producer_id, producer_epoch)
        if meta.state.preparing:
            raise TxnRequestError(TxnErrorCode.CONCURRENT_TRANSACTIONS, "a decision is being applied")
        return {
            tp: TxnErrorCode.NONE if tp in meta.partitions else TxnErrorCode.TRANSACTION_ABORTABLE
            for tp in partitions
        }

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        now_ms: int,
        tv2: bool = False,
        allocate: Callable[[], int] | None = None,
    ) -> TxnWrite | None:
        """EndTxn: the PrepareCommit/PrepareAbort decision, or ``None`` for a retry of a
        completed one. ``tv2`` (EndTxn v5): the decision bumps the epoch, ``allocate`` gives the
        next producer id when it is exhausted. Raises :class:`TxnRequestError`."""
        if tv2:
            return self._end_txn_tv2(
                transactional_id, producer_id, producer_epoch, commit, now_ms=now_ms, allocate=allocate
            )
        meta = self._current(transactional_id, producer_id, producer_epoch)
        state = meta.state
        if state.preparing:
            raise TxnRequestError(TxnErrorCode.CONCURRENT_TRANSACTIONS, "a decision is being applied")
        if state is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            return TxnWrite(dataclasses.replace(meta, state=target, update_ms=now_ms, client_version=TV_0))
        if (state is TxnState.COMPLETE_COMMIT and commit) or (
            state is TxnState.COMPLETE_ABORT and not commit
        ):
            return None
        raise self._invalid_state(meta, commit)

    def _end_txn_tv2(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        now_ms: int,
        allocate: Callable[[], int] | None,
    ) -> TxnWrite | None:
        meta = self._txns.get(transactional_id)
        if meta is None or meta.state is TxnState.DEAD:
            raise TxnRequestError(TxnErrorCode.INVALID_PRODUCER_ID_MAPPING, "unknown transactional id")
        state = meta.state
        # a retry of an EndTxn whose bump rotated the producer id (the epoch was exhausted) ...
        retry_on_rotation = (
            meta.previous_producer_id == producer_id
            and producer_epoch == MAX_PRODUCER_EPOCH - 1
            and meta.producer_epoch == 0
        )
        # ... or of one whose bump is stored
        retry_on_bump = meta.producer_epoch == producer_epoch + 1
        if meta.producer_id != producer_id and not retry_on_rotation:
            raise TxnRequestError(
                TxnErrorCode.INVALID_PRODUCER_ID_MAPPING,
                f"producer {producer_id} is not the one of transactional id {transactional_id}",
            )
        if state.preparing:
            valid = retry_on_bump
        elif state.complete:
            valid = retry_on_bump or retry_on_rotation or producer_epoch == meta.producer_epoch
        else:
            valid = producer_epoch == meta.producer_epoch
        if not valid:
            raise TxnRequestError(
                TxnErrorCode.PRODUCER_FENCED,
                f"epoch {producer_epoch} of producer {producer_id} is not the current {meta.producer_epoch}",
            )
        retry = retry_on_bump or retry_on_rotation
        if state is TxnState.ONGOING:
            return self._decide_tv2(meta, commit, now_ms, allocate)
        if state.preparing:
            if commit == (state is TxnState.PREPARE_COMMIT):
                raise TxnRequestError(TxnErrorCode.CONCURRENT_TRANSACTIONS, "a decision is being applied")
            raise self._invalid_state(meta, commit)
        completed_commit = state is TxnState.COMPLETE_COMMIT
        if retry:
            if state.complete and commit == completed_commit:
                return None
            raise self._invalid_state(meta, commit)
        if not commit:  # Empty or Complete*: abort what the producer may have added, at a new epoch
            return self._decide_tv2(meta, commit, now_ms, allocate, nothing_added=True)
        raise self._invalid_state(meta, commit)

    def _decide_tv2(
        self,
        meta: TxnMetadata,
        commit: bool,
        now_ms: int,
        allocate: Callable[[], int] | None,
        *,
        nothing_added: bool = False,
    ) -> TxnWrite:
        next_pid = NO_PRODUCER_ID
        if meta.producer_epoch >= MAX_PRODUCER_EPOCH - 1:
            if allocate is None:
                raise ValueError("the epoch is exhausted and no producer id allocator was given")
            next_pid = allocate()
        return TxnWrite(
            dataclasses.replace(
                meta,
                producer_epoch=meta.producer_epoch + 1,
                state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
                partitions=frozenset() if nothing_added else meta.partitions,
                start_ms=now_ms if nothing_added else meta.start_ms,
                update_ms=now_ms,
                next_producer_id=next_pid,
                client_version=TV_2,
            )
        )

    @staticmethod
    def _invalid_state(meta: TxnMetadata, commit: bool) -> TxnRequestError:
        return TxnRequestError(
            TxnErrorCode.INVALID_TXN_STATE,
            f"cannot {'commit' if commit else 'abort'} transactional id {meta.transactional_id} in state "
            f"{meta.state.display}",
        )

    def complete(self, transactional_id: str, *, now_ms: int) -> TxnWrite:
        """CompleteCommit/CompleteAbort once every marker of the Prepare* decision is written."""
        meta = self._txns[transactional_id]
        if not meta.state.preparing:
            raise TxnRequestError(TxnErrorCode.INVALID_TXN_STATE, f"{transactional_id} has no decision")
        target = (
            TxnState.COMPLETE_COMMIT if meta.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        )
        done = dataclasses.replace(meta, state=target, partitions=frozenset(), update_ms=now_ms)
        if meta.next_producer_id != NO_PRODUCER_ID:  # TV2, the epoch exhausted: the new producer id
            done = dataclasses.replace(
                done,
                producer_id=meta.next_producer_id,
                producer_epoch=0,
                previous_producer_id=meta.producer_id,
                next_producer_id=NO_PRODUCER_ID,
            )
        return TxnWrite(done)

    def abort(self, transactional_id: str, *, now_ms: int) -> TxnWrite:
        """An operator's abort of an open transaction (fences its producer, as a timeout does)."""
        meta = self._txns.get(transactional_id)
        if meta is None or meta.state is not TxnState.ONGOING:
            raise TxnRequestError(
                TxnErrorCode.INVALID_TXN_STATE, f"{transactional_id} has no open transaction"
            )
        return self._fence_abort(meta, now_ms)

    def verify_produce(
        self, producer_id: int, producer_epoch: int, partition: TopicPartition
    ) -> TxnErrorCode:
        """May this transactional batch be appended? The partition must be in the producer's
        open transaction (so no late retry can open a transaction nobody ends): otherwise
        TRANSACTION_ABORTABLE, which the server edge answers as INVALID_TXN_STATE to request
        versions that predate it."""
        meta = self.by_producer(producer_id)
        if meta is None:
            return TxnErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != meta.producer_epoch:
            return TxnErrorCode.INVALID_PRODUCER_EPOCH
        if meta.state.preparing:
            return TxnErrorCode.CONCURRENT_TRANSACTIONS
        if meta.state is not TxnState.ONGOING or partition not in meta.partitions:
            return TxnErrorCode.TRANSACTION_ABORTABLE
        return TxnErrorCode.NONE

    # -- timers ----------------------------------------------------------------------------------

    def preparing(self) -> list[TxnMetadata]:
        """Decisions whose markers may not all be written (after a restart)."""
        return [m for m in self._txns.values() if m.state.preparing]

    def next_deadline(self) -> int | None:
        deadlines = [self._deadline(m) for m in self._txns.values()]
        return min((d for d in deadlines if d is not None), default=None)

    def _deadline(self, meta: TxnMetadata) -> int | None:
        if meta.state is TxnState.ONGOING:
            return meta.start_ms + meta.timeout_ms
        if meta.state is TxnState.EMPTY or meta.state.complete:
            return meta.update_ms + self.config.id_expiration_ms
        return None

    def expire(self, now_ms: int) -> tuple[list[TxnWrite], list[str]]:
        """Fencing aborts of transactions open past their timeout, and the ids idle past
        ``transactional.id.expiration.ms`` (to delete with a tombstone)."""
        aborts: list[TxnWrite] = []
        expired: list[str] = []
        for meta in list(self._txns.values()):
            deadline = self._deadline(meta)
            if deadline is None or deadline > now_ms:
                continue
            if meta.state is TxnState.ONGOING:
                aborts.append(self._fence_abort(meta, now_ms))
            else:
                expired.append(meta.transactional_id)
        return aborts, expired
