"""The state topic's batch codec against the log's general record codec."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.log.records import Record, decode_batch, encode_batch
from shareq.persister.state_log import batches_end_offset, encode_batches, iter_records

kvs = st.lists(
    st.tuples(st.binary(min_size=0, max_size=300), st.one_of(st.none(), st.binary(max_size=300))),
    min_size=1,
    max_size=40,
)


@settings(max_examples=200)
@given(records=kvs, timestamp=st.integers(0, 2**40))
def test_encoded_batches_decode_with_the_log_codec(
    records: list[tuple[bytes, bytes | None]], timestamp: int
) -> None:
    decoded = [
        (r.key, r.value)
        for b in encode_batches(records, timestamp=timestamp)
        for r in decode_batch(b).records
    ]
    assert decoded == records


@settings(max_examples=200)
@given(records=kvs, base=st.integers(0, 2**40), min_offset=st.integers(0, 50))
def test_iter_records_reads_general_batches(
    records: list[tuple[bytes, bytes | None]], base: int, min_offset: int
) -> None:
    batch = encode_batch(
        [Record(key=k, value=v, timestamp=1000 + i * 300) for i, (k, v) in enumerate(records)],
        base_offset=base,
    )
    got = list(iter_records(batch, min_offset=base + min_offset))
    assert got == [(base + i, k, v) for i, (k, v) in enumerate(records) if i >= min_offset]


def test_batches_end_offset() -> None:
    batch = encode_batch([Record(key=b"k", value=b"v"), Record(key=b"k", value=None)], base_offset=40)
    assert batches_end_offset(batch + batch) == 42
    assert batches_end_offset(b"") == 0


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=300), min_size=1, max_size=40),
    limit=st.integers(min_value=200, max_value=2000),
)
@settings(max_examples=100, deadline=None)
def test_batches_stay_within_the_size_limit(sizes: list[int], limit: int) -> None:
    records = [(b"k%d" % i, b"v" * size) for i, size in enumerate(sizes)]
    batches = encode_batches(records, timestamp=0, max_batch_bytes=limit)
    decoded = [rec for data in batches for rec in decode_batch(data).records]
    assert [(r.key, r.value) for r in decoded] == records
    for data in batches:
        # A batch over the limit holds exactly one record (it cannot be split further).
        assert len(data) <= limit or len(decode_batch(data).records) == 1
