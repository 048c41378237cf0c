"""slice_batches: the records of a ShareFetch are the whole log batches overlapping the acquired
ranges, cut out of one log read by their headers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shareq.log.batch import iter_batches
from shareq.log.records import Record, encode_batch
from shareq.server.share.manager import slice_batches
from shareq.share import AcquiredRecords


def log_read(sizes: list[int]) -> tuple[bytes, list[tuple[int, int]]]:
    out, bounds, offset = b"", [], 0
    for size in sizes:
        out += encode_batch([Record(value=b"x" * 10) for _ in range(size)], base_offset=offset)
        bounds.append((offset, offset + size - 1))
        offset += size
    return out, bounds


@given(
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=8),
    picks=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 4)), max_size=5),
)
def test_slices_exactly_the_overlapping_batches(sizes: list[int], picks: list[tuple[int, int]]) -> None:
    data, bounds = log_read(sizes)
    end = bounds[-1][1]
    ranges: list[AcquiredRecords] = []
    cursor = 0
    for start, length in sorted(picks):
        first = max(start, cursor)
        last = min(first + length, end)
        if first > end or first > last:
            continue
        ranges.append(AcquiredRecords(first_offset=first, last_offset=last, delivery_count=1))
        cursor = last + 1
    got = slice_batches(data, bounds, ranges)
    expected = [
        (first, last)
        for first, last in bounds
        if any(r.first_offset <= last and r.last_offset >= first for r in ranges)
    ]
    assert [(h.base_offset, h.base_offset + h.last_offset_delta) for _, h in iter_batches(got)] == expected
    if expected == bounds:
        assert got is data  # the whole read passes through without a copy
