"""Log compaction on real segment files: plan, clean, swap; latest value per key kept, offsets unchanged,
tombstones past the horizon gone, a bounded key index, and a crash before the swap losing nothing."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.log.cleaner import CleaningConfig, clean, plan_cleaning
from shareq.log.config import LogConfig
from shareq.log.partition_log import PartitionLog
from shareq.log.records import Record, decode_batches, encode_batch

SMALL = LogConfig(segment_bytes=2_000, index_interval_bytes=256, cleanup_policy="compact")
NOW = 10_000_000
EAGER = CleaningConfig(min_cleanable_ratio=0.0, delete_retention_ms=1_000)

Entry = tuple[int, bytes, bytes | None]  # offset, key, value (None: tombstone)


def write(log: PartitionLog, batches: list[list[tuple[bytes, bytes | None]]], ts: int) -> list[Entry]:
    out: list[Entry] = []
    for records in batches:
        data = encode_batch([Record(key=k, value=v, timestamp=ts) for k, v in records])
        info = log.append(data, now_ms=ts)
        out += [(info.first_offset + i, k, v) for i, (k, v) in enumerate(records)]
    return out


def read_all(log: PartitionLog) -> list[Entry]:
    out: list[Entry] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 100_000)
        if not data.records:
            break
        for batch in decode_batches(data.records):
            for record in batch.records:
                assert record.key is not None
                out.append((record.offset, record.key, record.value))
            offset = batch.header.base_offset + batch.header.last_offset_delta + 1
    return out


def compact(log: PartitionLog, config: CleaningConfig = EAGER, rounds: int = 20) -> int:
    done = 0
    for _ in range(rounds):
        plan = log.cleaning_plan(config, NOW)
        if plan is None:
            break
        result = clean(plan)
        log.swap_cleaned(result)
        done += 1
    return done


def active_base(log: PartitionLog) -> int:
    return log._segments[-1].base_offset


def check(written: list[Entry], read: list[Entry], clean_below: int) -> None:
    """Records at or above ``clean_below`` are untouched; below it only each key's latest remains,
    tombstones (all older than the horizon here) removed; offsets never change."""
    latest = {k: o for o, k, _v in written if o < clean_below}  # the active segment is never cleaned
    expected = [(o, k, v) for o, k, v in written if o >= clean_below or (latest[k] == o and v is not None)]
    assert read == expected


keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"])
values = st.one_of(st.none(), st.binary(min_size=1, max_size=60))
batches = st.lists(st.lists(st.tuples(keys, values), min_size=1, max_size=6), min_size=1, max_size=60)


@settings(max_examples=25, deadline=None)
@given(batches=batches, cap=st.sampled_from([2, 4, 1000]))
def test_cleaning_keeps_the_latest_of_each_key(tmp_path_factory: object, batches: list, cap: int) -> None:  # type: ignore[type-arg]
    directory = Path(tmp_path_factory.mktemp("log"))  # type: ignore[attr-defined]
    log = PartitionLog.open(directory, SMALL, now_ms=0)
    try:
        written = write(log, batches, ts=1_000)
        config = CleaningConfig(min_cleanable_ratio=0.0, delete_retention_ms=1_000, max_map_entries=cap)
        compact(log, config)
        check(written, read_all(log), active_base(log))
        log.close()
        log = PartitionLog.open(directory, SMALL, now_ms=NOW)  # recovery reads the cleaned segments back
        check(written, read_all(log), active_base(log))
    finally:
        log.close()


def test_young_tombstones_stay(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    written = write(
        log, [[(b"k", b"x" * 100)], [(b"k", None)]] + [[(b"z%d" % i, b"y" * 200)] for i in range(20)], ts=NOW
    )
    assert compact(log, CleaningConfig(min_cleanable_ratio=0.0, delete_retention_ms=60_000)) >= 1
    read = read_all(log)
    assert (1, b"k", None) in read and (0, b"k", b"x" * 100) not in read
    assert [o for o, _k, _v in read] == [o for o, _k, _v in written if o != 0]
    log.close()


def test_dirty_ratio_and_lag_gate_cleaning(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    write(log, [[(b"k%d" % (i % 3), b"v" * 100)] for i in range(40)], ts=1_000)
    assert log.cleaning_plan(CleaningConfig(min_cleanable_ratio=0.0, min_lag_ms=NOW), NOW) is None
    assert log.cleaning_plan(CleaningConfig(min_cleanable_ratio=0.0), NOW) is not None
    compact(log)
    # Everything below the active segment is clean now: nothing is dirty until more is written.
    assert log.cleaning_plan(CleaningConfig(min_cleanable_ratio=0.0), NOW) is None
    log.close()


def test_crash_before_the_swap_loses_nothing(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    written = write(log, [[(b"k%d" % (i % 4), b"v%d" % i + b"." * 100)] for i in range(60)], ts=1_000)
    plan = log.cleaning_plan(EAGER, NOW)
    assert plan is not None
    result = clean(plan)
    assert result.cleaned and all(c.cleaned_path.exists() for c in result.cleaned)
    log.close()  # the process dies here: cleaned files written, none swapped in
    log = PartitionLog.open(tmp_path, SMALL, now_ms=NOW)
    assert not list(tmp_path.glob("*.cleaned"))
    assert read_all(log) == written
    compact(log)
    check(written, read_all(log), active_base(log))
    log.close()


def test_crash_midway_through_the_swap(tmp_path: Path) -> None:
    """Some segments replaced, the rest not (and their index files gone): every latest value survives."""
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    written = write(log, [[(b"k%d" % (i % 4), b"v%d" % i + b"." * 100)] for i in range(60)], ts=1_000)
    plan = log.cleaning_plan(EAGER, NOW)
    assert plan is not None
    result = clean(plan)
    log.close()
    first = result.cleaned[0]
    stem = f"{first.base:020d}"
    for stale in (tmp_path / f"{stem}.index", tmp_path / f"{stem}.timeindex"):
        stale.unlink(missing_ok=True)
    first.cleaned_path.replace(tmp_path / f"{stem}.log")
    assert len(result.cleaned) > 1  # the others stay as they were
    log = PartitionLog.open(tmp_path, SMALL, now_ms=NOW)
    latest = {k: (o, v) for o, k, v in written}
    survived = {k: (o, v) for o, k, v in read_all(log)}
    assert survived == latest
    log.close()


def test_plan_is_pure() -> None:
    assert plan_cleaning((), 0, EAGER, NOW) is None


def _txn(log: PartitionLog, pid: int, records: list[tuple[bytes, bytes | None]], ts: int) -> int:
    data = encode_batch(
        [Record(key=k, value=v, timestamp=ts) for k, v in records],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    return log.append(data, now_ms=ts).first_offset


def _filler(log: PartitionLog, n: int, ts: int) -> None:
    write(log, [[(b"fill%d" % i, b"f" * 200)] for i in range(n)], ts=ts)


def test_aborted_transactions_neither_replace_nor_stay(tmp_path: Path) -> None:
    """A key's committed value survives a later aborted write of the same key (the aborted data is
    dropped, its marker kept); a committed transactional write replaces it."""
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    write(log, [[(b"a", b"a1"), (b"b", b"b1")]], ts=1_000)
    aborted_at = _txn(log, 7, [(b"a", b"a-aborted")], ts=1_000)
    log.append_marker(producer_id=7, producer_epoch=0, commit=False, now_ms=1_000)
    committed_at = _txn(log, 8, [(b"b", b"b2")], ts=1_000)
    log.append_marker(producer_id=8, producer_epoch=0, commit=True, now_ms=1_000)
    _filler(log, 20, ts=1_000)
    assert compact(log) >= 1
    read = {k: (o, v) for o, k, v in read_all(log)}
    assert read[b"a"] == (0, b"a1")
    assert read[b"b"] == (committed_at, b"b2")
    assert all(o != aborted_at for o, _k, _v in read_all(log))
    log.close()


def test_nothing_from_an_open_transaction_on_is_cleaned(tmp_path: Path) -> None:
    """A transaction still open may abort: the segment holding its start, and every later one, stay
    dirty until it ends (Kafka's first unstable offset)."""
    log = PartitionLog.open(tmp_path, SMALL, now_ms=0)
    write(log, [[(b"a", b"a1")]], ts=1_000)
    _filler(log, 10, ts=1_000)
    open_at = _txn(log, 9, [(b"a", b"a-pending")], ts=1_000)
    write(log, [[(b"a", b"a2")]], ts=1_000)
    _filler(log, 20, ts=1_000)
    compact(log)
    offsets = [o for o, _k, _v in read_all(log)]
    assert 0 in offsets and open_at in offsets  # the open transaction's segment and after: untouched
    log.append_marker(producer_id=9, producer_epoch=0, commit=False, now_ms=1_000)
    _filler(log, 20, ts=1_000)
    compact(log)
    read = {k: (o, v) for o, k, v in read_all(log)}
    assert read[b"a"][1] == b"a2"
    assert all(o not in (0, open_at) for o, _k, _v in read_all(log))
    log.close()
