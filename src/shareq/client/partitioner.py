"""Kafka's default partitioning: murmur2 of the key for keyed records, sticky batches for the rest."""

from __future__ import annotations

import itertools
import struct

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF
_WORDS = struct.Struct("<I")


def murmur2(data: bytes) -> int:
    """The 32-bit murmur2 hash Kafka's Java client uses (as a signed int, like ``Utils.murmur2``)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    full = length & ~3
    for i in range(0, full, 4):
        (k,) = _WORDS.unpack_from(data, i)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[full + 2] << 16
    if rest >= 2:
        h ^= data[full + 1] << 8
    if rest >= 1:
        h ^= data[full]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Kafka's ``toPositive(murmur2(key)) % numPartitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """Keyless records stick to one partition per topic until that partition's batch is sent."""

    def __init__(self) -> None:
        self._current: dict[str, int] = {}
        self._counter = itertools.count()

    def partition(self, topic: str, num_partitions: int) -> int:
        p = self._current.get(topic)
        if p is None or p >= num_partitions:
            p = next(self._counter) % num_partitions
            self._current[topic] = p
        return p

    def batch_sent(self, topic: str) -> None:
        """Move the topic on to the next partition (round robin between batches)."""
        self._current.pop(topic, None)
