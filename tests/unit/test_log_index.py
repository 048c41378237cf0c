"""Sparse offset and time indexes: lookups, truncation and their file form."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shareq.log.index import OffsetIndex, TimeIndex


def _offset_index(pairs: list[tuple[int, int]]) -> OffsetIndex:
    index = OffsetIndex()
    for offset, position in pairs:
        index.append(offset, position)
    return index


_rising = st.lists(st.integers(1, 1_000), min_size=0, max_size=40).map(
    lambda steps: [(sum(steps[: i + 1]), 10 * sum(steps[: i + 1])) for i in range(len(steps))]
)


@given(pairs=_rising, target=st.integers(0, 50_000))
def test_offset_lookup_finds_the_last_entry_at_or_before(pairs: list[tuple[int, int]], target: int) -> None:
    index = _offset_index(pairs)
    expected = max((p for p in pairs if p[0] <= target), default=(0, 0))
    assert index.lookup(target) == expected


@given(pairs=_rising)
def test_offset_index_file_round_trip(pairs: list[tuple[int, int]]) -> None:
    index = _offset_index(pairs)
    data = index.to_bytes()
    assert len(data) == 8 * len(pairs)
    size = pairs[-1][1] + 1 if pairs else 0
    parsed = OffsetIndex.from_bytes(data, size)
    assert parsed is not None
    assert list(zip(parsed.offsets, parsed.positions, strict=True)) == pairs
    if pairs:
        assert OffsetIndex.from_bytes(data, pairs[-1][1]) is None  # points past the segment
        assert OffsetIndex.from_bytes(data[:-1], size) is None
        assert data[:8] == pairs[0][0].to_bytes(4, "big") + pairs[0][1].to_bytes(4, "big")


def test_offset_index_rejects_non_monotonic_and_truncates() -> None:
    index = _offset_index([(5, 100), (3, 200)])
    assert OffsetIndex.from_bytes(index.to_bytes(), 1_000) is None
    index = _offset_index([(1, 100), (2, 200), (3, 300)])
    index.truncate_to_position(200)
    assert list(index.positions) == [100]
    assert index.last_position() == 100


@given(stamps=st.lists(st.integers(-1, 100), max_size=40), target=st.integers(0, 101))
def test_time_index_keeps_rising_entries(stamps: list[int], target: int) -> None:
    index = TimeIndex()
    for rel, ts in enumerate(stamps):
        index.maybe_append(ts, rel)
    assert list(index.timestamps) == sorted(set(index.timestamps))
    assert all(t >= 0 for t in index.timestamps)
    below = [o for t, o in zip(index.timestamps, index.offsets, strict=True) if t < target]
    assert index.lookup_below(target) == (below[-1] if below else 0)
    parsed = TimeIndex.from_bytes(index.to_bytes(), len(stamps))
    assert parsed is not None
    assert (list(parsed.timestamps), list(parsed.offsets)) == (list(index.timestamps), list(index.offsets))


def test_time_index_file_is_big_endian_and_validated() -> None:
    index = TimeIndex()
    index.maybe_append(1_000, 0)
    index.maybe_append(2_000, 7)
    data = index.to_bytes()
    assert data == (1_000).to_bytes(8, "big") + (0).to_bytes(4, "big") + (2_000).to_bytes(8, "big") + (
        7
    ).to_bytes(4, "big")
    assert TimeIndex.from_bytes(data, 6) is None  # offset beyond the segment
    assert TimeIndex.from_bytes(data[12:] + data[:12], 10) is None  # not rising
    index.truncate_to_offset(7)
    assert list(index.offsets) == [0]
