"""Share-state control batches (SHARE_CHECKPOINT 5, SHARE_DELTA 6) kept out of every reader's sight.

The in-log persister writes a share-partition's durable state as control batches into the
topic-partition itself (seed 004). They are for the share-partition leader alone: a Fetch, a
ShareFetch or the Spark source never hands one to a client. They are found from the batch header's
control flag plus the 4-byte control key (version i16, type i16) of the batch's single uncompressed
record, read with ``struct`` and a few varints; no record is decoded.

:func:`visible_batches` cuts a read's bytes around them as slices. A reader that needs to move
past share state at the end of what it read gets :func:`gap_batch`: a producer-less COMMIT
marker whose batch spans the hidden offsets, which every client steps over. Share state between
two other batches needs nothing: clients take offset gaps in their stride (compaction makes them).
Transaction markers (types 0 and 1) are control batches too and pass through unchanged.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from .batch import ATTRIBUTES_OFFSET, COMPRESSION_MASK, CONTROL_MASK, HEADER_SIZE, LOG_OVERHEAD
from .records import CONTROL_TYPE_COMMIT, SHARE_CONTROL_TYPES, encode_spanning_control_batch
from .transactions import control_type

_TYPE = struct.Struct(">h")
_LENGTH = struct.Struct(">i")
_BASE = struct.Struct(">q")
_CONTROL_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch


def is_share_control(buf: bytes | bytearray | memoryview, pos: int = 0) -> bool:
    """Whether the whole batch at ``pos`` is a SHARE_CHECKPOINT or SHARE_DELTA control batch.

    The first record's key is reached by skipping three varints (length, timestampDelta,
    offsetDelta) and the attributes byte; a control key is 4 bytes (length varint 8, zigzag)."""
    attributes = buf[pos + ATTRIBUTES_OFFSET + 1]
    if not attributes & CONTROL_MASK or attributes & COMPRESSION_MASK:
        return False
    try:
        p = pos + HEADER_SIZE
        while buf[p] & 0x80:  # record length
            p += 1
        p += 2  # its last byte, then the record's attributes
        while buf[p] & 0x80:  # timestampDelta
            p += 1
        p += 1
        while buf[p] & 0x80:  # offsetDelta
            p += 1
        p += 1
        if buf[p] != 8:  # keyLength 4
            return control_type(buf, pos) in SHARE_CONTROL_TYPES  # an odd encoding: the long way
        return _TYPE.unpack_from(buf, p + 3)[0] in SHARE_CONTROL_TYPES
    except (IndexError, struct.error):
        return False


class Visible(NamedTuple):
    """A read with the share-state control batches cut out.

    ``records`` holds the other batches' bytes (the read itself when nothing was cut), ``batches``
    their (first, last) offsets, ``hidden`` the (first, last) offsets of each run of consecutive
    share-state batches cut, and ``trailing`` whether the read ended with such a run.
    """

    records: bytes
    batches: tuple[tuple[int, int], ...]
    hidden: tuple[tuple[int, int], ...]
    trailing: bool


def visible_batches(
    records: bytes,
    batches: tuple[tuple[int, int], ...],
    controls: Sequence[int],
    *,
    cut: bool = True,
) -> Visible:
    """``records`` (whole batches, offsets ``batches``) without its share-state control batches.

    ``controls`` are the byte positions of the control batches in ``records`` (the log read notes
    them while walking headers), so a read without control batches costs nothing more here and
    one with some costs a key read per control batch plus one copy of the bytes kept. With
    ``cut=False`` the bytes are left whole (a share fetch slices acquired batches out itself).
    """
    if not controls:
        return Visible(records, batches, (), False)
    shares: list[tuple[int, int, int]] = []  # (position, size, base offset) of each hidden batch
    for pos in controls:
        if is_share_control(records, pos):
            size = _LENGTH.unpack_from(records, pos + 8)[0] + LOG_OVERHEAD
            shares.append((pos, size, _BASE.unpack_from(records, pos)[0]))
    if not shares:
        return Visible(records, batches, (), False)
    kept_bytes = records
    if cut:
        view = memoryview(records)
        pieces: list[memoryview] = []
        start = 0
        for pos, size, _ in shares:
            if pos > start:
                pieces.append(view[start:pos])
            start = pos + size
        if start < len(records):
            pieces.append(view[start:])
        kept_bytes = b"".join(pieces)
    gone = {base for _, _, base in shares}
    kept: list[tuple[int, int]] = []
    hidden: list[tuple[int, int]] = []
    trailing = False
    for first, last in batches:
        if first in gone:
            if trailing and hidden:
                hidden[-1] = (hidden[-1][0], last)
            else:
                hidden.append((first, last))
            trailing = True
        else:
            kept.append((first, last))
            trailing = False
    return Visible(kept_bytes, tuple(kept), tuple(hidden), trailing)


def gap_batch(first: int, last: int, timestamp: int = -1) -> bytes:
    """A batch spanning offsets ``first..last`` that a client steps over: a COMMIT marker at
    ``last`` from no producer (producer id -1), in a control batch whose ``lastOffsetDelta`` spans
    the hidden offsets.

    A control record rather than an empty batch: librdkafka moves the fetch offset past an empty
    batch but the application's position (what ``position()`` reports and a commit stores) only
    past a message or a control record, so only a marker brings a consumer's lag to zero when
    share state ends the log. Every client ignores a COMMIT; no producer means no transaction.
    """
    return encode_spanning_control_batch(
        CONTROL_TYPE_COMMIT,
        _CONTROL_VALUE.pack(0, 0),
        first_offset=first,
        last_offset=last,
        timestamp=timestamp,
    )
