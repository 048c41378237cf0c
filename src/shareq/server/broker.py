"""The ``Broker``: configuration, topic registry, partition logs, handler table and the listener.

Everything runs on one asyncio loop; no mutation spans an ``await``, so nothing needs a lock.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import shutil
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shareq.config import BrokerConfig
from shareq.log import LogConfig, PartitionLog
from shareq.quota import ClientQuotas, QuotaUsage
from shareq.security.jaas import PlainUsers
from shareq.security.listeners import Listener
from shareq.security.sasl import SaslState
from shareq.topic_configs import InvalidConfigError, effective_topic_configs, validate_topic_configs

from .clock import now_ms
from .compaction import cleaner_loop, stop_cleaner
from .connection import serve_connection
from .consumer_groups import ConsumerGroupServices
from .deadline_timer import DeadlineTimer
from .handlers import HandlerTable, default_handlers
from .io_stats import IoStats
from .metadata_cache import MetadataCache
from .monitor import BrokerCounters
from .partitions import Partition
from .security import (
    ConnectionSession,
    SecurityConfigError,
    SecurityServices,
    enabled_mechanisms,
    listener_plain_users,
    resolve_listeners,
    server_ssl_context,
    ssl_principal,
)
from .share import ShareServices
from .start_errors import BrokerStartError, os_reason
from .topics import TopicInfo, TopicRegistry, is_internal
from .transactions import TransactionServices

if TYPE_CHECKING:
    from .monitor.server import MonitorServer

log = logging.getLogger("shareq.server")


class Broker:
    """A single-node Kafka broker; ``await start()``, then ``await stop()``."""

    def __init__(
        self,
        data_dir: Path | str,
        config: BrokerConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        handlers: HandlerTable | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.config = config if config is not None else BrokerConfig.from_mapping({})
        self.host = host
        self.port = port
        self.handlers = handlers if handlers is not None else default_handlers()
        if self.config["share.transactional.acks.enable"]:
            from .handlers import txn_share_acknowledge

            self.handlers.update(txn_share_acknowledge.HANDLERS)
        self.node_id: int = self.config["node.id"]
        self.registry: TopicRegistry | None = None
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._servers: list[asyncio.Server] = []
        self.listeners: list[Listener] = []
        self.security: SecurityServices | None = None
        self._connections_per_host: dict[str, int] = {}
        self._sessions: set[ConnectionSession] = set()
        self._plans: list[tuple[Listener, Listener, tuple[ssl.SSLContext | None, tuple[str, ...]]]] = []
        self._plain_users: dict[str, PlainUsers | None] = {}
        self.advertised_listeners: dict[str, Listener] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._connections: set[asyncio.Task[None]] = set()
        self._next_connection_id = 0
        self.static_config = self.config
        self.stopping = False
        self.timer = DeadlineTimer()  # the services' one timer, on the one clock
        self.share: ShareServices | None = None
        self.consumer_groups: ConsumerGroupServices | None = None
        self.transactions: TransactionServices | None = None
        self.io = IoStats()
        self.counters = BrokerCounters()
        self.metadata_cache = MetadataCache(self)
        self.monitor: MonitorServer | None = None  # the HTTP port, when ``http.port`` is set
        self.ready = False  # logs recovered and coordinators loaded (``/readyz``)
        self.quotas = QuotaUsage(ClientQuotas())

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the data directory and the logs, then listen.

        Raises ``BrokerStartError`` with one line saying what failed, in Kafka's words, when the
        data directory cannot be created or written or the address cannot be bound; whatever was
        opened before is left for ``stop()`` to close.
        """
        await self._start_monitor()
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            if not os.access(self.data_dir, os.R_OK | os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
            self.registry = TopicRegistry(self.data_dir)
            self.quotas = QuotaUsage(ClientQuotas.from_json(self.registry.client_quotas))
            self.static_config = self.config
            self.config = self._dynamic_config(self.registry.cluster_defaults, self.registry.broker_overrides)
            for topic in self.registry:
                for index in range(topic.partitions):
                    self._open_partition(topic, index)
        except OSError as error:
            raise BrokerStartError(
                f"Failed to create or validate data directory {self.data_dir.absolute()}: {os_reason(error)}"
            ) from error
        try:
            listeners, advertised = resolve_listeners(self.config, self.host, self.port)
            self.security = SecurityServices(self.data_dir, self.config)
            self._plans = [
                (listener, advertised[listener.name], self._listener_setup(listener))
                for listener in listeners
            ]
        except (SecurityConfigError, ValueError) as error:
            raise BrokerStartError(str(error)) from error
        self._install_security()
        self.share = ShareServices(self)
        await self.share.start()
        self.consumer_groups = ConsumerGroupServices(self)
        await self.consumer_groups.start()
        self.transactions = TransactionServices(self)
        await self.transactions.start()
        await self._listen()
        self._spawn(self._retention_loop())
        self._spawn(self._idle_connection_loop())
        self._spawn(cleaner_loop(self))
        self.ready = True

    async def _start_monitor(self) -> None:
        """The HTTP port (metrics, web view, health) comes up first, so ``/readyz`` can say
        "not yet" while logs recover."""
        port: int | None = self.config["http.port"]
        if port is None:
            return
        from .monitor.server import MonitorServer

        host: str = self.config["http.host"] or self.host
        monitor = MonitorServer(self, host, port, self.config["http.push.interval.ms"])
        try:
            await monitor.start()
        except OSError as error:
            raise BrokerStartError(
                f"HTTP server failed to bind to {host}:{port}: {os_reason(error)}."
            ) from error
        self.monitor = monitor

    async def stop(self) -> None:
        """Stop accepting, end connections, flush and close every log."""
        self.stopping = True
        self.ready = False
        for server in self._servers:
            server.close()
        for task in list(self._tasks) + list(self._connections):
            task.cancel()
        await asyncio.gather(*self._tasks, *self._connections, return_exceptions=True)
        stop_cleaner(self)
        self.timer.stop()
        for server in self._servers:
            await server.wait_closed()
        if self.transactions is not None:
            await self.transactions.stop()
        if self.consumer_groups is not None:
            await self.consumer_groups.stop()
        if self.share is not None:
            await self.share.stop()
        for partition in self.partitions.values():
            partition.log.close()  # flushes first; the persister closed its state logs already
        self.partitions.clear()
        if self.monitor is not None:
            await self.monitor.stop()
            self.monitor = None

    @property
    def advertised_host(self) -> str:
        """What the first listener advertises (``advertised.host`` applies without ``listeners``)."""
        host: str | None = self.config["advertised.host"]
        return host if host else self.host

    @property
    def advertised_port(self) -> int:
        port: int | None = self.config["advertised.port"]
        return port if port else self.port

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    @property
    def connections_accepted(self) -> int:
        return self._next_connection_id

    @property
    def topics(self) -> TopicRegistry:
        if self.registry is None:
            raise RuntimeError("the broker has not been started")
        return self.registry

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- listeners ---------------------------------------------------------------------------------

    def _listener_setup(self, listener: Listener) -> tuple[ssl.SSLContext | None, tuple[str, ...]]:
        """The TLS context and SASL mechanisms of one listener (checked before anything binds)."""
        context = server_ssl_context(self.config, listener) if listener.protocol.tls else None
        mechanisms = enabled_mechanisms(self.config, listener) if listener.protocol.sasl else ()
        if "PLAIN" in mechanisms:
            self._plain_users[listener.name] = listener_plain_users(self.config, listener)
        return context, mechanisms

    def _install_security(self) -> None:
        """SASL handlers when a listener needs them; ACL checks when an authorizer is set. A broker
        with neither keeps its handler table (and its request path) exactly as it was."""
        from .handlers import sasl

        if any(listener.protocol.sasl for listener, _, _ in self._plans):
            self.handlers.update(sasl.HANDLERS)
        assert self.security is not None
        if self.security.authorizer is not None:
            from .authorization import install

            install(self.handlers, self.security.authorizer)

    async def _listen(self) -> None:
        for listener, advertised, (context, mechanisms) in self._plans:
            try:
                server = await asyncio.start_server(
                    functools.partial(self._on_connection, listener.name, mechanisms),
                    listener.host,
                    listener.port,
                    ssl=context,
                    backlog=1024,
                )
            except OSError as error:
                raise BrokerStartError(
                    f"Socket server failed to bind to {listener.host}:{listener.port}: {os_reason(error)}."
                ) from error
            port = server.sockets[0].getsockname()[1]
            bound = Listener(listener.name, listener.host, port, listener.protocol)
            if advertised.port == 0 or advertised is listener:
                advertised = Listener(advertised.name, advertised.host, port, advertised.protocol)
            self.listeners.append(bound)
            self.advertised_listeners[bound.name] = advertised
            self._servers.append(server)
        self.host, self.port = self.listeners[0].host, self.listeners[0].port

    def listener(self, name: str) -> Listener:
        """A bound listener by name (its real port when it was configured with port 0)."""
        return next(listener for listener in self.listeners if listener.name == name.upper())

    async def _on_connection(
        self,
        listener_name: str,
        mechanisms: tuple[str, ...],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        listener = self.listener(listener_name)
        advertised = self.advertised_listeners[listener_name]
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if isinstance(peername, tuple) else str(peername)
        client_host = peername[0] if isinstance(peername, tuple) else str(peername)
        if not self._admit(client_host):
            log.info("closing %s: connection limit reached", peer)
            writer.close()
            return
        self._next_connection_id += 1
        connection_id = self._next_connection_id
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        session = ConnectionSession(listener, advertised, client_host, writer=writer)
        self._sessions.add(session)
        if listener.protocol.tls:
            session.principal = ssl_principal(writer.get_extra_info("ssl_object"))
        if listener.protocol.sasl:
            assert self.security is not None
            session.sasl = SaslState(
                self.security.credentials,
                mechanisms,
                self.config["connections.max.reauth.ms"],
                self._plain_users.get(listener.name),
            )
        try:
            await serve_connection(self, reader, writer, connection_id, session, peer)
        finally:
            self._connections.discard(task)
            self._sessions.discard(session)
            left = self._connections_per_host[client_host] - 1
            if left:
                self._connections_per_host[client_host] = left
            else:
                del self._connections_per_host[client_host]
            if self.share is not None and not self.stopping:
                self.share.connection_closed(connection_id)

    def _admit(self, client_host: str) -> bool:
        """``max.connections`` and ``max.connections.per.ip``: count the new connection if both allow it."""
        count = self._connections_per_host.get(client_host, 0)
        if (
            len(self._connections) >= self.config["max.connections"]
            or count >= self.config["max.connections.per.ip"]
        ):
            return False
        self._connections_per_host[client_host] = count + 1
        return True

    # -- timers ----------------------------------------------------------------------------------

    async def _retention_loop(self) -> None:
        interval_s = self.config["log.retention.check.interval.ms"] / 1000.0
        while True:
            await asyncio.sleep(interval_s)
            self.enforce_retention()

    async def _idle_connection_loop(self) -> None:
        """``connections.max.idle.ms``: close connections that waited that long for a request."""
        loop = asyncio.get_running_loop()
        while True:
            idle_s = self.config["connections.max.idle.ms"] / 1000.0
            await asyncio.sleep(min(max(idle_s / 4, 0.05), 30.0) if idle_s > 0 else 30.0)
            if idle_s <= 0:
                continue
            now = loop.time()
            for session in list(self._sessions):
                if session.idle_since is not None and now - session.idle_since >= idle_s:
                    log.info("closing idle connection from %s", session.client_host)
                    session.writer.close()

    def enforce_retention(self) -> None:
        now = now_ms()
        for partition in list(self.partitions.values()):
            try:
                deleted = partition.log.enforce_retention(now)
            except Exception:
                log.exception("retention failed on %s-%d", partition.topic, partition.index)
                continue
            if deleted and self.share is not None:
                self.share.log_start_moved(partition.topic, partition.index)

    # -- topics ----------------------------------------------------------------------------------

    def log_config(self, topic: TopicInfo) -> LogConfig:
        return self._log_config_of(topic.configs)

    def _log_config_of(self, overrides: Mapping[str, str]) -> LogConfig:
        """The log settings a topic with these overrides gets; ``InvalidConfigError`` if they make
        none (checked before anything is stored, so a bad value never reaches the registry)."""
        effective = {k: v for k, (v, _) in effective_topic_configs(overrides, self.config).items()}
        try:
            return LogConfig.from_kafka(effective, LogConfig())
        except ValueError as error:
            raise InvalidConfigError(str(error)) from None

    def _open_partition(self, topic: TopicInfo, index: int) -> Partition:
        directory = self.data_dir / f"{topic.name}-{index}"
        partition_log = PartitionLog.open(directory, self.log_config(topic), now_ms=now_ms())
        partition = Partition(topic.name, index, directory, partition_log)
        self.partitions[(topic.name, index)] = partition
        return partition

    def create_topic(
        self, name: str, partitions: int | None = None, configs: Mapping[str, str | None] | None = None
    ) -> TopicInfo:
        """Create a topic (internal ones too, for other layers) and open its partition logs.

        Raises ``InvalidTopicError``, ``TopicExistsError``, ``InvalidConfigError`` or ``ValueError``.
        """
        count = self.config["num.partitions"] if partitions is None or partitions == -1 else partitions
        overrides = validate_topic_configs(configs or {})
        self._log_config_of(overrides)
        topic = self.topics.create(name, count, overrides)
        for index in range(count):
            self._open_partition(topic, index)
        return topic

    def internal_topic(self, name: str, partitions: int, configs: Mapping[str, str]) -> TopicInfo:
        """Create an internal topic with the configs Kafka gives it, or give an existing one (made
        by an older version) the ones it lacks; the operator's own overrides stay."""
        topic = self.topics.get(name)
        if topic is None:
            return self.create_topic(name, partitions, configs)
        missing = {k: v for k, v in configs.items() if k not in topic.configs}
        if missing:
            self.alter_topic_configs(name, {**topic.configs, **missing})
        return topic

    def create_partitions(self, name: str, count: int) -> TopicInfo:
        """Grow ``name`` to ``count`` partitions and open the new logs. Share groups and
        consumer groups see them on their next heartbeat or metadata refresh."""
        topic = self.topics.get(name)
        if topic is None:
            raise KeyError(name)
        before = topic.partitions
        topic = self.topics.set_partition_count(name, count)
        for index in range(before, count):
            self._open_partition(topic, index)
        return topic

    def delete_records(self, name: str, index: int, offset: int) -> int:
        """Move the log start of ``name``-``index`` to ``offset`` (DeleteRecords); share-partitions
        whose start offset falls behind it move with it. Returns the new log start, which a
        retention hold (in-log share state) may keep below ``offset``."""
        partition = self.partition(name, index)
        if partition is None:
            raise KeyError((name, index))
        partition.log.advance_log_start(offset)
        if self.share is not None:
            self.share.log_start_moved(name, index)
        return partition.log.log_start_offset

    def delete_topic(self, name: str) -> TopicInfo:
        topic = self.topics.delete(name)
        for index in range(topic.partitions):
            partition = self.partitions.pop((name, index), None)
            if partition is not None:
                partition.notify()
                partition.log.delete()
            shutil.rmtree(self.data_dir / f"{name}-{index}", ignore_errors=True)
        return topic

    def check_topic_configs(self, configs: Mapping[str, str]) -> None:
        """Raise ``InvalidConfigError`` if a topic could not take these overrides."""
        self._log_config_of(validate_topic_configs(configs))

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise KeyError(name)
        overrides = validate_topic_configs(configs)
        self._log_config_of(overrides)
        self.topics.set_configs(name, overrides)
        for index in range(topic.partitions):
            partition = self.partitions.get((name, index))
            if partition is not None:
                partition.log.config = self.log_config(topic)

    def _dynamic_config(
        self, cluster_defaults: Mapping[str, str], overrides: Mapping[str, str]
    ) -> BrokerConfig:
        """Static configs, then the cluster defaults, then this broker's own dynamic configs."""
        return self.static_config.with_overrides({**cluster_defaults, **overrides})

    def alter_broker_configs(self, overrides: Mapping[str, str], *, cluster_default: bool = False) -> None:
        """Replace this broker's dynamic configs, or the cluster defaults (validated, persisted),
        and reconfigure every log."""
        if cluster_default:
            config = self._dynamic_config(overrides, self.topics.broker_overrides)
            self.topics.set_cluster_defaults(overrides)
        else:
            config = self._dynamic_config(self.topics.cluster_defaults, overrides)
            self.topics.set_broker_overrides(overrides)
        self.config = config
        for partition in self.partitions.values():
            topic = self.topics.get(partition.topic)
            if topic is not None:
                partition.log.config = self.log_config(topic)

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def auto_create(self, name: str) -> TopicInfo | None:
        """Create ``name`` if auto-creation is on and the name is legal and not internal."""
        if not self.config["auto.create.topics.enable"] or is_internal(name):
            return None
        try:
            return self.create_topic(name)
        except ValueError:
            return None
