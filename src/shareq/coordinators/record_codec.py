"""The building blocks of the coordinators' own records on their logs: big-endian integers,
strings with a u16 length and byte strings with an i32 length, and a reader that raises the
coordinator's own error, naming what it was reading, when the bytes run out or run over."""

from __future__ import annotations

import struct
from collections.abc import Callable

_H = struct.Struct(">h")
_UH = struct.Struct(">H")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


def write_str(out: bytearray, s: str) -> None:
    raw = s.encode()
    out += _UH.pack(len(raw))
    out += raw


def write_bytes(out: bytearray, b: bytes) -> None:
    out += _I.pack(len(b))
    out += b


class RecordReader:
    """Reads one record key or value front to back; ``done()`` insists nothing is left over."""

    __slots__ = ("_error", "_what", "buf", "pos")

    def __init__(self, buf: bytes, error: Callable[[str], Exception], what: str) -> None:
        self.buf = buf
        self.pos = 0
        self._error = error
        self._what = what

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise self._error(f"truncated {self._what}")
        chunk = self.buf[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def h(self) -> int:
        value: int = _H.unpack(self.take(2))[0]
        return value

    def uh(self) -> int:
        value: int = _UH.unpack(self.take(2))[0]
        return value

    def i(self) -> int:
        value: int = _I.unpack(self.take(4))[0]
        return value

    def q(self) -> int:
        value: int = _Q.unpack(self.take(8))[0]
        return value

    def s(self) -> str:
        return self.take(self.uh()).decode()

    def b(self) -> bytes:
        return self.take(self.i())

    def at_end(self) -> bool:
        return self.pos == len(self.buf)

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise self._error(f"trailing bytes in {self._what}")
