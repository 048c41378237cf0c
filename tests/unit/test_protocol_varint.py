"""The one unsigned-varint reader and writer shared by headers, the body guard and state records."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shareq.coordinators.share.records import StateRecordError
from shareq.protocol.errors import MalformedRequestError
from shareq.protocol.header import read_uvarint as header_read_uvarint
from shareq.protocol.varint import read_uvarint, write_uvarint


@given(st.integers(min_value=0, max_value=2**32 - 1), st.binary(max_size=4))
def test_round_trip_leaves_the_rest(n: int, rest: bytes) -> None:
    out = bytearray()
    write_uvarint(out, n)
    assert len(out) <= 5
    assert read_uvarint(bytes(out) + rest, 0) == (n, len(out))


@pytest.mark.parametrize("error", [ValueError, MalformedRequestError, StateRecordError])
def test_truncated_and_overlong_raise_the_callers_error(error: type[Exception]) -> None:
    with pytest.raises(error, match="past the end"):
        read_uvarint(b"\x80\x80", 0, error)
    with pytest.raises(error, match="longer than 5 bytes"):
        read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0, error)


def test_header_reader_raises_a_peer_fault() -> None:
    with pytest.raises(MalformedRequestError):
        header_read_uvarint(b"\xff", 0)
