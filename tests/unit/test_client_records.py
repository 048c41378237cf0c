"""Decoding fetched batches in the client, including compressed batches written by kafka-python's builder."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from shareq.client.consumer import records_from_blob
from shareq.client.records import iter_record_batches
from shareq.log import Compression, CorruptRecordError
from shareq.log.records import Record, encode_batch

CODECS = {
    Compression.NONE: DefaultRecordBatchBuilder.CODEC_NONE,
    Compression.GZIP: DefaultRecordBatchBuilder.CODEC_GZIP,
    Compression.SNAPPY: DefaultRecordBatchBuilder.CODEC_SNAPPY,
    Compression.LZ4: DefaultRecordBatchBuilder.CODEC_LZ4,
    Compression.ZSTD: DefaultRecordBatchBuilder.CODEC_ZSTD,
}


def kafka_python_batch(codec: Compression, base_offset: int, n: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODECS[codec],
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(n):
        builder.append(
            i, timestamp=1_000 + i, key=b"k%d" % i, value=b"value %d " % i * 30, headers=[("h", b"%d" % i)]
        )
    buf = bytearray(builder.build())
    buf[0:8] = base_offset.to_bytes(8, "big")  # base offset is outside the CRC
    return bytes(buf)


@pytest.mark.parametrize("codec", list(CODECS))
def test_decodes_batches_of_every_codec(codec: Compression) -> None:
    blob = kafka_python_batch(codec, 100, 20)
    (batch,) = iter_record_batches(blob)
    assert batch.header.compression is codec
    assert [r.offset for r in batch.records] == list(range(100, 120))
    r = batch.records[7]
    assert (r.key, r.value, r.headers, r.timestamp) == (b"k7", b"value 7 " * 30, (("h", b"7"),), 1_007)


def test_fetch_blob_skips_offsets_before_the_fetch_offset_and_a_truncated_tail() -> None:
    blob = kafka_python_batch(Compression.LZ4, 0, 10) + encode_batch([Record(value=b"x")], base_offset=10)
    truncated = blob + encode_batch([Record(value=b"y")], base_offset=11)[:30]
    records, next_offset = records_from_blob(truncated, topic="t", partition=0, topic_id=None, from_offset=4)
    assert [r.offset for r in records] == [*range(4, 10), 10]
    assert next_offset == 11


def test_corrupt_compressed_batch_fails_its_crc() -> None:
    blob = bytearray(kafka_python_batch(Compression.GZIP, 0, 3))
    blob[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        list(iter_record_batches(bytes(blob)))
