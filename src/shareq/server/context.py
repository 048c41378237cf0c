"""What a handler gets besides its decoded request, and the shape of a handler.

A handler sees the broker through :class:`BrokerView`: the topics and partition logs, the services
it calls (share groups, consumer groups, transactions, security, quotas) and the topic and config
operations, never the broker's listeners, tasks or start-up. The ``Broker`` satisfies the view; no
handler imports it (``tests/unit/test_layering.py``).
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from shareq.protocol import Codec, RequestHeader

if TYPE_CHECKING:
    from shareq.config import BrokerConfig
    from shareq.quota import QuotaUsage
    from shareq.security.listeners import Listener

    from .consumer_groups import ConsumerGroupServices
    from .handlers import HandlerTable
    from .io_stats import IoStats
    from .partitions import Partition
    from .security import ConnectionSession, SecurityServices
    from .share import ShareServices
    from .topics import TopicInfo, TopicRegistry
    from .transactions import TransactionServices

NO_THROTTLE = datetime.timedelta(0)
"""The throttle time of a response no quota delayed."""


class BrokerView(Protocol):
    """What request handlers use of the broker."""

    node_id: int
    host: str
    port: int
    data_dir: Path
    stopping: bool
    config: BrokerConfig
    static_config: BrokerConfig
    handlers: HandlerTable
    listeners: list[Listener]
    advertised_listeners: dict[str, Listener]
    partitions: dict[tuple[str, int], Partition]
    io: IoStats
    quotas: QuotaUsage
    security: SecurityServices | None
    share: ShareServices | None
    consumer_groups: ConsumerGroupServices | None
    transactions: TransactionServices | None

    @property
    def topics(self) -> TopicRegistry: ...

    def partition(self, topic: str, index: int) -> Partition | None: ...

    def auto_create(self, name: str) -> TopicInfo | None: ...

    def create_topic(
        self, name: str, partitions: int | None = None, configs: Mapping[str, str | None] | None = None
    ) -> TopicInfo: ...

    def delete_topic(self, name: str) -> TopicInfo: ...

    def create_partitions(self, name: str, count: int) -> TopicInfo: ...

    def delete_records(self, name: str, index: int, offset: int) -> int: ...

    def check_topic_configs(self, configs: Mapping[str, str]) -> None: ...

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> None: ...

    def alter_broker_configs(
        self, overrides: Mapping[str, str], *, cluster_default: bool = False
    ) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestContext:
    """Per-request facts: the broker, the connection's peer and the codec of this version.

    ``build(name, **fields)`` constructs a response entity (or a nested one by class name) of the
    request's version, dropping fields that version does not have.
    """

    broker: BrokerView
    header: RequestHeader
    codec: Codec
    peer: str
    connection_id: int
    session: ConnectionSession

    @property
    def principal(self) -> str:
        """``User:name`` after SASL, the certificate's DN on SSL, else ``User:ANONYMOUS``."""
        return self.session.principal

    @property
    def user(self) -> str:
        """The principal's name, as client quotas name users (``ANONYMOUS`` when unauthenticated)."""
        return self.session.principal.partition(":")[2]

    @property
    def advertised_host(self) -> str:
        """The host clients are told for the listener this request came through."""
        return self.session.advertised.host

    @property
    def advertised_port(self) -> int:
        return self.session.advertised.port

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_host(self) -> str:
        """The peer's address as Kafka reports a member's host (``InetAddress.toString``: ``/127.0.0.1``)."""
        return kafka_host(self.peer)

    def build(self, name: str | None = None, /, **values: Any) -> Any:
        from shareq.protocol import build

        cls = self.codec.response_class if name is None else getattr(self.codec.response_module, name)
        return build(cls, **values)


def kafka_host(peer: str) -> str:
    """``"127.0.0.1:5555"`` -> ``"/127.0.0.1"``; IPv6 written as Java does (``/0:0:0:0:0:0:0:1``).

    Kafka describes a group member's host as ``InetAddress.toString()`` of the connection's client
    address: an empty host name, a slash, then the literal address without the port. Java writes
    IPv6 addresses as eight uncompressed groups of lower-case hex without leading zeros.
    """
    host = peer.rpartition(":")[0] if ":" in peer else peer
    host = host.strip("[]")
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return "/" + host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return f"/{address.ipv4_mapped}"  # Java turns a mapped address into its IPv4 form
        groups = address.exploded.split(":")
        return "/" + ":".join(format(int(g, 16), "x") for g in groups)
    return f"/{address}"


Handler = Callable[[Any, RequestContext], "Awaitable[Any] | Any"]
"""Takes the decoded request and its context, returns the response entity (``None``: no reply),
or an awaitable of it (for long polls)."""
