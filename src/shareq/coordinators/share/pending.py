"""Staged (transactional) acknowledgements in durable share state: what a marker does to them.

A staging write is kept apart from the combined state, per producer id, until that producer's
COMMIT marker merges its entries (at their commit target) or its ABORT marker drops them. Pure
functions, shared by the share coordinator's replay and the in-memory persister.
"""

from __future__ import annotations

from collections.abc import Iterable

from shareq.share.persister import STATE_ACKNOWLEDGED, STATE_ARCHIVED, PendingTxnBatch, StateBatch

from .combiner import combine_state_batches

_TERMINAL = frozenset({STATE_ACKNOWLEDGED, STATE_ARCHIVED})


def add_staged(
    pending: tuple[PendingTxnBatch, ...], staged: Iterable[PendingTxnBatch]
) -> tuple[PendingTxnBatch, ...]:
    """``pending`` plus newly staged entries (a retry of the same range replaces it)."""
    out = {(p.producer_id, p.first_offset, p.last_offset): p for p in pending}
    for entry in staged:
        out[(entry.producer_id, entry.first_offset, entry.last_offset)] = entry
    return tuple(sorted(out.values(), key=lambda p: (p.first_offset, p.producer_id)))


def resolve_marker(
    batches: tuple[StateBatch, ...],
    pending: tuple[PendingTxnBatch, ...],
    start_offset: int,
    *,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
) -> tuple[tuple[StateBatch, ...], tuple[PendingTxnBatch, ...], int]:
    """(state batches, still-pending entries, start offset) once ``producer_id``'s marker applied.

    The marker matches entries of that producer id staged with an epoch at or below its own. A
    COMMIT that completes a terminal prefix at the start offset moves the start offset past it (as
    the share-partition will on load), so the state reads right without loading the partition."""
    hit = [p for p in pending if p.producer_id == producer_id and p.producer_epoch <= producer_epoch]
    if not hit:
        return batches, pending, start_offset
    rest = tuple(
        p for p in pending if not (p.producer_id == producer_id and p.producer_epoch <= producer_epoch)
    )
    if commit:
        delta = tuple(
            StateBatch(
                first_offset=p.first_offset,
                last_offset=p.last_offset,
                delivery_state=p.delivery_state,
                delivery_count=p.delivery_count,
            )
            for p in sorted(hit, key=lambda p: p.first_offset)
        )
        batches = combine_state_batches(batches, delta, start_offset)
        if start_offset >= 0:
            start = start_offset
            for b in batches:
                if b.first_offset > start or b.delivery_state not in _TERMINAL:
                    break
                start = max(start, b.last_offset + 1)
            if start != start_offset:
                batches = combine_state_batches(batches, (), start)
                start_offset = start
    return batches, rest, start_offset
