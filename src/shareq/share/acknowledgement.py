"""Acknowledgement requests: wire types, validation, splitting into equal-type segments.

Validation reads the in-flight map without changing it, so a refused request changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import groupby

from shareq.protocol.acknowledge_type import AcknowledgeType
from shareq.share.errors import InvalidRecordState, InvalidRequest, ShareRequestError
from shareq.share.in_flight import InFlightMap
from shareq.share.record_state import RecordState
from shareq.share.types import AcknowledgementBatch

_ACQUIRED = RecordState.ACQUIRED


def validate_acknowledgements(
    runs: InFlightMap,
    member: str,
    batches: Sequence[AcknowledgementBatch],
    *,
    spso: int,
    end: int,
    renew: bool = True,
) -> list[list[tuple[int, int, AcknowledgeType]]]:
    """What to apply, as ``stretch_segments`` gives it: raise unless every batch is well formed
    and covers only records ``member`` holds idle, or offsets below the SPSO that are still part
    of an open acquisition.

    Offsets below the SPSO are done (acknowledged or archived, then passed). As Kafka does, they
    are skipped without an error while the acquisition they were handed out in still holds the
    record at the SPSO (Kafka keeps that acquisition's in-flight batch until all of it is done),
    and so is the part of any batch that reaches the SPSO: a client repeating an acknowledgement
    whose answer it lost is not told it failed. A batch wholly below the SPSO and below that
    acquisition is INVALID_RECORD_STATE: its records left flight with their acquisition (a lock
    that lapsed before another member finished them, a log start that moved past them). Errors
    come in batch order (a batch's own checks, then its records' states). Clients split a poll's
    acknowledgements where the type changes (a REJECT every tenth record arrives as hundreds of
    adjacent batches), so the records of adjacent well-formed batches are checked as one stretch:
    one search, not one per batch. With ``renew`` off (the group's
    ``share.renew.acknowledge.enable``) a RENEW is refused."""
    malformed: ShareRequestError | None = None
    good = len(batches)
    prev_last = -1
    floor = _open_floor(runs, spso) if batches and batches[0].first_offset < spso else spso
    for i, batch in enumerate(batches):
        first, last = batch.first_offset, batch.last_offset
        # the usual batch (one type, after the previous one, inside the acquired records) is well
        # formed at a glance; anything else gets every check
        if not (spso <= first <= last < end and prev_last < first and len(batch.types) == 1):
            malformed = _malformed(batch, prev_last, spso, floor, end)
            if malformed is not None:
                good = i
                break
        prev_last = last
    batches = above_start(batches[:good], spso)
    if not renew and any(AcknowledgeType.RENEW in batch.types for batch in batches):
        # the group's share.renew.acknowledge.enable is off (Kafka's code and message)
        raise InvalidRecordState("Renewing acquisition locks is not enabled for the group.")
    grouped = stretch_segments(batches)
    for stretch in grouped:
        first, last = stretch[0][0], stretch[-1][1]
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
    if malformed is not None:
        raise malformed
    return grouped


def _open_floor(runs: InFlightMap, spso: int) -> int:
    """The first offset of the acquisition holding the record at the SPSO (the SPSO if none does)."""
    run = runs.run_at(spso)
    if run is not None and run.state is _ACQUIRED and run.lock is not None:
        return min(run.lock.first, spso)
    return spso


def _malformed(
    batch: AcknowledgementBatch, prev_last: int, spso: int, floor: int, end: int
) -> ShareRequestError | None:
    """What is wrong with one batch on its own (None: nothing).

    A batch starting on the previous one's last offset acknowledges that record twice. Kafka's
    request check lets it through (it refuses only a batch starting below that offset) and its
    share-partition then finds the record already in transition: INVALID_RECORD_STATE, as here."""
    first, last = batch.first_offset, batch.last_offset
    if first > last or first < 0:
        return InvalidRequest(f"acknowledgement batch {first}..{last} runs backwards")
    if first < prev_last:
        return InvalidRequest(f"acknowledgement batch {first}..{last} overlaps the previous one")
    if len(batch.types) not in (1, last - first + 1):
        return InvalidRequest(f"acknowledgement batch {first}..{last} has {len(batch.types)} types")
    if last >= end:
        return InvalidRequest(f"offset {last} is past the acquired records (end {end})")
    if first < floor and last < spso:
        return InvalidRecordState(f"offsets {first}..{last} are below the start offset {spso}")
    if first == prev_last and first >= spso:  # (below the SPSO both are skipped)
        return InvalidRecordState(f"offset {first} is acknowledged twice in one request")
    return None


def above_start(batches: Sequence[AcknowledgementBatch], spso: int) -> Sequence[AcknowledgementBatch]:
    """``batches`` without their offsets below ``spso`` (a batch carrying a type per offset loses
    the types of the offsets cut off)."""
    if not batches or batches[0].first_offset >= spso:
        return batches
    out: list[AcknowledgementBatch] = []
    for batch in batches:
        if batch.last_offset < spso:
            continue
        if batch.first_offset < spso:
            types = batch.types if len(batch.types) == 1 else batch.types[spso - batch.first_offset :]
            batch = AcknowledgementBatch(first_offset=spso, last_offset=batch.last_offset, types=types)
        out.append(batch)
    return out


def stretch_segments(
    batches: Sequence[AcknowledgementBatch],
) -> list[list[tuple[int, int, AcknowledgeType]]]:
    """Equal-type segments of ascending ``batches``, grouped by adjacent stretch, with equal
    neighbours across batch boundaries joined: what one ``InFlightMap.carve`` takes."""
    out: list[list[tuple[int, int, AcknowledgeType]]] = []
    tail: list[tuple[int, int, AcknowledgeType]] = []  # the stretch being built
    prev_last = -2
    prev_ack: AcknowledgeType | None = None
    for batch in batches:
        first, last, types = batch
        if len(types) == 1:  # the usual batch: one type (clients split where the type changes)
            ack = types[0]
            if first != prev_last + 1:
                tail = [(first, last, ack)]
                out.append(tail)
            elif ack is prev_ack:
                tail[-1] = (tail[-1][0], last, ack)
            else:
                tail.append((first, last, ack))
            prev_last, prev_ack = last, ack
            continue
        segs = segments(batch)
        if first != prev_last + 1:
            tail = segs
            out.append(tail)
        else:
            if segs[0][2] is prev_ack:
                segs[0] = (tail.pop()[0], segs[0][1], segs[0][2])
            tail.extend(segs)
        prev_last, prev_ack = last, segs[-1][2]
    return out


def segments(batch: AcknowledgementBatch) -> list[tuple[int, int, AcknowledgeType]]:
    """Split a batch into runs of equal acknowledge type (grouped in C: a batch may carry a type
    per record, and its cost should follow the number of runs)."""
    types = batch.types
    if len(types) == 1:
        return [(batch.first_offset, batch.last_offset, types[0])]
    out: list[tuple[int, int, AcknowledgeType]] = []
    start = batch.first_offset
    for ack, group in groupby(types):
        end = start + len(list(group))
        out.append((start, end - 1, ack))
        start = end
    return out


_BY_VALUE: dict[int, AcknowledgeType] = {t.value: t for t in AcknowledgeType}
SINGLE_TYPES: dict[tuple[int, ...], tuple[AcknowledgeType, ...]] = {(t.value,): (t,) for t in AcknowledgeType}
"""Each one-type wire tuple (``(1,)``) and its ``AcknowledgeType`` tuple: a batch's usual types."""


def parse_acknowledge_types(values: Iterable[int]) -> tuple[AcknowledgeType, ...]:
    """Wire acknowledge-type bytes to ``AcknowledgeType``; unknown values are a peer fault.

    A batch may carry a type per record: the check and the lookups run in C (``set``, ``map``).
    Most batches carry one type (clients split where the type changes): those are one lookup."""
    raw = tuple(values)
    single = SINGLE_TYPES.get(raw)
    if single is not None:
        return single
    if not raw:
        raise InvalidRequest("acknowledgement batch without types")
    distinct = set(raw)
    if not _BY_VALUE.keys() >= distinct:
        bad = min(v for v in distinct if v not in _BY_VALUE)
        raise InvalidRequest(f"unknown acknowledge type {bad}")
    return tuple(map(_BY_VALUE.__getitem__, raw))
