"""Key-hash sidecars beside the segments: computed once per batch (compressed batches too), rebuilt
when missing, torn, corrupt or stale, never changing the hashes they give."""

from __future__ import annotations

import logging
import zlib
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from shareq.log.config import LogConfig
from shareq.log.key_hashes import KeyHashIndex, key_hash
from shareq.log.partition_log import PartitionLog
from shareq.log.records import Record, encode_batch

SMALL = LogConfig(segment_bytes=2_000, index_interval_bytes=256)
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def compressed(codec: int, keys: list[bytes | None]) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    for i, key in enumerate(keys):
        builder.append(i, timestamp=1_000, key=key, value=b"v" * 50, headers=[])
    return bytes(builder.build())


def fill(plog: PartitionLog) -> list[int]:
    """Plain, null-keyed, compressed (every codec) and control batches; the expected hashes."""
    expected: list[int] = []
    for i in range(30):
        keys: list[bytes | None] = [b"k%d" % (i * 3 + j) for j in range(3)]
        if i % 5 == 0:
            keys[1] = None
        plog.append(
            encode_batch([Record(key=k, value=b"x" * 40, timestamp=1_000) for k in keys]), now_ms=1_000
        )
        expected += [key_hash(k) for k in keys]
    for name, codec in CODECS.items():
        keys = [name.encode() + b"%d" % j for j in range(4)] + [None]
        plog.append(compressed(codec, keys), now_ms=1_000)
        expected += [key_hash(k) for k in keys]
    plog.append_marker(producer_id=5, producer_epoch=0, commit=True, now_ms=1_000)
    expected.append(0)
    return expected


@pytest.fixture
def plog(tmp_path: Path) -> PartitionLog:
    return PartitionLog.open(tmp_path / "t-0", SMALL, now_ms=0)


def test_hashes_of_every_kind_of_batch(plog: PartitionLog) -> None:
    expected = fill(plog)
    assert plog.segment_count > 2
    index = KeyHashIndex(plog)
    got = index.hashes(0, plog.log_end_offset - 1)
    assert got.tolist() == expected
    assert expected[0] == zlib.crc32(b"k0") and expected[1] == 0 and expected[2] != 0
    assert sorted(p.name for p in plog.directory.glob("*.keys"))  # sidecars beside the segments
    # a second index (a restart) reads the sidecars: no batch hashed again
    again = KeyHashIndex(plog)
    assert again.hashes(0, plog.log_end_offset - 1).tolist() == expected
    assert again.batches_hashed == 0 and again.rebuilt == 0


def test_a_partial_range_and_offsets_past_the_end(plog: PartitionLog) -> None:
    expected = fill(plog)
    index = KeyHashIndex(plog)
    assert index.hashes(40, 60).tolist() == expected[40:61]
    assert index.hashes(10, 20).tolist() == expected[10:21]  # below what was computed: started again
    end = plog.log_end_offset
    assert index.hashes(end - 2, end + 3).tolist() == [*expected[-2:], 0, 0, 0, 0]


@pytest.mark.parametrize("damage", ["delete", "truncate", "corrupt", "garbage"])
def test_a_damaged_sidecar_is_rebuilt_with_a_warning(
    plog: PartitionLog, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    expected = fill(plog)
    KeyHashIndex(plog).hashes(0, plog.log_end_offset - 1)
    sidecars = sorted(plog.directory.glob("*.keys"))
    victim = sidecars[1]
    data = victim.read_bytes()
    if damage == "delete":
        victim.unlink()
    elif damage == "truncate":
        victim.write_bytes(data[: len(data) - 7])
    elif damage == "corrupt":
        victim.write_bytes(data[:40] + bytes([data[40] ^ 0xFF]) + data[41:])
    else:
        victim.write_bytes(b"nonsense")
    with caplog.at_level(logging.WARNING, logger="shareq.log.key_hashes"):
        index = KeyHashIndex(plog)
        assert index.hashes(0, plog.log_end_offset - 1).tolist() == expected
    if damage != "delete":
        assert index.rebuilt == 1
        assert "rebuilding it from the log" in caplog.text
    assert index.batches_hashed >= 1
    assert KeyHashIndex(plog).hashes(0, plog.log_end_offset - 1).tolist() == expected


def test_a_stale_sidecar_is_detected_by_the_batch_crcs(tmp_path: Path) -> None:
    """The log was written again at the same offsets (a torn tail truncated, then new records): the
    sidecar's entries no longer match the batches and are recomputed."""
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), now_ms=0)
    plog.append(encode_batch([Record(key=b"old", value=b"x", timestamp=1)]), now_ms=1)
    KeyHashIndex(plog).hashes(0, 0)
    sidecar = next(plog.directory.glob("*.keys"))
    kept = sidecar.read_bytes()
    plog.close()
    for p in (tmp_path / "t-0").iterdir():
        if p.suffix != ".keys":
            p.unlink()
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), now_ms=0)
    plog.append(encode_batch([Record(key=b"new", value=b"x", timestamp=1)]), now_ms=1)
    sidecar.write_bytes(kept)
    index = KeyHashIndex(plog)
    assert index.hashes(0, 0).tolist() == [key_hash(b"new")]
    assert index.rebuilt == 1


def test_retention_deletes_the_sidecar_with_its_segment(plog: PartitionLog) -> None:
    fill(plog)
    KeyHashIndex(plog).hashes(0, plog.log_end_offset - 1)
    before = len(list(plog.directory.glob("*.keys")))
    plog.advance_log_start(60)
    plog.enforce_retention(now_ms=10**12)
    assert len(list(plog.directory.glob("*.keys"))) < before


def test_a_sidecar_deleted_under_a_live_index_is_started_again(plog: PartitionLog) -> None:
    """Compaction replaces a segment and deletes its sidecar while an index holds its hashes."""
    expected = fill(plog)
    index = KeyHashIndex(plog)
    index.hashes(0, plog.log_end_offset - 1)
    for sidecar in plog.directory.glob("*.keys"):
        sidecar.unlink()
    plog.append(encode_batch([Record(key=b"late", value=b"x", timestamp=1_000)]), now_ms=1_000)
    expected.append(key_hash(b"late"))
    assert index.hashes(0, plog.log_end_offset - 1).tolist() == expected
    assert all(p.read_bytes().startswith(b"SQKH") for p in plog.directory.glob("*.keys"))
    assert KeyHashIndex(plog).hashes(0, plog.log_end_offset - 1).tolist() == expected
