"""The executors' columnar decoder agrees with the log's record codec, batch by batch."""

from __future__ import annotations

import gzip
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ci_support import require

require("pyarrow")
require("pyspark")

from shareq.log.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD
from shareq.log.errors import CorruptRecordError
from shareq.log.records import Record, decode_batches, encode_batch
from shareq.spark.decode import RunCursor, decode_into
from shareq.spark.offsets import coalesce
from shareq.spark.schema import ArrowBuilder, source_schema

blobs = st.one_of(st.none(), st.binary(max_size=300))
records = st.builds(
    Record,
    key=blobs,
    value=blobs,
    headers=st.lists(st.tuples(st.text(max_size=5), blobs), max_size=2).map(tuple),
    timestamp=st.integers(0, 2**41),
)


def _gzip(batch: bytes) -> bytes:
    """The same batch with its records section gzip-compressed (attributes and CRC fixed)."""
    from crc32c import crc32c

    out = bytearray(batch[:HEADER_SIZE]) + gzip.compress(batch[HEADER_SIZE:])
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
    out[22] |= 1  # codec GZIP in the low bits of the i16 attributes
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return bytes(out)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.lists(records, min_size=1, max_size=12), st.booleans()), min_size=1, max_size=4),
    st.data(),
)
def test_decode_into_matches_the_record_codec(
    compressed_batches: list[tuple[list[Record], bool]], data: st.DataObject
) -> None:
    """Plain and compressed batches, mixed in one fetch, come out in offset order."""
    batches = [recs for recs, _ in compressed_batches]
    blob = b""
    base = 5
    for recs, compress in compressed_batches:
        encoded = encode_batch(recs, base_offset=base)
        blob += _gzip(encoded) if compress else encoded
        base += len(recs)
    expected = {r.offset: r for b in decode_batches(_plain(batches)) for r in b.records}
    wanted = sorted(data.draw(st.sets(st.sampled_from(sorted(expected)), min_size=1)))
    counts = {o: 1 + o % 3 for o in wanted}
    runs = coalesce((o, counts[o]) for o in wanted)
    start = data.draw(st.sampled_from([5, wanted[0]]))

    schema = source_schema(True)
    builder = ArrowBuilder(schema, topic="t", partition=2)
    next_offset, added, used = decode_into(blob, RunCursor(runs), builder, share=True, position=start)
    batch = builder.flush()
    rows = batch.to_pylist()
    micros = batch.column("timestamp").cast("int64").to_pylist()

    assert added == len(wanted) and next_offset <= base and used <= len(blob)
    assert [r["offset"] for r in rows] == wanted
    for row, us in zip(rows, micros, strict=True):
        rec = expected[row["offset"]]
        assert row["key"] == rec.key and row["value"] == rec.value
        assert [(h["key"], h["value"]) for h in row["headers"]] == list(rec.headers)
        assert row["deliveryCount"] == counts[row["offset"]]
        assert row["topic"] == "t" and row["partition"] == 2
        assert us == rec.timestamp * 1000


def _plain(batches: list[list[Record]]) -> bytes:
    blob = b""
    base = 5
    for recs in batches:
        blob += encode_batch(recs, base_offset=base)
        base += len(recs)
    return blob


def test_a_truncated_tail_is_left_for_the_next_fetch() -> None:
    first = encode_batch([Record(value=b"a"), Record(value=b"b")], base_offset=0)
    second = encode_batch([Record(value=b"c")], base_offset=2)
    builder = ArrowBuilder(source_schema(False), topic="t", partition=0)
    next_offset, added, used = decode_into(
        first + second[:-3], RunCursor(((0, 2, 1),)), builder, share=False, position=0
    )
    assert (next_offset, added, used) == (2, 2, len(first))
    assert builder.flush().column("deliveryCount").to_pylist() == [None, None]


def test_batches_outside_the_runs_are_neither_checked_nor_decoded() -> None:
    """A task reads a slice of a partition: a Fetch returns batches around it, which it skips."""
    first = encode_batch([Record(value=b"a"), Record(value=b"b")], base_offset=0)
    gap = bytearray(encode_batch([Record(value=b"c")], base_offset=2))
    gap[-1] ^= 0xFF  # fails its CRC, but no run wants offset 2
    wanted = encode_batch([Record(value=b"d")], base_offset=3)
    past = bytearray(encode_batch([Record(value=b"e")], base_offset=4))
    past[-1] ^= 0xFF  # past the task's last offset
    builder = ArrowBuilder(source_schema(False), topic="t", partition=0)
    blob = first + bytes(gap) + wanted + bytes(past)
    next_offset, added, used = decode_into(
        blob, RunCursor(((0, 1, 1), (3, 3, 2))), builder, share=True, position=0
    )
    assert (next_offset, added, used) == (4, 3, len(blob) - len(past))
    batch = builder.flush()
    assert batch.column("value").to_pylist() == [b"a", b"b", b"d"]
    assert batch.column("deliveryCount").to_pylist() == [1, 1, 2]
    for runs in (((0, 2, 1),), ((0, 4, 1),)):
        with pytest.raises(CorruptRecordError):
            decode_into(blob, RunCursor(runs), builder, share=True, position=0)
