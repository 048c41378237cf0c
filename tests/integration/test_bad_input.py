"""Nothing a client sends stops the server: each bad input affects only its own connection."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from broker_harness import FAST_FAILURE, BrokerProcess
from confluent_kafka import Producer
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

pytestmark = [pytest.mark.integration]


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.settimeout(10)
    return sock


def recv_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def request(
    api_key: int, version: int, correlation_id: int, body: bytes = b"", flexible: bool = False
) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test"
    if flexible:
        header += b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def api_versions_round_trip(port: int) -> None:
    """A fresh connection still gets a correct ApiVersions v3 answer."""
    with connect(port) as sock:
        sock.sendall(request(18, 3, 4242, b"\x05shrq\x021\x00", flexible=True))
        reply = recv_frame(sock)
    assert struct.unpack_from(">i", reply)[0] == 4242
    response, _ = entity_reader(load_response_schema(18, 3))(reply, 4)
    assert response.error_code == ErrorCode.none
    assert {k.api_key for k in response.api_keys} >= {0, 1, 3, 18}


def assert_closed_by_server(sock: socket.socket) -> None:
    with contextlib.suppress(ConnectionResetError):
        assert sock.recv(1) == b""


@pytest.fixture
def busy_broker(broker_process: BrokerProcess) -> Iterator[BrokerProcess]:
    """The broker while a well-behaved producer keeps writing; it must see no error at all."""
    stop = threading.Event()
    errors: list[object] = []
    acked = [0]

    def load() -> None:
        producer = Producer({"bootstrap.servers": broker_process.bootstrap, **FAST_FAILURE, "linger.ms": 1})

        def on_delivery(err: object, msg: object) -> None:
            if err is not None:
                errors.append(err)
            else:
                acked[0] += 1

        while not stop.is_set():
            producer.produce("steady", b"payload", partition=0, on_delivery=on_delivery)
            producer.poll(0.002)
        producer.flush(10)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    try:
        yield broker_process
    finally:
        stop.set()
        worker.join(timeout=30)
    assert errors == []
    assert acked[0] > 0
    assert broker_process.alive()


@pytest.mark.timeout(60)
def test_garbage_truncation_and_huge_prefixes(busy_broker: BrokerProcess) -> None:
    port = busy_broker.port
    # Garbage that is not even a plausible frame: the prefix is huge or negative.
    for garbage in (b"\xff" * 64, b"\x7f\xff\xff\xff" + b"x" * 10, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"):
        with connect(port) as sock:
            sock.sendall(garbage)
            assert_closed_by_server(sock)
        api_versions_round_trip(port)
    # A 2 GiB length prefix is refused at once, without waiting for (or allocating) the body.
    with connect(port) as sock:
        sock.sendall(struct.pack(">I", 2**31 - 1))
        peer = "{}:{}".format(*sock.getsockname())
        assert_closed_by_server(sock)
    api_versions_round_trip(port)
    deadline = time.monotonic() + 5  # stderr is read by a thread: poll for the line
    while not any(peer in line and "exceeds the limit" in line for line in busy_broker.stderr_lines):
        assert time.monotonic() < deadline, "no log line naming the peer and the reason"
        time.sleep(0.01)
    # A frame cut short, then the connection closed.
    with connect(port) as sock:
        sock.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00\x0d")
    api_versions_round_trip(port)
    # A frame too short to hold a request header.
    with connect(port) as sock:
        sock.sendall(struct.pack(">i", 3) + b"\x00\x12\x00")
        assert_closed_by_server(sock)
    api_versions_round_trip(port)


@pytest.mark.timeout(60)
def test_unsupported_apis_are_answered_and_the_connection_lives(busy_broker: BrokerProcess) -> None:
    with connect(busy_broker.port) as sock:
        sock.sendall(request(999, 0, 1))
        assert recv_frame(sock) == struct.pack(">ih", 1, int(ErrorCode.unsupported_version))
        sock.sendall(request(0, 99, 2))  # Produce v99
        assert recv_frame(sock) == struct.pack(">ih", 2, int(ErrorCode.unsupported_version))
        sock.sendall(request(71, 0, 3))  # telemetry: deliberately not implemented
        assert recv_frame(sock) == struct.pack(">ih", 3, int(ErrorCode.unsupported_version))
        sock.sendall(request(18, 99, 4, b"\x00", flexible=True))  # ApiVersions too new: v0 fallback
        reply = recv_frame(sock)
        response, _ = entity_reader(load_response_schema(18, 0))(reply, 4)
        assert response.error_code == ErrorCode.unsupported_version
        assert {k.api_key for k in response.api_keys} >= {0, 1, 18}
        # Same connection, still in order and usable.
        sock.sendall(request(18, 3, 5, b"\x05shrq\x021\x00", flexible=True))
        assert struct.unpack_from(">i", recv_frame(sock))[0] == 5


@pytest.mark.timeout(60)
def test_malformed_bodies_close_only_their_connection(busy_broker: BrokerProcess) -> None:
    port = busy_broker.port
    bodies = [
        (3, 13, b"\xff\xff\xff\xff\x0f", True),  # Metadata with a compact array of 4 billion topics
        (0, 4, struct.pack(">hii", -1, 1, 1000) + struct.pack(">i", 2**31 - 1), False),  # Produce, huge array
        (1, 4, b"\x00\x01", False),  # Fetch cut short
        (19, 7, b"\x02\x05abcd\xff\xff\xff\xff\x00", True),  # CreateTopics, nonsense
        (3, 13, b"\xff\xff\xff\xff\xff\xff\x01", True),  # an over-long varint
    ]
    for api_key, version, body, flexible in bodies:
        with connect(port) as sock:
            sock.sendall(request(api_key, version, 7, body, flexible=flexible))
            assert_closed_by_server(sock)
        api_versions_round_trip(port)
