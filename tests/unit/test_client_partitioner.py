"""murmur2 and the default partitioner against Kafka's published values and kafka-python's implementation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from shareq.client.partitioner import StickyPartitioner, murmur2, partition_for_key

# From Kafka's UtilsTest.testMurmur2 (signed Java ints).
KAFKA_VALUES = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), KAFKA_VALUES.items())
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(data: bytes) -> None:
    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(bytearray(data)) & 0xFFFFFFFF


@given(st.binary(max_size=32), st.integers(min_value=1, max_value=1000))
def test_partition_for_key_is_positive_modulo(data: bytes, n: int) -> None:
    p = partition_for_key(data, n)
    assert 0 <= p < n
    assert p == (murmur2(data) & 0x7FFFFFFF) % n


def test_sticky_partitioner_sticks_until_batch_sent() -> None:
    sp = StickyPartitioner()
    first = sp.partition("t", 4)
    assert all(sp.partition("t", 4) == first for _ in range(10))
    sp.batch_sent("t")
    assert sp.partition("t", 4) == (first + 1) % 4
