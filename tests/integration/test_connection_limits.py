"""Connection limits on a real broker: ``max.connections.per.ip``, ``max.connections`` and
``connections.max.idle.ms``; a closed connection leaves the others serving."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from shareq.client import BrokerConnectionError
from shareq.client.connection import BrokerConnection
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(30)]


def _closed_by_broker(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def _open(broker: EmbeddedBroker) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=5)


@pytest.mark.parametrize("setting", ["max.connections.per.ip", "max.connections"])
def test_connections_over_the_limit_are_closed(tmp_path: Path, setting: str) -> None:
    with EmbeddedBroker(tmp_path / "data", {setting: "2"}) as broker:
        first, second, third = _open(broker), _open(broker), _open(broker)
        assert _closed_by_broker(third, 5)
        assert not _closed_by_broker(second, 0.2)
        first.close()
        deadline = time.monotonic() + 5
        while True:  # the broker frees the slot once it sees the close
            try:
                with BrokerConnection("127.0.0.1", broker.port, retries=0) as probe:
                    assert probe.broker_versions
                break
            except BrokerConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        second.close()
        third.close()


def test_idle_connections_are_closed(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "data", {"connections.max.idle.ms": "300"}) as broker:
        idle = _open(broker)
        with BrokerConnection("127.0.0.1", broker.port) as busy:
            started = time.monotonic()
            while time.monotonic() - started < 1.0:
                assert busy.send(_api_versions(), timeout=2) is not None
                time.sleep(0.05)
            assert _closed_by_broker(idle, 2.0)
        idle.close()


def _api_versions() -> object:
    from shareq.client import _codec

    return _codec.request_module(18, 0).ApiVersionsRequest()
