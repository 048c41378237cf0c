"""Redelivery backoff: when a record made AVAILABLE again may be acquired (sans-I/O).

A record going ACQUIRED -> AVAILABLE by a trigger the group names (a RELEASE, a lock expiry, its
member leaving) becomes acquirable at ``now + min(max, base * multiplier ** (count - 1))``,
varied by ``± jitter``. The variation is fixed by the record's identity (group, topic, partition,
first offset of its run, delivery count), so a replay computes the same instant. A run keeps its
due time (``InFlightBatch.due``, epoch ms, 0: due) until it matures; runs with equal state, count
and due time stay one run, so releasing a whole batch delays it as one.

With no backoff configured (the default) nothing here runs and records come back at once, as
Kafka's do.
"""

from __future__ import annotations

import bisect
import enum
import functools
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from shareq.share.in_flight import InFlightMap
from shareq.share.persister import RedeliveryDelay, SharePartitionKey
from shareq.share.record_state import RecordState
from shareq.share.transition import StateTransition

_AVAILABLE = RecordState.AVAILABLE
_T = TypeVar("_T")


class Trigger(enum.Enum):
    """What made a record AVAILABLE again."""

    RELEASE = "release"
    TIMEOUT = "timeout"
    LEAVE = "leave"


ALL_TRIGGERS = frozenset(Trigger)


@dataclass(frozen=True, slots=True, kw_only=True)
class RedeliveryBackoff:
    """A group's backoff: ``base_ms`` > 0 turns it on; ``ceiling_ms`` (the broker's) bounds every
    delay it gives."""

    base_ms: int
    multiplier: float = 2.0
    max_ms: int = 60_000
    jitter: float = 0.2
    on: frozenset[Trigger] = ALL_TRIGGERS
    ceiling_ms: int = 900_000

    def delay(self, key: SharePartitionKey, first_offset: int, count: int) -> int:
        """The delay (ms) before a record of delivery count ``count`` may be delivered again."""
        base = _capped(self.base_ms, self.multiplier, self.max_ms, count)
        if self.jitter > 0.0:
            seed = zlib.crc32(b"%d/%d" % (first_offset, count), _key_crc(key))
            u = seed / 0xFFFFFFFF * 2.0 - 1.0  # in [-1, 1]
            base *= 1.0 + self.jitter * u
        return max(0, min(int(base), self.ceiling_ms))


@functools.lru_cache(maxsize=1024)
def _capped(base_ms: int, multiplier: float, max_ms: int, count: int) -> float:
    """``min(max, base * multiplier ** (count - 1))``, before the jitter: a few delivery counts
    recur across thousands of released runs, so each is worked out once."""
    exponent = max(count - 1, 0)
    raw = float(base_ms) * multiplier ** min(exponent, 64)  # no float overflow
    return min(float(max_ms), raw)


@functools.lru_cache(maxsize=4096)
def _key_crc(key: SharePartitionKey) -> int:
    """The CRC of the share-partition's identity, the start of each of its records' seeds."""
    return zlib.crc32(f"{key.group_id}/{key.topic_id}/{key.partition}/".encode())


def schedule(
    backoff: RedeliveryBackoff, key: SharePartitionKey, txn: StateTransition, trigger: Trigger, now: int
) -> None:
    """Give the pieces of ``txn`` going AVAILABLE their due time, when ``trigger`` delays (pieces
    with a delay their client asked for keep it)."""
    if backoff.base_ms <= 0 or trigger not in backoff.on:
        return
    dues = txn.dues
    delay = backoff.delay
    for run, target in txn.pieces:
        if target is _AVAILABLE and (dues is None or run.first not in dues):
            if dues is None:
                dues = txn.dues = {}
            dues[run.first] = now + delay(key, run.first, run.count)


def requested(
    txn: StateTransition, delays: Sequence[tuple[int, int, int]], ceiling_ms: int, now: int
) -> None:
    """The delays a client asked for on its RELEASEs (``(first, last, ms)`` of its batches): the
    pieces of ``txn`` going AVAILABLE under one get it, capped by ``ceiling_ms``, whether or not the
    group delays."""
    spans = sorted(delays)
    firsts = [first for first, _, _ in spans]
    for run, target in txn.pieces:
        if target is not _AVAILABLE:
            continue
        i = bisect.bisect_right(firsts, run.first) - 1
        if i >= 0 and spans[i][1] >= run.first and spans[i][2] > 0 and ceiling_ms > 0:
            _set(txn, run.first, now + min(spans[i][2], ceiling_ms))


def load_delays(runs: InFlightMap, delays: Sequence[RedeliveryDelay], spso: int) -> None:
    """Give the AVAILABLE runs persisted state loaded their due times (a restart honours the rest of
    each delay, never less)."""
    for d in delays:
        if d.last_offset < spso:
            continue
        first = max(d.first_offset, spso)
        runs.isolate(first, d.last_offset)
        for run in runs.overlapping(first, d.last_offset):
            if run.state is _AVAILABLE and run.txn is None:
                run.due = d.due_ms
                runs.reindex(run)


def cut_at(
    stretch: list[tuple[int, int, _T]], delays: Sequence[tuple[int, int, int]]
) -> list[tuple[int, int, _T]]:
    """``stretch``'s segments cut where a requested delay starts or ends, so that each piece the
    acknowledgement carves lies under one delay at most."""
    cuts = sorted({first for first, _, _ in delays} | {last + 1 for _, last, _ in delays})
    out: list[tuple[int, int, _T]] = []
    for first, last, tag in stretch:
        i = bisect.bisect_right(cuts, first)
        while i < len(cuts) and cuts[i] <= last:
            out.append((first, cuts[i] - 1, tag))
            first = cuts[i]
            i += 1
        out.append((first, last, tag))
    return out


def _set(txn: StateTransition, first: int, due: int) -> None:
    if txn.dues is None:
        txn.dues = {}
    txn.dues[first] = due
