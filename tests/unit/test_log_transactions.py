"""Partition producer state for transactions: open transactions, the LSO and the aborted index
are the same after a clean reopen, a reopen after a crash (no flush) and a reopen from a
snapshot plus the batches after it; and read_committed reads stop at the LSO."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.log.config import LogConfig
from shareq.log.errors import CorruptRecordError
from shareq.log.partition_log import PartitionLog
from shareq.log.records import Record, encode_batch, encode_control_batch
from shareq.log.transactions import AbortedTxn, control_type, stable_prefix


def data(pid: int, epoch: int = 0, n: int = 1, seq: int = 0) -> bytes:
    return encode_batch(
        [Record(value=b"v")] * n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )


def plain(n: int = 1) -> bytes:
    return encode_batch([Record(value=b"p")] * n)


def test_lso_aborted_index_and_control_type(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), now_ms=0)
    log.append(plain(2), now_ms=0)  # 0-1
    log.append(data(7, n=3), now_ms=0)  # 2-4
    log.append(plain(), now_ms=0)  # 5
    assert log.last_stable_offset == 2 and log.log_end_offset == 6
    log.append(data(8, n=2), now_ms=0)  # 6-7
    log.append_marker(producer_id=7, producer_epoch=0, commit=False, now_ms=0)  # 8
    assert log.last_stable_offset == 6
    assert log.aborted_transactions(0, 100) == [AbortedTxn(7, 2, 8, 6)]
    assert log.aborted_transactions(9, 100) == []
    log.append_marker(producer_id=8, producer_epoch=0, commit=True, now_ms=0)  # 9
    assert log.last_stable_offset == log.log_end_offset == 10
    assert control_type(encode_control_batch(commit=True, producer_id=1, producer_epoch=0)) == 1
    assert control_type(encode_control_batch(commit=False, producer_id=1, producer_epoch=0)) == 0
    with pytest.raises(CorruptRecordError):
        log.append(
            encode_control_batch(commit=True, producer_id=7, producer_epoch=0), now_ms=0, allow_control=False
        )
    read = log.read(0, 1 << 20)
    prefix, count = stable_prefix(read.records, 6)
    assert count == 6 and prefix == read.records[: len(prefix)] and len(prefix) < len(read.records)
    log.close()


steps = st.lists(
    st.tuples(
        st.sampled_from(["data", "plain", "commit", "abort", "flush", "crash", "close"]), st.integers(0, 3)
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(steps)
def test_reopen_rebuilds_the_transaction_state(history: list[tuple[str, int]]) -> None:
    root = Path(tempfile.mkdtemp(prefix="shareq-txn-"))
    config = LogConfig(segment_bytes=600, index_interval_bytes=100, retention_ms=-1)
    log = PartitionLog.open(root / "t-0", config, now_ms=0)
    sequences: dict[int, int] = {}
    try:
        for op, pid in history:
            pid += 100
            if op == "data":
                seq = sequences.get(pid, 0)
                log.append(data(pid, seq=seq, n=2), now_ms=0)
                sequences[pid] = seq + 2
            elif op == "plain":
                log.append(plain(), now_ms=0)
            elif op in ("commit", "abort"):
                log.append_marker(producer_id=pid, producer_epoch=0, commit=op == "commit", now_ms=0)
            elif op == "flush":
                log.flush()
            else:
                before = log.producer_state.txns.to_json(), log.last_stable_offset
                if op == "crash":
                    log._close_fds()  # no flush, no snapshot: recovery scans the headers
                else:
                    log.close()
                snapshot = root / "t-0" / "producer.snapshot"
                if op == "crash" and pid == 0 and snapshot.exists():
                    os.unlink(snapshot)  # rebuilt from the whole log
                log = PartitionLog.open(root / "t-0", config, now_ms=0)
                assert (log.producer_state.txns.to_json(), log.last_stable_offset) == before
    finally:
        log.delete()
        shutil.rmtree(root, ignore_errors=True)
