"""Acknowledgement requests: wire types, validation, splitting into equal-type segments.

Validation reads the in-flight map without changing it, so a refused request changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from shareq.share.errors import InvalidRecordState, InvalidRequest
from shareq.share.in_flight import InFlightMap
from shareq.share.record_state import AcknowledgeType, RecordState
from shareq.share.types import AcknowledgementBatch

_ACQUIRED = RecordState.ACQUIRED


def validate_acknowledgements(
    runs: InFlightMap, member: str, batches: Sequence[AcknowledgementBatch], *, spso: int, end: int
) -> None:
    """Raise unless every batch is well formed and covers only records ``member`` holds idle."""
    prev_last = -1
    for batch in batches:
        first, last = batch.first_offset, batch.last_offset
        if first > last or first < 0:
            raise InvalidRequest(f"acknowledgement batch {first}..{last} runs backwards")
        if first <= prev_last:
            raise InvalidRequest(f"acknowledgement batch {first}..{last} overlaps the previous one")
        prev_last = last
        if len(batch.types) not in (1, last - first + 1):
            raise InvalidRequest(f"acknowledgement batch {first}..{last} has {len(batch.types)} types")
        if last >= end:
            raise InvalidRequest(f"offset {last} is past the acquired records (end {end})")
        if first < spso:
            raise InvalidRecordState(f"offset {first} is below the start offset {spso}")
        pos = first
        for run in runs.overlapping(first, last):
            if run.first > pos:
                raise InvalidRecordState(f"offset {pos} is not in flight")
            if run.txn is not None:
                raise InvalidRecordState(f"offsets {run.first}..{run.last} have a transition in progress")
            if run.state is not _ACQUIRED:
                raise InvalidRecordState(f"offsets {run.first}..{run.last} are {run.state.name}")
            if run.member != member:
                raise InvalidRecordState(f"offsets {run.first}..{run.last} are not acquired by {member}")
            pos = run.last + 1
        if pos <= last:
            raise InvalidRecordState(f"offset {pos} is not in flight")


def segments(batch: AcknowledgementBatch) -> list[tuple[int, int, AcknowledgeType]]:
    """Split a batch into runs of equal acknowledge type."""
    types = batch.types
    if len(types) == 1:
        return [(batch.first_offset, batch.last_offset, types[0])]
    out: list[tuple[int, int, AcknowledgeType]] = []
    start = batch.first_offset
    for i in range(1, len(types) + 1):
        if i == len(types) or types[i] != types[i - 1]:
            out.append((start, batch.first_offset + i - 1, types[i - 1]))
            start = batch.first_offset + i
    return out


def parse_acknowledge_types(values: Iterable[int]) -> tuple[AcknowledgeType, ...]:
    """Wire acknowledge-type bytes to ``AcknowledgeType``; unknown values are a peer fault."""
    out: list[AcknowledgeType] = []
    for value in values:
        try:
            out.append(AcknowledgeType(value))
        except ValueError:
            raise InvalidRequest(f"unknown acknowledge type {value}") from None
    if not out:
        raise InvalidRequest("acknowledgement batch without types")
    return tuple(out)
