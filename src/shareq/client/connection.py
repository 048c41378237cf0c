"""A blocking, thread-safe connection to one broker.

One request is in flight at a time (a lock per connection). On connect the client asks ApiVersions and keeps
the broker's ranges; ``version(api_key)`` picks the highest version both sides speak. A request marked
idempotent is retried on a fresh socket after a connection failure, with bounded exponential backoff.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import ssl
import struct
import threading
import time
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import api_keys as api

from . import _codec
from .errors import BrokerConnectionError, KafkaError, ProtocolViolation, UnsupportedVersionError
from .security import ClientSecurity, authenticate

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024

# Versions this client can build, per api key: within each range the kio field names we use are the same
# (differences are handled at the call site by checking the picked version).
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    api.PRODUCE: (3, 12),  # by topic name; v13 switches to topic ids
    api.FETCH: (13, 16),  # by topic id
    api.LIST_OFFSETS: (4, 10),
    api.METADATA: (12, 13),
    api.OFFSET_COMMIT: (8, 9),  # by topic name; v10 switches to topic ids
    api.OFFSET_FETCH: (8, 9),  # v8 batches groups; v10 switches to topic ids
    api.FIND_COORDINATOR: (1, 6),  # v4+ batches keys
    api.DESCRIBE_GROUPS: (5, 5),
    api.LIST_GROUPS: (0, 5),  # v4 adds states, v5 types
    api.API_VERSIONS: (0, 3),
    api.CREATE_TOPICS: (2, 7),
    api.DELETE_TOPICS: (1, 6),
    api.DELETE_RECORDS: (0, 2),
    api.INIT_PRODUCER_ID: (0, 5),
    api.ADD_PARTITIONS_TO_TXN: (3, 3),
    api.END_TXN: (3, 3),
    api.DESCRIBE_CONFIGS: (1, 4),
    api.CREATE_PARTITIONS: (0, 3),
    api.DELETE_GROUPS: (0, 2),
    api.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    api.OFFSET_DELETE: (0, 0),
    api.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    api.ALTER_CLIENT_QUOTAS: (0, 1),
    api.DESCRIBE_TRANSACTIONS: (0, 0),
    api.LIST_TRANSACTIONS: (0, 2),  # v2 adds the transactional id pattern
    api.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    api.CONSUMER_GROUP_DESCRIBE: (0, 1),
    api.LIST_CONFIG_RESOURCES: (1, 1),  # v0 was ListClientMetricsResources
    api.SHARE_GROUP_HEARTBEAT: (1, 1),
    api.SHARE_GROUP_DESCRIBE: (1, 1),
    api.SHARE_FETCH: (1, 2),
    api.SHARE_ACKNOWLEDGE: (1, 2),
    api.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    api.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    api.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    api.TXN_SHARE_ACKNOWLEDGE: (0, 0),  # KIP-1289
    api.SASL_HANDSHAKE: (1, 1),
    api.DESCRIBE_ACLS: (1, 3),
    api.CREATE_ACLS: (1, 3),
    api.DELETE_ACLS: (1, 3),
    api.SASL_AUTHENTICATE: (0, 2),
    api.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    api.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}


class BrokerConnection:
    """A socket to ``host:port`` speaking Kafka requests one at a time."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "shareq-client",
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        retries: int = 3,
        retry_backoff: float = 0.1,
        node_id: int | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.security = security
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.retries = retries
        self.retry_backoff = retry_backoff
        self._sock: socket.socket | None = None
        self._lock = threading.RLock()
        self._correlation = itertools.count(1)
        self.broker_versions: dict[int, tuple[int, int]] = {}

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port}, node={self.node_id})"

    # -- lifecycle ---------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def connect(self) -> None:
        with self._lock:
            if self._sock is not None:
                return
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
            except OSError as exc:
                raise BrokerConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            security = self.security
            if security is not None and security.tls:
                try:
                    sock = security.ssl_context().wrap_socket(sock, server_hostname=self.host)
                except (OSError, ssl.SSLError) as exc:
                    sock.close()
                    raise BrokerConnectionError(f"TLS to {self.host}:{self.port} failed: {exc}") from exc
            self._sock = sock
            try:
                self._negotiate()
                if security is not None and security.sasl:
                    authenticate(
                        security, lambda r: self._roundtrip(r, self.connect_timeout), _codec.request_module
                    )
            except BaseException:
                self._close_socket()
                raise

    def close(self) -> None:
        with self._lock:
            self._close_socket()

    def __enter__(self) -> BrokerConnection:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _close_socket(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def _negotiate(self) -> None:
        m = _codec.request_module(api.API_VERSIONS, 3)
        request = m.ApiVersionsRequest(client_software_name="shareq", client_software_version="0.1.0")
        try:
            response = self._roundtrip(request, self.connect_timeout)
        except ProtocolViolation:
            response = None
        if response is None or response.error_code == ErrorCode.unsupported_version:
            # A broker older than v3 answers with a v0 body; ask again in v0.
            response = self._roundtrip(_codec.request_module(api.API_VERSIONS, 0).ApiVersionsRequest(), None)
        if response.error_code != ErrorCode.none:
            raise KafkaError(response.error_code, context="ApiVersions")
        self.broker_versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }

    # -- versions ----------------------------------------------------------------------------------

    def supports(self, api_key: int) -> bool:
        try:
            self.version(api_key)
        except UnsupportedVersionError:
            return False
        return True

    def version(self, api_key: int) -> int:
        """The highest version of ``api_key`` that both this client and the broker speak."""
        self.connect()
        lo, hi = CLIENT_VERSIONS[api_key]
        broker = self.broker_versions.get(api_key)
        if broker is None or broker[1] < lo or broker[0] > hi:
            raise UnsupportedVersionError(api_key, (lo, hi), broker)
        return min(hi, broker[1])

    def module(self, api_key: int) -> tuple[int, ModuleType]:
        """The negotiated version and its kio request module (top-level and nested request classes)."""
        v = self.version(api_key)
        return v, _codec.request_module(api_key, v)

    # -- requests ----------------------------------------------------------------------------------

    def send_oneway(self, request: Any) -> None:
        """Send a request the broker does not answer (Produce with acks=0)."""
        with self._lock:
            self.connect()
            sock = self._sock
            assert sock is not None
            frame = _codec.encode_request(request, next(self._correlation) & 0x7FFFFFFF, self.client_id)
            try:
                sock.settimeout(self.request_timeout)
                sock.sendall(frame)
            except OSError as exc:
                self._close_socket()
                raise BrokerConnectionError(f"{self.host}:{self.port}: {exc!r}") from exc

    def send(self, request: Any, *, timeout: float | None = None, idempotent: bool = False) -> Any:
        """Send ``request`` and return the decoded response.

        ``timeout`` bounds the wait for the answer (default ``request_timeout``). When ``idempotent`` the
        request is re-sent on a new socket after a connection failure, up to ``retries`` times.
        """
        attempts = 1 + (self.retries if idempotent else 0)
        delay = self.retry_backoff
        for attempt in range(attempts):
            try:
                with self._lock:
                    self.connect()
                    return self._roundtrip(request, timeout)
            except BrokerConnectionError:
                if attempt + 1 >= attempts:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    def _roundtrip(self, request: Any, timeout: float | None) -> Any:
        sock = self._sock
        if sock is None:
            raise BrokerConnectionError("not connected")
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        frame = _codec.encode_request(request, correlation_id, self.client_id)
        try:
            sock.settimeout(self.request_timeout if timeout is None else timeout)
            sock.sendall(frame)
            (size,) = _SIZE.unpack(self._recv_exactly(sock, 4))
            if size < 4 or size > MAX_RESPONSE_BYTES:
                self._close_socket()
                raise ProtocolViolation(f"response frame of {size} bytes from {self.host}:{self.port}")
            payload = self._recv_exactly(sock, size)
        except (OSError, EOFError) as exc:
            self._close_socket()
            raise BrokerConnectionError(f"{self.host}:{self.port}: {exc!r}") from exc
        got = _codec.peek_correlation_id(payload)
        if got != correlation_id:
            self._close_socket()
            raise ProtocolViolation(f"correlation id {got}, expected {correlation_id}")
        try:
            return _codec.decode_response(int(request.__api_key__), int(request.__version__), payload)
        except Exception as exc:  # kio raises assorted errors on malformed input
            raise ProtocolViolation(f"cannot decode response to api {request.__api_key__}: {exc!r}") from exc

    @staticmethod
    def _recv_exactly(sock: socket.socket, n: int) -> bytes:
        # Straight into one buffer: a Fetch answer of megabytes is not copied chunk by chunk.
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = sock.recv_into(view[got:], min(n - got, 1 << 20))
            if not k:
                raise EOFError("connection closed by broker")
            got += k
        view.release()
        return bytes(buf)
