"""Share-state control batches in a partition log: recognised from headers and keys, cut out of
reads as byte slices, passed over by a gap marker, and never mistaken for transaction markers."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from shareq.log.batch import crc_ok, read_batch_header
from shareq.log.config import LogConfig
from shareq.log.errors import CorruptRecordError
from shareq.log.partition_log import PartitionLog
from shareq.log.records import (
    CONTROL_TYPE_COMMIT,
    CONTROL_TYPE_SHARE_CHECKPOINT,
    CONTROL_TYPE_SHARE_DELTA,
    Record,
    control_record_type,
    decode_batches,
    encode_batch,
    encode_control_batch,
    encode_share_control_batch,
)
from shareq.log.scan import DATA, log_entries
from shareq.log.share_control import gap_batch, is_share_control, visible_batches
from shareq.log.transactions import PartitionTxnState

SMALL = LogConfig(segment_bytes=2_000, index_interval_bytes=128)


def share(kind: int = CONTROL_TYPE_SHARE_DELTA, size: int = 40) -> bytes:
    return encode_share_control_batch(kind, b"s" * size, timestamp=5)


def user(*values: bytes) -> bytes:
    return encode_batch([Record(key=b"k", value=v) for v in values])


def marker(commit: bool = True) -> bytes:
    return encode_control_batch(commit=commit, producer_id=7, producer_epoch=0)


def build(log: PartitionLog, layout: list[bytes]) -> None:
    for batch in layout:
        log.append(batch, now_ms=0)


def test_recognised_from_the_control_flag_and_key_alone() -> None:
    assert is_share_control(share(CONTROL_TYPE_SHARE_CHECKPOINT))
    assert is_share_control(share(CONTROL_TYPE_SHARE_DELTA, size=300))  # a multi-byte length varint
    assert not is_share_control(marker())
    assert not is_share_control(marker(commit=False))
    assert not is_share_control(user(b"\x00\x00\x00\x05"))  # a user record with such a key is data
    with pytest.raises(ValueError):
        encode_share_control_batch(CONTROL_TYPE_COMMIT, b"")


def test_a_read_without_share_state_passes_through_as_the_same_object(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    build(log, [user(b"a"), marker(), user(b"b", b"c")])
    data = log.read(0, 10_000)
    assert data.controls == (len(user(b"a")),)  # the marker's position, noted by the read
    seen = visible_batches(data.records, data.batches, data.controls)
    assert seen.records is data.records and seen.batches == data.batches and not seen.hidden
    log.close()


def test_share_state_is_cut_out_as_slices_and_markers_stay(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    layout = [share(), share(), user(b"a"), share(), marker(), user(b"b", b"c"), share(), share()]
    build(log, layout)
    data = log.read(0, 10_000)
    seen = visible_batches(data.records, data.batches, data.controls)
    expected = b"".join(
        data.records[pos : pos + len(batch)]
        for pos, batch in _positions(layout)
        if not is_share_control(batch)
    )
    assert seen.records == expected
    assert seen.batches == ((2, 2), (4, 4), (5, 6))
    assert seen.hidden == ((0, 1), (3, 3), (7, 8)) and seen.trailing
    kept = decode_batches(seen.records)
    assert [b.header.base_offset for b in kept] == [2, 4, 5]  # offsets as the log gave them
    assert all(crc_ok(seen.records, p, read_batch_header(seen.records, p)) for p in _starts(seen.records))
    whole = visible_batches(data.records, data.batches, data.controls, cut=False)
    assert whole.records is data.records and whole.batches == seen.batches
    log.close()


def _positions(layout: list[bytes]) -> list[tuple[int, bytes]]:
    out, pos = [], 0
    for b in layout:
        out.append((pos, b))
        pos += len(b)
    return out


def _starts(records: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(records):
        out.append(pos)
        pos += read_batch_header(records, pos).size
    return out


def test_a_read_of_share_state_alone_leaves_nothing_but_says_what_it_hid(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    build(log, [user(b"a")] + [share() for _ in range(5)])
    data = log.read(1, 10_000)
    seen = visible_batches(data.records, data.batches, data.controls)
    assert (seen.records, seen.batches, seen.hidden, seen.trailing) == (b"", (), ((1, 5),), True)
    log.close()


def test_gap_batch_is_a_producerless_commit_marker_at_its_last_offset() -> None:
    gap = gap_batch(10, 14)
    [batch] = decode_batches(gap)  # our decoder checks the CRC32C
    header = batch.header
    assert (header.base_offset, header.last_offset, header.producer_id) == (10, 14, -1)
    assert header.is_control and not header.is_transactional and not is_share_control(gap)
    [record] = batch.records
    assert (record.offset, control_record_type(record)) == (14, CONTROL_TYPE_COMMIT)
    theirs = DefaultRecordBatch(bytearray(gap))  # kafka-python reads it the same way
    assert theirs.validate_crc() and theirs.is_control_batch
    assert [r.offset for r in theirs] == [14]


# The bytes both writers of a batch header gave before they shared one sealing function: a gap
# marker (last offset delta spanning the gap, 70,000 offsets past a base above 2**32) and an
# ordinary two-record batch (last offset delta count - 1).
GAP_BYTES = bytes.fromhex(
    "000001000000000000000044ffffffff02d24bab1000200001117000000000000000050000000000000005"
    "ffffffffffffffffffffffffffff00000001240000e0c50808000000010c00000000000000"
)
BATCH_BYTES = bytes.fromhex(
    "000000000000000300000042ffffffff02ccd14aa600000000000100000000000000050000000000000005"
    "ffffffffffffffffffffffffffff0000000210000000026b0276000e00000201027700"
)


def test_gap_marker_and_plain_batch_keep_their_bytes() -> None:
    assert gap_batch(2**40, 2**40 + 70_000, timestamp=5) == GAP_BYTES
    two = [Record(key=b"k", value=b"v", timestamp=5), Record(value=b"w")]
    assert encode_batch(two, base_offset=3) == BATCH_BYTES


def test_visible_end_follows_appends_and_is_found_again_after_reopening(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    assert log.visible_end_offset == 0
    build(log, [user(b"a", b"b"), marker()])
    assert log.visible_end_offset == 3  # a transaction marker is not share state
    build(log, [share() for _ in range(60)])  # several segments and index entries of share state
    assert log.segment_count > 1 and log.log_end_offset == 63
    assert log.visible_end_offset == 3
    log.close()
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    assert log.visible_end_offset == 3  # walked back over the tail
    log.append(user(b"c"), now_ms=0, allow_control=False)
    assert log.visible_end_offset == 64
    build(log, [share(), share()])
    assert (log.visible_end_offset, log.visible_stable_offset, log.log_end_offset) == (64, 64, 66)
    log.close()
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    assert log.visible_end_offset == 64
    log.close()


def test_clients_cannot_append_share_state(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    for kind in (CONTROL_TYPE_SHARE_CHECKPOINT, CONTROL_TYPE_SHARE_DELTA):
        with pytest.raises(CorruptRecordError):
            log.append(share(kind), now_ms=0, allow_control=False)
    assert log.log_end_offset == 0
    log.close()


def test_scans_and_the_transaction_index_do_not_take_share_state_for_markers(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    txn_data = encode_batch(
        [Record(key=b"t", value=b"1")], producer_id=7, producer_epoch=0, transactional=True
    )
    # A share-state batch that (wrongly) carried the transaction's producer id: still not an end.
    forged = bytearray(
        encode_batch(
            [Record(key=b"\x00\x00\x00\x06", value=b"x")],
            producer_id=7,
            producer_epoch=0,
            transactional=True,
            control=True,
        )
    )
    build(log, [txn_data, share(), bytes(forged), user(b"a")])
    assert log.transaction_open(7) and log.last_stable_offset == 0
    build(log, [marker(commit=False)])
    assert not log.transaction_open(7)
    entries = list(log_entries(log))
    assert [(e.key, e.marker) for e in entries] == [(b"t", DATA), (b"k", DATA), (None, 0)]
    log.close()
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)  # the rebuilt index agrees
    assert [(a.first_offset, a.last_offset) for a in log.aborted_transactions(0, 10)] == [(0, 4)]
    log.close()
    state = PartitionTxnState()
    state.observe_data(9, 0)
    state.observe_marker(9, CONTROL_TYPE_SHARE_CHECKPOINT, 1, 1)
    assert state.is_open(9)


def test_a_lookup_by_time_passes_over_share_state(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    log.append(encode_batch([Record(value=b"old", timestamp=100)]), now_ms=0)
    log.append(encode_share_control_batch(CONTROL_TYPE_SHARE_DELTA, b"s", timestamp=5_000), now_ms=0)
    log.append(encode_batch([Record(value=b"new", timestamp=4_000)]), now_ms=0)
    found = log.offset_for_timestamp(200)
    assert found is not None and (found.offset, found.timestamp) == (2, 4_000)
    log.close()
