"""The v2 batch header reader and the uncompressed record codec, cross-checked with kafka-python."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from shareq.log.batch import (
    HEADER_SIZE,
    Compression,
    TimestampType,
    crc_ok,
    iter_batches,
    patch_base_offset,
    read_batch_header,
)
from shareq.log.errors import CorruptRecordError, UnsupportedCompressionError
from shareq.log.records import (
    CONTROL_TYPE_COMMIT,
    Record,
    control_record_type,
    decode_batch,
    decode_batches,
    encode_batch,
    encode_control_batch,
    encode_headers,
    encode_record_tail,
    encode_tails_batch,
    read_varint,
    write_varint,
)

_CODEC_IDS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _kafka_python_batch(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]],
    *,
    compression: int = 0,
    producer: tuple[int, int, int] = (-1, -1, -1),
    transactional: bool = False,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=transactional,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        batch_size=1 << 20,
    )
    for i, (ts, key, value, headers) in enumerate(records):
        assert builder.append(i, timestamp=ts, key=key, value=value, headers=headers) is not None
    return bytes(builder.build())


def test_header_fields_of_a_kafka_python_batch() -> None:
    raw = _kafka_python_batch(
        [(1000, b"k", b"v", []), (1005, None, b"w", [("h", b"x")])],
        producer=(42, 3, 7),
        transactional=True,
    )
    header = read_batch_header(raw)
    assert header.base_offset == 0
    assert header.size == len(raw)
    assert header.magic == 2
    assert header.last_offset_delta == 1
    assert header.last_offset == 1
    assert header.records_count == 2
    assert header.base_timestamp == 1000
    assert header.max_timestamp == 1005
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 7)
    assert header.last_sequence == 8
    assert header.is_transactional
    assert not header.is_control
    assert header.compression is Compression.NONE
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert crc_ok(raw, 0, header)


def test_patch_base_offset_keeps_crc_valid_and_kafka_python_agrees() -> None:
    raw = bytearray(_kafka_python_batch([(1, b"a", b"b", [])] * 3))
    patch_base_offset(raw, 0, 123_456_789_012)
    header = read_batch_header(raw)
    assert header.base_offset == 123_456_789_012
    assert header.last_offset == 123_456_789_014
    assert crc_ok(raw, 0, header)
    theirs = DefaultRecordBatch(bytes(raw))
    assert theirs.validate_crc()
    assert [r.offset for r in theirs] == [123_456_789_012, 123_456_789_013, 123_456_789_014]


@pytest.mark.parametrize("codec", sorted(_CODEC_IDS))
def test_compressed_batches_pass_header_checks_but_do_not_decode(codec: str) -> None:
    raw = _kafka_python_batch([(5, b"k", b"v" * 200, [])] * 10, compression=_CODEC_IDS[codec])
    header = read_batch_header(raw)
    assert header.compression == Compression(_CODEC_IDS[codec])
    assert crc_ok(raw, 0, header)
    assert header.records_count == 10
    with pytest.raises(UnsupportedCompressionError):
        decode_batch(raw)


def test_iter_batches_walks_concatenated_batches() -> None:
    a = encode_batch([Record(value=b"1")], base_offset=0)
    b = encode_batch([Record(value=b"2"), Record(value=b"3")], base_offset=1)
    got = [(pos, h.base_offset, h.last_offset) for pos, h in iter_batches(a + b)]
    assert got == [(0, 0, 0), (len(a), 1, 2)]


def test_iter_batches_rejects_truncation_bad_magic_and_bad_length() -> None:
    raw = encode_batch([Record(value=b"hello")])
    with pytest.raises(CorruptRecordError, match="truncated batch header"):
        list(iter_batches(raw + raw[:20]))
    with pytest.raises(CorruptRecordError, match="truncated batch at"):
        list(iter_batches(raw + raw[:-1]))
    bad_magic = bytearray(raw)
    bad_magic[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1"):
        list(iter_batches(bad_magic))
    bad_len = bytearray(raw)
    bad_len[8:12] = (3).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="batchLength"):
        list(iter_batches(bad_len))


def test_crc_detects_a_flipped_byte() -> None:
    raw = bytearray(encode_batch([Record(key=b"k", value=b"value")]))
    header = read_batch_header(raw)
    assert crc_ok(raw, 0, header)
    raw[-1] ^= 0xFF
    assert not crc_ok(raw, 0, header)
    with pytest.raises(CorruptRecordError, match="CRC32C"):
        decode_batch(raw)


def test_our_batch_decodes_in_kafka_python() -> None:
    records = [
        Record(key=b"k1", value=b"v1", timestamp=1_000, headers=(("a", b"1"), ("b", None))),
        Record(key=None, value=None, timestamp=999),
        Record(key=b"", value=b"x" * 300, timestamp=2_000),
    ]
    raw = encode_batch(records, base_offset=10, producer_id=7, producer_epoch=1, base_sequence=4)
    theirs = DefaultRecordBatch(raw)
    assert theirs.validate_crc()
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (7, 1, 4)
    decoded = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert decoded == [
        (10, 1_000, b"k1", b"v1", [("a", b"1"), ("b", None)]),
        (11, 999, None, None, []),
        (12, 2_000, b"", b"x" * 300, []),
    ]
    assert theirs.first_timestamp == 999
    assert theirs.max_timestamp == 2_000


def test_kafka_python_batch_decodes_here() -> None:
    raw = _kafka_python_batch([(50, b"k", b"v", [("h", b"hv")]), (40, None, b"", [])])
    batch = decode_batch(raw)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == [
        (0, 50, b"k", b"v", (("h", b"hv"),)),
        (1, 40, None, b"", ()),
    ]


def test_control_batch() -> None:
    raw = encode_control_batch(
        commit=True, producer_id=9, producer_epoch=2, coordinator_epoch=5, timestamp=77
    )
    batch = decode_batch(raw)
    assert batch.header.is_control and batch.header.is_transactional
    assert control_record_type(batch.records[0]) == CONTROL_TYPE_COMMIT
    theirs = DefaultRecordBatch(raw)
    assert theirs.is_control_batch
    assert [r.commit for r in theirs] == [True]


def test_log_append_time_uses_max_timestamp() -> None:
    raw = encode_batch(
        [Record(value=b"a", timestamp=5), Record(value=b"b", timestamp=9)],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
    )
    assert [r.timestamp for r in decode_batch(raw).records] == [9, 9]


def test_empty_batch_refused() -> None:
    with pytest.raises(ValueError):
        encode_batch([])


_headers = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3)
_records = st.lists(
    st.builds(
        Record,
        key=st.none() | st.binary(max_size=32),
        value=st.none() | st.binary(max_size=200),
        headers=_headers.map(tuple),
        timestamp=st.integers(min_value=0, max_value=2**50),
    ),
    min_size=1,
    max_size=20,
)


@given(records=_records, base_offset=st.integers(0, 2**62), pid=st.integers(-1, 2**40))
def test_round_trip_ours_and_kafka_python(records: list[Record], base_offset: int, pid: int) -> None:
    raw = encode_batch(
        records,
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
    )
    batch = decode_batch(raw)
    assert batch.header.size == len(raw)
    expected = [(base_offset + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == expected
    theirs = DefaultRecordBatch(raw)
    assert theirs.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in theirs] == expected


@given(records=_records)
def test_round_trip_from_kafka_python(records: list[Record]) -> None:
    raw = _kafka_python_batch([(r.timestamp or 0, r.key, r.value, list(r.headers)) for r in records])
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decode_batches(raw)[0].records] == [
        (r.key, r.value, r.headers, r.timestamp) for r in records
    ]


@given(records=_records, stamp=st.integers(min_value=0, max_value=2**50))
def test_batch_of_record_tails_is_the_batch_of_the_records(records: list[Record], stamp: int) -> None:
    """The dead-letter writer's encoding (ready record tails, one timestamp) gives the very bytes
    of the generic one, which kafka-python reads too."""
    tails = [encode_record_tail(r.key, r.value, encode_headers(r.headers), len(r.headers)) for r in records]
    raw = encode_tails_batch(tails, base_timestamp=stamp)
    stamped = [Record(key=r.key, value=r.value, headers=r.headers) for r in records]
    assert raw == encode_batch(stamped, base_timestamp=stamp)
    theirs = DefaultRecordBatch(raw)
    assert theirs.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in theirs] == [
        (i, stamp, r.key, r.value, r.headers) for i, r in enumerate(records)
    ]


def test_batch_of_record_tails_past_the_kept_offset_deltas() -> None:
    records = [Record(value=b"%d" % i) for i in range(70_000)]
    tails = [encode_record_tail(None, r.value, b"", 0) for r in records]
    assert encode_tails_batch(tails, base_timestamp=5) == encode_batch(records, base_timestamp=5)
    assert encode_tails_batch(tails[:3], base_timestamp=5) == encode_batch(records[:3], base_timestamp=5)


def test_batch_of_no_record_tails_refused() -> None:
    with pytest.raises(ValueError):
        encode_tails_batch([], base_timestamp=0)


@given(st.integers(-(2**63), 2**63 - 1))
def test_varint_round_trip(n: int) -> None:
    out = bytearray()
    write_varint(out, n)
    assert read_varint(out, 0) == (n, len(out))


def test_header_size() -> None:
    assert HEADER_SIZE == 61
