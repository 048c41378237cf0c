"""Seeded frame fuzzer: mutated and random Kafka request frames for every api key and version a
broker advertises, sent over raw sockets. Reproducible: the same seed sends the same frames.

Run as a script (``python frame_fuzzer.py HOST:PORT --frames N --seed S [--workers W]``; W
connections at once, each with its own seed derived from S) it prints one JSON line
of counts at the end: frames sent, replies read, connections the broker closed, reads that timed
out (a legitimately long poll, or a hang: the caller decides with a probe of its own).

Templates per (api key, version): a blank request (every array empty) and a filled one (one item
per array, strings ``"x"``), encoded by kio. Mutations: bit flips, boundary bytes, 32-bit
boundary values over any position (array counts, string lengths), truncation, inserted and
duplicated slices, a wrong api version; plus random headers with random bodies and frames whose
length prefix lies. Requests that would make the broker create large numbers of partitions are
redrawn (the fuzzer tests the wire, not the disk).
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from shareq.client import _codec
from shareq.client.connection import BrokerConnection
from shareq.protocol import decode_request
from shareq.protocol.blank import blank
from shareq.protocol.versions import VersionRange

_SIZE = struct.Struct(">i")
_BOUNDARIES = (b"\x00", b"\xff", b"\x7f", b"\x80", b"\x01")
_WIDE = (
    b"\x7f\xff\xff\xff",
    b"\xff\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\x00\x00\x00\x00",
    b"\x00\x10\x00\x00",
    b"\xff\xff\xff\xfe",
)
_PARTITION_BUDGET = 16


@dataclass
class Counts:
    frames: int = 0
    replies: int = 0
    closed: int = 0
    timeouts: int = 0
    redrawn: int = 0
    by_api: dict[int, int] = field(default_factory=dict)


def templates(versions: dict[int, tuple[int, int]]) -> list[tuple[int, int, bytes]]:
    """(api key, version, header+body without the length prefix) for every advertised version."""
    out = []
    for api_key, (low, high) in sorted(versions.items()):
        for version in range(low, high + 1):
            module = _codec.request_module(api_key, version)
            cls = next(
                getattr(module, name)
                for name in dir(module)
                if name.endswith("Request") and getattr(getattr(module, name), "__api_key__", None) == api_key
            )
            for fill in (False, True):
                frame = _codec.encode_request(blank(cls, fill=fill), 7, "fuzz")
                out.append((api_key, version, frame[4:]))
    return out


class FrameSource:
    """An endless, reproducible stream of (api key, framed bytes)."""

    def __init__(self, seed: int, versions: dict[int, tuple[int, int]]) -> None:
        self.rng = random.Random(seed)
        self.templates = templates(versions)
        self.supported = {k: VersionRange(lo, hi) for k, (lo, hi) in versions.items()}
        self.redrawn = 0

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        while True:
            api_key, payload = self._draw()
            if self._too_big(payload):
                self.redrawn += 1
                continue
            if self.rng.random() < 0.01:  # a length prefix that lies (negative, huge or short)
                size = self.rng.choice([-1, -(2**31), 2**31 - 1, len(payload) + 1000, 0])
                yield api_key, _SIZE.pack(size) + payload
            else:
                yield api_key, _SIZE.pack(len(payload)) + payload

    def _draw(self) -> tuple[int, bytes]:
        rng = self.rng
        roll = rng.random()
        api_key, _version, template = rng.choice(self.templates)
        if roll < 0.85:
            data = bytearray(template)
            correlation = rng.getrandbits(31)
            data[4:8] = correlation.to_bytes(4, "big")
            for _ in range(rng.choice((1, 1, 1, 2, 3, 5, 8))):
                self._mutate(data)
            return api_key, bytes(data)
        if roll < 0.95:  # a valid header with a random body
            head = template[: 8 + 2 + 4]
            body = rng.randbytes(rng.randrange(0, 200))
            return api_key, head + body
        return api_key, rng.randbytes(rng.randrange(0, 64))  # noise

    def _mutate(self, data: bytearray) -> None:
        rng = self.rng
        if not data:
            data.extend(rng.randbytes(4))
            return
        kind = rng.randrange(8)
        position = rng.randrange(8, len(data)) if len(data) > 8 and kind != 6 else rng.randrange(len(data))
        if kind == 0:
            data[position] ^= 1 << rng.randrange(8)
        elif kind == 1:
            data[position : position + 1] = rng.choice(_BOUNDARIES)
        elif kind == 2:
            data[position : position + 4] = rng.choice(_WIDE)
        elif kind == 3:
            del data[position:]
        elif kind == 4:
            data[position:position] = rng.randbytes(rng.randrange(1, 16))
        elif kind == 5:
            end = min(len(data), position + rng.randrange(1, 32))
            data[position:position] = data[position:end]
        elif kind == 6:  # another version of the same api
            data[2:4] = rng.randrange(-2, 20).to_bytes(2, "big", signed=True)
        else:
            del data[position : position + rng.randrange(1, 8)]

    def _too_big(self, payload: bytes) -> bool:
        """CreateTopics / CreatePartitions asking for more partitions than the budget."""
        if len(payload) < 2 or int.from_bytes(payload[:2], "big") not in (19, 37):
            return False
        try:
            request = decode_request(payload, self.supported)
            topics = request.body.topics or ()
            if request.api_key == 19:
                total = sum(max(int(t.num_partitions), 1) for t in topics)
            else:
                total = sum(max(int(t.count), 0) for t in topics)
        except Exception:
            return False  # the broker cannot read it either
        return total > _PARTITION_BUDGET


def broker_versions(host: str, port: int) -> dict[int, tuple[int, int]]:
    with BrokerConnection(host, port) as conn:
        return dict(conn.broker_versions)


def run(
    host: str,
    port: int,
    frames: int,
    seed: int,
    *,
    workers: int = 4,
    batch: int = 8,
    read_timeout: float = 1.0,
) -> Counts:
    """Send ``frames`` frames from ``workers`` connections at once (worker ``i`` draws from seed
    ``seed * 1009 + i``, so a run is reproducible), ``batch`` frames per write."""
    versions = broker_versions(host, port)
    shares = [frames // workers + (i < frames % workers) for i in range(workers)]
    results = [Counts() for _ in range(workers)]
    threads = [
        threading.Thread(
            target=_worker,
            args=(host, port, shares[i], seed * 1009 + i, versions, batch, read_timeout, results[i]),
        )
        for i in range(workers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = Counts()
    for part in results:
        total.frames += part.frames
        total.replies += part.replies
        total.closed += part.closed
        total.timeouts += part.timeouts
        total.redrawn += part.redrawn
        for api_key, n in part.by_api.items():
            total.by_api[api_key] = total.by_api.get(api_key, 0) + n
    return total


def _worker(
    host: str,
    port: int,
    frames: int,
    seed: int,
    versions: dict[int, tuple[int, int]],
    batch: int,
    read_timeout: float,
    counts: Counts,
) -> None:
    generator = FrameSource(seed, versions)
    source = iter(generator)
    sock: socket.socket | None = None
    while counts.frames < frames:
        if sock is None:
            sock = socket.create_connection((host, port), timeout=10)
        chunk = []
        for _ in range(min(batch, frames - counts.frames)):
            api_key, frame = next(source)
            chunk.append(frame)
            counts.by_api[api_key] = counts.by_api.get(api_key, 0) + 1
        counts.frames += len(chunk)
        try:
            sock.sendall(b"".join(chunk))
            got, state = _read_replies(sock, len(chunk), read_timeout)
        except OSError:
            got, state = 0, "closed"
        counts.replies += got
        if state == "closed":
            counts.closed += 1
        elif state == "timeout":
            counts.timeouts += 1
        else:
            continue
        sock.close()
        sock = None
    if sock is not None:
        sock.close()
    counts.redrawn = generator.redrawn


def _read_replies(sock: socket.socket, wanted: int, timeout: float) -> tuple[int, str]:
    """How many replies came back, and ``"ok"`` (all ``wanted``), ``"closed"`` or ``"timeout"``."""
    sock.settimeout(timeout)
    got = 0
    buffer = bytearray()
    deadline = time.monotonic() + timeout
    while got < wanted:
        try:
            chunk = sock.recv(1 << 16)
        except TimeoutError:
            return got, "timeout"
        if not chunk:
            return got, "closed"
        buffer += chunk
        while len(buffer) >= 4:
            (size,) = _SIZE.unpack_from(buffer)
            if len(buffer) < 4 + size:
                break
            del buffer[: 4 + size]
            got += 1
        if time.monotonic() > deadline and got < wanted:
            return got, "timeout"
    return got, "ok"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args(argv)
    host, _, port = args.bootstrap.rpartition(":")
    started = time.monotonic()
    counts = run(host, int(port), args.frames, args.seed, workers=args.workers)
    result = {**counts.__dict__, "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
