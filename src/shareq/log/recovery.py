"""Opening a partition log: recovery from whatever a crash or a clean close left on disk.

Segments before the checkpoint's recovery point are trusted; from there on batches are rescanned
with CRC checks, the first torn, malformed, CRC-failing or offset-regressing batch ends the log
(the file is cut there and later segments deleted), and producer state is rebuilt from the
snapshot plus the batch headers after it. A helper module of ``partition_log`` (see
docs/ARCHITECTURE.md, "Checkpoint and recovery").
"""

from __future__ import annotations

import os
from bisect import bisect_right
from typing import TYPE_CHECKING

from .batch import CONTROL_MASK, HEADER_SIZE, TRANSACTIONAL_MASK
from .checkpoint import PRODUCER_SNAPSHOT_FILE, read_checkpoint
from .producer_state import BatchMetadata, ProducerStateManager
from .segment import (
    H_BASE_OFFSET,
    H_LAST_OFFSET_DELTA,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    LogSegment,
    scan_batches,
    scan_headers,
)
from .transactions import control_type

if TYPE_CHECKING:
    from .partition_log import PartitionLog

_MAX_SEQUENCE = 0x7FFFFFFF


def recover(log: PartitionLog, now_ms: int) -> None:
    """Rebuild ``log``'s segments, indexes, log start and producer state from its directory."""
    for stray in log.directory.glob("*.tmp"):
        stray.unlink()
    bases = sorted(
        int(p.stem) for p in log.directory.glob("*" + LOG_SUFFIX) if p.stem.isdigit() and len(p.stem) == 20
    )
    checkpoint = read_checkpoint(log.directory)
    fresh = not bases
    if fresh:
        start = max(checkpoint.log_start_offset, checkpoint.recovery_offset) if checkpoint else 0
        bases = [start]
        LogSegment(log.directory, start).log_path.touch()
    for base in bases:
        seg = LogSegment(log.directory, base, created_ms=now_ms)
        seg.size = seg.log_path.stat().st_size
        log._segments.append(seg)
    for seg, nxt in zip(log._segments, bases[1:], strict=False):
        seg.next_offset = nxt
    log._bases = list(bases)

    # Segments from the recovery point on are checked batch by batch, CRC included; in the
    # segment holding the recovery point only from its last index entry below that point.
    first_dirty, resume_size = 0, -1
    if checkpoint is not None and checkpoint.recovery_base in bases:
        first_dirty = bases.index(checkpoint.recovery_base)
        resume_size = checkpoint.recovery_size
        log._recovery = (checkpoint.recovery_base, checkpoint.recovery_size, checkpoint.recovery_offset)
    clean = fresh
    for i in range(first_dirty, len(log._segments)):
        seg = log._segments[i]
        file_size = seg.size
        position = 0
        if i == first_dirty and 0 < resume_size <= file_size and seg.load_indexes(MAX_RELATIVE_OFFSET):
            position, _ = seg.resume_point(resume_size)
        else:
            seg.reset_indexes()
            seg.size, seg.next_offset = 0, seg.base_offset
        clean = fresh or (i == first_dirty == len(log._segments) - 1 and resume_size == file_size)
        _scan_segment(log, seg, position, file_size)
        if seg.size < file_size:
            _truncate_tail(log, i, seg)
            clean = False
            break
    for seg in log._segments[:-1]:
        if seg.indexes_loaded:
            seg.seal_time_index()
            seg.write_indexes()
            log._loaded.append(seg)
    log._unload_surplus_indexes()
    active = log._segments[-1]
    active.created_ms = now_ms
    active.open(writable=True)

    leo = active.next_offset
    start = log._segments[0].base_offset
    if checkpoint is not None:
        start = max(start, checkpoint.log_start_offset)
    log._log_start = min(start, leo)
    rebuild_producer_state(log)
    if not clean:
        log.flush()  # record the recovered state so the next open starts from here


def _scan_segment(log: PartitionLog, seg: LogSegment, position: int, file_size: int) -> None:
    """Track every valid batch from ``position``; ``seg.size`` ends at the last valid one."""
    fd = seg.open(writable=False)
    try:
        for pos, header in scan_batches(fd, position, file_size, verify_crc=True):
            if header[H_BASE_OFFSET] < seg.next_offset:
                break  # offsets went backwards: not something this log wrote
            seg.track_header(pos, header, log.config.index_interval_bytes)
    finally:
        seg.close()


def _truncate_tail(log: PartitionLog, index: int, seg: LogSegment) -> None:
    """Cut segment ``index`` at its last valid batch and drop every later segment."""
    with open(seg.log_path, "r+b") as f:
        f.truncate(seg.size)
        os.fsync(f.fileno())
    for later in log._segments[index + 1 :]:
        later.delete_files()
    del log._segments[index + 1 :]
    del log._bases[index + 1 :]


def rebuild_producer_state(log: PartitionLog) -> None:
    """Producer state at the log end: the snapshot, then the headers of the batches after it."""
    leo = log.log_end_offset
    start = log._segments[0].base_offset
    snapshot = log.directory / PRODUCER_SNAPSHOT_FILE
    try:
        offset, state = ProducerStateManager.from_json(snapshot.read_text())
        if start <= offset <= leo:
            log._producers, start = state, offset
        else:
            snapshot.unlink()  # describes data that is gone; never let it match again
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError):
        snapshot.unlink(missing_ok=True)
    if start >= leo:
        return
    for seg in log._segments[max(0, bisect_right(log._bases, start) - 1) :]:
        log._ensure_indexes(seg)
        _, pos = seg.index.lookup(start - seg.base_offset)
        fd = log._read_fd(seg)
        for p, h in scan_headers(fd, pos, seg.size):
            base = h[H_BASE_OFFSET]
            if base >= start:
                _observe_producer(log, h[9], h[10], h[11], h[5], base, base + h[H_LAST_OFFSET_DELTA])
                if h[5] & TRANSACTIONAL_MASK and h[9] >= 0:
                    _observe_transaction(log, fd, p, h[9], h[5], base)


def _observe_transaction(
    log: PartitionLog, fd: int, pos: int, producer_id: int, attributes: int, base: int
) -> None:
    """Replay a transactional batch into the open-transaction and aborted indexes."""
    txns = log._producers.txns
    if not attributes & CONTROL_MASK:
        txns.observe_data(producer_id, base)
        return
    head = os.pread(fd, HEADER_SIZE + 32, pos)
    txns.observe_marker(producer_id, control_type(head), base, base)


def _observe_producer(
    log: PartitionLog, producer_id: int, epoch: int, base_seq: int, attributes: int, first: int, last: int
) -> None:
    if producer_id < 0:
        return
    if attributes & CONTROL_MASK or base_seq < 0:
        log._producers.update(producer_id, epoch, None)
    else:
        last_seq = (base_seq + last - first) % (_MAX_SEQUENCE + 1)
        log._producers.update(producer_id, epoch, BatchMetadata(base_seq, last_seq, first, last))
