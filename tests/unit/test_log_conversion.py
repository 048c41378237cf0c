"""The append checks a topic's configs ask for (``log/conversion.py``), without I/O: every record's
timestamp against the window, keys on a compacted topic, each refusal naming its record."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.log.batch import HEADER_SIZE, Compression
from shareq.log.codecs import compress
from shareq.log.conversion import LONG_MAX, AppendPolicy, apply_policy
from shareq.log.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError
from shareq.log.records import Record, encode_batch

NOW = 1_800_000_000_000
HOUR = 3_600_000


def zstd(batch: bytes) -> bytes:
    out = bytearray(batch[:HEADER_SIZE]) + compress(Compression.ZSTD, batch[HEADER_SIZE:], None)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, struct.unpack_from(">h", out, 21)[0] | int(Compression.ZSTD))
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


@settings(max_examples=200, deadline=None)
@given(
    offsets=st.lists(st.integers(-3 * HOUR, 3 * HOUR), min_size=1, max_size=8),
    before=st.sampled_from([LONG_MAX, HOUR, 60_000]),
    after=st.sampled_from([LONG_MAX, HOUR, 60_000]),
    compressed=st.booleans(),
)
def test_every_record_is_checked_against_the_window(
    offsets: list[int], before: int, after: int, compressed: bool
) -> None:
    """Refused exactly when some record lies outside [now - before, now + after], whatever the batch's
    first timestamp; the refusal names those records and no others."""
    stamps = [NOW + o for o in offsets]
    batch = encode_batch([Record(value=b"v", timestamp=ts) for ts in stamps], base_timestamp=stamps[0])
    data = zstd(batch) if compressed else batch
    policy = AppendPolicy(before_max_ms=before, after_max_ms=after)
    outside = [i for i, ts in enumerate(stamps) if NOW - ts > before or ts - NOW > after]
    if not outside:
        assert apply_policy(bytearray(data), policy, NOW) == bytearray(data)
        return
    with pytest.raises(InvalidTimestampError) as raised:
        apply_policy(bytearray(data), policy, NOW)
    assert [i for i, _ in raised.value.record_errors] == outside
    assert str(raised.value) == "One or more records have been rejected due to invalid timestamp"


def test_compacted_topic_names_each_record_without_a_key() -> None:
    batch = zstd(
        encode_batch([Record(key=b"k", value=b"1"), Record(value=b"2"), Record(key=b"", value=b"3")])
    )
    with pytest.raises(InvalidRecordError) as raised:
        apply_policy(bytearray(batch), AppendPolicy(compacted=True), NOW, "t-3")
    why = "Compacted topic cannot accept message without key in topic partition t-3"
    assert raised.value.record_errors == ((1, why),)  # an empty key is a key
    assert str(raised.value).startswith("One or more records have been rejected due to 1 record errors")


def test_a_corrupt_batch_is_corrupt_before_its_records_are_read() -> None:
    batch = bytearray(encode_batch([Record(value=b"v", timestamp=NOW - 2 * HOUR)], base_timestamp=NOW))
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        apply_policy(batch, AppendPolicy(before_max_ms=HOUR, compacted=True), NOW)
