"""Bootstrap, the metadata cache (topic names <-> ids, partition leaders) and coordinator lookup.

Connections are kept per node id. Leaders come from the metadata: nothing assumes a single broker.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol.api_keys import FIND_COORDINATOR, METADATA

from .connection import BrokerConnection
from .errors import BrokerConnectionError, KafkaError
from .security import ClientSecurity

COORDINATOR_GROUP = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionInfo, ...]
    is_internal: bool = False

    def partition(self, index: int) -> PartitionInfo:
        for p in self.partitions:
            if p.partition == index:
                return p
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{self.name}-{index}")


@dataclass(slots=True)
class MetadataCache:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    names_by_id: dict[uuid.UUID, str] = field(default_factory=dict)
    cluster_id: str | None = None
    controller_id: int = -1


def parse_bootstrap(bootstrap: str | list[str] | tuple[str, ...]) -> list[tuple[str, int]]:
    """``"host:port,host:port"`` (or a list of them) as (host, port) pairs; port defaults to 9092."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        out.append((host.strip("[]"), int(port)) if sep else (item, 9092))
    if not out:
        raise ValueError("empty bootstrap server list")
    return out


class Cluster:
    """Shared plumbing for producer, consumers and admin: connections by node, metadata, coordinators."""

    def __init__(
        self,
        bootstrap: str | list[str] | tuple[str, ...],
        *,
        client_id: str = "shareq-client",
        request_timeout: float = 30.0,
        retries: int = 3,
        security: ClientSecurity | None = None,
    ) -> None:
        self.security = security
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.retries = retries
        self.cache = MetadataCache()
        self.denied_topics: set[str] = set()
        """Topics the last Metadata answered with TOPIC_AUTHORIZATION_FAILED (not "unknown")."""
        self._lock = threading.RLock()
        self._bootstrap_conns: list[BrokerConnection] = []
        self._nodes: dict[int, BrokerConnection] = {}
        self._coordinators: dict[tuple[int, str], int] = {}

    def _new_connection(self, host: str, port: int, node_id: int | None) -> BrokerConnection:
        return BrokerConnection(
            host,
            port,
            client_id=self.client_id,
            request_timeout=self.request_timeout,
            retries=self.retries,
            node_id=node_id,
            security=self.security,
        )

    def close(self) -> None:
        with self._lock:
            for conn in [*self._bootstrap_conns, *self._nodes.values()]:
                conn.close()
            self._bootstrap_conns.clear()
            self._nodes.clear()

    # -- connections -------------------------------------------------------------------------------

    def any_connection(self) -> BrokerConnection:
        """A live connection: a known node if any, else the first bootstrap server that answers."""
        with self._lock:
            for conn in self._nodes.values():
                if conn.connected:
                    return conn
            errors = []
            if not self._bootstrap_conns:
                self._bootstrap_conns = [self._new_connection(h, p, None) for h, p in self.bootstrap]
            for conn in self._bootstrap_conns:
                try:
                    conn.connect()
                    return conn
                except BrokerConnectionError as exc:
                    errors.append(str(exc))
            raise BrokerConnectionError("no bootstrap server reachable: " + "; ".join(errors))

    def connection(self, node_id: int) -> BrokerConnection:
        """The connection to broker ``node_id`` (refreshing metadata when the node is unknown)."""
        with self._lock:
            conn = self._nodes.get(node_id)
            if conn is not None:
                return conn
            if node_id not in self.cache.brokers:
                self.refresh_metadata(())
            info = self.cache.brokers.get(node_id)
            if info is None:
                raise KafkaError(ErrorCode.broker_not_available, f"node {node_id} not in metadata")
            conn = self._new_connection(info.host, info.port, node_id)
            self._nodes[node_id] = conn
            return conn

    # -- metadata ----------------------------------------------------------------------------------

    def refresh_metadata(
        self,
        topics: list[str] | tuple[str, ...] | None = None,
        *,
        topic_ids: list[uuid.UUID] | tuple[uuid.UUID, ...] = (),
        allow_auto_create: bool = False,
    ) -> MetadataCache:
        """Ask for metadata on ``topics`` (None: every topic; empty: brokers only) and merge it in."""
        conn = self.any_connection()
        _v, m = conn.module(METADATA)
        if topics is None and not topic_ids:
            wanted: Any = None
        else:
            wanted = tuple(m.MetadataRequestTopic(topic_id=None, name=t) for t in topics or ()) + tuple(
                m.MetadataRequestTopic(topic_id=tid, name=None) for tid in topic_ids
            )
        request = m.MetadataRequest(
            topics=wanted,
            allow_auto_topic_creation=allow_auto_create,
            include_topic_authorized_operations=False,
        )
        response = conn.send(request, idempotent=True)
        if getattr(response, "error_code", ErrorCode.none) != ErrorCode.none:
            raise KafkaError(response.error_code, context="Metadata")
        with self._lock:
            cache = self.cache
            cache.brokers = {
                int(b.node_id): BrokerInfo(node_id=int(b.node_id), host=b.host, port=int(b.port), rack=b.rack)
                for b in response.brokers
            }
            cache.cluster_id = response.cluster_id
            cache.controller_id = int(response.controller_id)
            if topics is None and not topic_ids:
                cache.topics.clear()
                cache.names_by_id.clear()
            for t in response.topics:
                if t.error_code != ErrorCode.none:
                    if t.error_code == ErrorCode.topic_authorization_failed and t.name:
                        self.denied_topics.add(t.name)
                    if t.name in cache.topics:
                        old = cache.topics.pop(t.name)
                        cache.names_by_id.pop(old.topic_id, None)
                    continue
                info = TopicInfo(
                    name=t.name,
                    topic_id=t.topic_id,
                    is_internal=bool(t.is_internal),
                    partitions=tuple(
                        sorted(
                            (
                                PartitionInfo(
                                    partition=int(p.partition_index),
                                    leader=int(p.leader_id),
                                    leader_epoch=int(p.leader_epoch),
                                    replicas=tuple(int(r) for r in p.replica_nodes),
                                    isr=tuple(int(r) for r in p.isr_nodes),
                                    error=p.error_code,
                                )
                                for p in t.partitions
                            ),
                            key=lambda p: p.partition,
                        )
                    ),
                )
                cache.topics[info.name] = info
                cache.names_by_id[info.topic_id] = info.name
            # keep connections of nodes that moved in sync with their new address
            for node_id, conn in list(self._nodes.items()):
                b = cache.brokers.get(node_id)
                if b is None or (b.host, b.port) != (conn.host, conn.port):
                    conn.close()
                    del self._nodes[node_id]
            return cache

    def topic(self, name: str, *, refresh: bool = False) -> TopicInfo:
        """Metadata of topic ``name``; raises ``KafkaError(UNKNOWN_TOPIC_OR_PART)`` if it does not exist."""
        if refresh or name not in self.cache.topics:
            self.refresh_metadata([name])
        info = self.cache.topics.get(name)
        if info is None:
            if name in self.denied_topics:
                raise KafkaError(ErrorCode.topic_authorization_failed, name)
            raise KafkaError(ErrorCode.unknown_topic_or_partition, name)
        return info

    def topic_name(self, topic_id: uuid.UUID) -> str:
        name = self.cache.names_by_id.get(topic_id)
        if name is None:
            self.refresh_metadata(topic_ids=[topic_id])
            name = self.cache.names_by_id.get(topic_id)
        if name is None:
            raise KafkaError(ErrorCode.unknown_topic_id, str(topic_id))
        return name

    def wait_for_topic(self, name: str, timeout: float = 10.0) -> TopicInfo:
        """Poll metadata until ``name`` exists with a leader for every partition."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                info = self.topic(name, refresh=True)
                if all(p.leader >= 0 for p in info.partitions):
                    return info
            except KafkaError:
                if time.monotonic() >= deadline:
                    raise
            if time.monotonic() >= deadline:
                raise KafkaError(ErrorCode.leader_not_available, name)
            time.sleep(0.05)

    def leader_connection(self, topic: str, partition: int) -> BrokerConnection:
        leader = self.topic(topic).partition(partition).leader
        if leader < 0:
            leader = self.topic(topic, refresh=True).partition(partition).leader
            if leader < 0:
                raise KafkaError(ErrorCode.leader_not_available, f"{topic}-{partition}")
        return self.connection(leader)

    # -- coordinators ------------------------------------------------------------------------------

    def coordinator(
        self, key: str, key_type: int = COORDINATOR_GROUP, *, refresh: bool = False
    ) -> BrokerConnection:
        """The connection to the coordinator of ``key`` (a group id for key_type 0)."""
        cached = None if refresh else self._coordinators.get((key_type, key))
        if cached is not None:
            return self.connection(cached)
        conn = self.any_connection()
        v, m = conn.module(FIND_COORDINATOR)
        deadline = time.monotonic() + self.request_timeout
        while True:
            if v >= 4:
                response = conn.send(
                    m.FindCoordinatorRequest(key_type=key_type, coordinator_keys=(key,)), idempotent=True
                )
                c = response.coordinators[0]
                error, message, node_id, host, port = c.error_code, c.error_message, c.node_id, c.host, c.port
            else:
                response = conn.send(m.FindCoordinatorRequest(key=key, key_type=key_type), idempotent=True)
                error, message = response.error_code, response.error_message
                node_id, host, port = response.node_id, response.host, response.port
            if error == ErrorCode.coordinator_not_available and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            if error != ErrorCode.none:
                raise KafkaError(error, message, context=f"FindCoordinator({key})")
            break
        node_id = int(node_id)
        with self._lock:
            if node_id not in self.cache.brokers:
                self.cache.brokers[node_id] = BrokerInfo(node_id=node_id, host=host, port=int(port))
            self._coordinators[(key_type, key)] = node_id
        return self.connection(node_id)

    def coordinator_call(self, group_id: str, api_key: int, build: Callable[[Any], Any]) -> Any:
        """Send ``build(module)`` to the group coordinator, as Kafka's clients do: look it up again
        when it moved, is not available or its connection dropped (a restarting broker), wait while
        it loads, with a growing backoff, for at least ten attempts and up to the request timeout.
        Returns the last response (it may still carry an error the caller reports)."""
        backoff = 0.05
        code: ErrorCode | None = None
        deadline = time.monotonic() + self.request_timeout
        attempt = 0
        while True:
            attempt += 1
            last = attempt >= COORDINATOR_ATTEMPTS and time.monotonic() + backoff >= deadline
            try:
                # a coordinator that moved or is unavailable is looked up again; one loading is waited on
                conn = self.coordinator(group_id, refresh=code is not None and code is not _LOADING)
                _v, m = conn.module(api_key)
                response = conn.send(build(m))
            except BrokerConnectionError:
                if last:
                    raise
                code = ErrorCode.not_coordinator
            else:
                code = _coordinator_retriable(response)
                if code is None or last:
                    return response
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def forget_coordinator(self, key: str, key_type: int = COORDINATOR_GROUP) -> None:
        self._coordinators.pop((key_type, key), None)


COORDINATOR_ATTEMPTS = 10
_LOADING = ErrorCode.coordinator_load_in_progress
COORDINATOR_ERRORS = frozenset((ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, _LOADING))
"""A group coordinator that moved, is not available or is loading: look it up again and retry."""


def _coordinator_retriable(response: Any) -> ErrorCode | None:
    """The coordinator error that makes the whole call worth repeating, if any: on the response,
    a group or result of it, or a partition of it (OffsetCommit answers per partition)."""
    codes = [getattr(response, "error_code", ErrorCode.none)]
    codes += [getattr(g, "error_code", ErrorCode.none) for g in getattr(response, "groups", ()) or ()]
    codes += [getattr(r, "error_code", ErrorCode.none) for r in getattr(response, "results", ()) or ()]
    for topic in getattr(response, "topics", ()) or ():
        codes += [getattr(p, "error_code", ErrorCode.none) for p in getattr(topic, "partitions", ()) or ()]
    return next((c for c in codes if c in COORDINATOR_ERRORS), None)
