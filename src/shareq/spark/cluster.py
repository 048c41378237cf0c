"""The connector's narrow view of a cluster, on shareq's own client.

Everything the connector does over the wire goes through here: metadata, ListOffsets, plain
Fetch (executors), Produce (sinks, side channel), topic creation, group configs, and the share
session (driver). Keeping it in one module keeps the Spark code independent of client details.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from shareq.client import (
    Admin,
    ClientError,
    ConfigResource,
    Consumer,
    KafkaError,
    Producer,
    ResourceType,
    UnsupportedVersionError,
)
from shareq.client.security import ClientSecurity
from shareq.heap import retain_large_buffers

from .offsets import EARLIEST, TopicPartition
from .options import ConnectOptions, OptionError
from .schema import FetchedRecord

log = logging.getLogger(__name__)

TOPIC_ALREADY_EXISTS = 36
TOPIC_WAIT_S = 15.0
CONFIG_WAIT_S = 15.0
FETCH = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class OutRecord:
    """A record to produce; ``partition=None`` lets the producer choose (key hash, else sticky)."""

    topic: str
    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    partition: int | None = None


_JAAS_FIELD = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _security_config(params: dict[str, str]) -> dict[str, str]:
    """The security settings, with a Java client's ``sasl.jaas.config`` read for its username and
    password (PlainLoginModule and ScramLoginModule take the same two fields)."""
    config = dict(params)
    jaas = config.pop("sasl.jaas.config", None)
    if jaas is not None:
        found = dict(_JAAS_FIELD.findall(jaas))
        config.setdefault("sasl.username", found.get("username", ""))
        config.setdefault("sasl.password", found.get("password", ""))
    return config


def _client_kwargs(connect: ConnectOptions) -> dict[str, Any]:
    """Keyword arguments shared by the client's consumer, producer and admin (the ``kafka.*``
    settings were checked against what the client honours when the options were parsed)."""
    params = dict(connect.client_params)
    kwargs: dict[str, Any] = {}
    if "client.id" in params:
        kwargs["client_id"] = params["client.id"]
    if "request.timeout.ms" in params:
        kwargs["request_timeout"] = int(params["request.timeout.ms"]) / 1000.0
    security = _security_config(params)
    if any(name.startswith(("security.", "sasl.", "ssl.")) for name in security):
        kwargs["security"] = ClientSecurity.from_config(security)
    return kwargs


def _producer_kwargs(connect: ConnectOptions) -> dict[str, Any]:
    """The sink's producer settings: ``acks`` (all/-1, 1, 0), ``linger.ms``, ``batch.size``, ``retries``."""
    params = dict(connect.client_params)
    kwargs: dict[str, Any] = {}
    try:
        if "acks" in params:
            acks = params["acks"].strip().lower()
            kwargs["acks"] = -1 if acks == "all" else int(acks)
            if kwargs["acks"] not in (-1, 0, 1):
                raise ValueError(acks)
        if "linger.ms" in params:
            kwargs["linger_ms"] = int(params["linger.ms"])
        if "batch.size" in params:
            kwargs["batch_size"] = max(1, int(params["batch.size"]))
        if "retries" in params:
            kwargs["retries"] = int(params["retries"])
    except ValueError as exc:
        raise ValueError(f"a kafka.* producer setting is malformed: {exc}") from exc
    return kwargs


class Cluster:
    """Short-lived connections for one planning step or one task (opened lazily, closed on exit)."""

    def __init__(self, connect: ConnectOptions) -> None:
        # Drivers and tasks receive a micro-batch's bytes in responses of megabytes: reuse their
        # pages instead of faulting in fresh ones per response (once per process).
        retain_large_buffers()
        self._connect = connect
        self._kwargs = _client_kwargs(connect)
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._admin: Admin | None = None

    def __enter__(self) -> Cluster:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        for part in (self._producer, self._consumer, self._admin):
            if part is not None:
                part.close()
        self._producer = self._consumer = self._admin = None

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(self._connect.bootstrap, **self._kwargs)
        return self._consumer

    @property
    def admin(self) -> Admin:
        if self._admin is None:
            self._admin = Admin(self._connect.bootstrap, **self._kwargs)
        return self._admin

    def require(self, needed_by: str, *api_keys: int) -> None:
        """Refuse (``OptionError``) when the broker serves no version of an API ``needed_by`` uses,
        saying what the broker lacks and which setting turns it on. An unreachable broker is not
        refused here: the query meets it, and retries, as it would without the check."""
        try:
            connection = self.admin.cluster.any_connection()
            for api_key in api_keys:
                connection.version(api_key)
        except UnsupportedVersionError as exc:
            raise OptionError(f"{needed_by}, but {exc}") from None
        except ClientError as exc:
            log.info("could not check the broker's APIs for %s: %s", needed_by, exc)

    # -- metadata and offsets ------------------------------------------------------------------

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        return {t: len(self.consumer.cluster.topic(t, refresh=True).partitions) for t in topics}

    def list_offsets(self, tps: Sequence[TopicPartition], which: int) -> dict[TopicPartition, int]:
        """EARLIEST (-2) or LATEST (-1, the high watermark) offsets of the given partitions."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, []).append(partition)
        out: dict[TopicPartition, int] = {}
        for topic, partitions in by_topic.items():
            spec = -2 if which == EARLIEST else -1
            for partition, info in self.consumer.offsets(topic, spec, partitions).items():
                out[(topic, partition)] = info.offset
        return out

    def offsets_for_times(self, wanted: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """ListOffsets by timestamp: per partition the first offset whose record timestamp is at or
        after the given one, or None where no record is that late."""
        by_query: dict[tuple[str, int], list[int]] = {}
        for (topic, partition), timestamp in wanted.items():
            by_query.setdefault((topic, timestamp), []).append(partition)
        out: dict[TopicPartition, int | None] = {}
        for (topic, timestamp), partitions in sorted(by_query.items()):
            for partition, info in self.consumer.offsets(topic, timestamp, partitions).items():
                out[(topic, partition)] = info.offset if info.offset >= 0 else None
        return out

    def topics_matching(self, pattern: str) -> list[str]:
        """Topics whose whole name matches ``pattern`` (internal topics excluded, as Kafka's consumer
        excludes them from a pattern subscription)."""
        compiled = re.compile(pattern)
        cache = self.consumer.cluster.refresh_metadata(None)
        return sorted(
            name
            for name, info in cache.topics.items()
            if not info.is_internal and not name.startswith("__") and compiled.fullmatch(name)
        )

    def fetch(
        self, topic: str, partition: int, offset: int, *, max_bytes: int
    ) -> tuple[list[FetchedRecord], int]:
        """Records at or after ``offset`` and the offset to fetch next (== ``offset`` at the end)."""
        result = self.consumer.fetch(topic, partition, offset, max_wait_ms=0, max_bytes=max_bytes)
        if int(result.error) != 0:
            raise KafkaError(result.error, context=f"Fetch({topic}-{partition}@{offset})")
        records = [
            FetchedRecord(
                offset=r.offset,
                timestamp_ms=r.timestamp,
                timestamp_type=0,
                key=r.key,
                value=r.value,
                headers=tuple(r.headers),
            )
            for r in result.records
        ]
        return records, result.next_offset

    def forget_leaders(self, topic: str) -> None:
        """Look the topic's leaders up again (after a failed fetch); a cluster still electing a leader
        or a broker still down is left for the next attempt."""
        with contextlib.suppress(ClientError):
            self.consumer.cluster.topic(topic, refresh=True)

    def fetch_raw(self, topic: str, partition: int, offset: int, *, max_bytes: int) -> bytes:
        """The records blob of one Fetch from ``offset`` (whole batches; possibly a truncated tail)."""
        cluster = self.consumer.cluster
        info = cluster.topic(topic)
        conn = cluster.connection(info.partition(partition).leader)
        _v, m = conn.module(FETCH)
        request = m.FetchRequest(
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(
                m.FetchTopic(
                    topic_id=info.topic_id,
                    partitions=(
                        m.FetchPartition(
                            partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
        response = conn.send(request)
        if int(response.error_code) != 0:
            raise KafkaError(response.error_code, context="Fetch")
        for t in response.responses:
            for p in t.partitions:
                if int(p.error_code) != 0:
                    raise KafkaError(p.error_code, context=f"Fetch({topic}-{partition}@{offset})")
                return bytes(p.records or b"")
        return b""

    # -- writes and admin ----------------------------------------------------------------------

    def produce(self, records: Iterable[OutRecord]) -> int:
        """Produce and wait for the broker's acknowledgement of every record."""
        if self._producer is None:
            self._producer = Producer(
                self._connect.bootstrap, idempotent=False, **self._kwargs, **_producer_kwargs(self._connect)
            )
        n = 0
        for r in records:
            self._producer.send(r.topic, r.value, key=r.key, headers=r.headers, partition=r.partition)
            n += 1
        self._producer.flush()
        return n

    def ensure_topic(self, name: str, *, partitions: int, configs: dict[str, str] | None = None) -> None:
        """Create ``name`` unless it exists, and wait until metadata shows it with leaders (Kafka
        answers CreateTopics before every broker's metadata has the topic)."""
        brokers = len(self.admin.cluster.refresh_metadata([]).brokers)
        try:
            # Replicated like Kafka's internal topics, so a query outlives one broker of a cluster.
            self.admin.create_topic(name, partitions, min(3, max(1, brokers)), configs=configs)
        except KafkaError as exc:
            if int(exc.code) != TOPIC_ALREADY_EXISTS:
                raise
        self.admin.cluster.wait_for_topic(name, TOPIC_WAIT_S)

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """IncrementalAlterConfigs SET on the GROUP resource, then wait until it is described.

        Kafka applies a group config through its metadata log, so a member joining right after the
        alter could still start with the old ``share.auto.offset.reset`` (and read nothing). A name
        the broker does not describe counts as applied; past the deadline the query goes on with a
        warning rather than fail."""
        resource = ConfigResource(ResourceType.GROUP, group_id)
        self.admin.alter_configs(resource, configs)
        deadline = time.monotonic() + CONFIG_WAIT_S
        while True:
            described = self.admin.describe_configs([resource], keys=list(configs)).get(resource, {})
            stale = {
                name: entry.value
                for name, value in configs.items()
                if (entry := described.get(name)) is not None and entry.value != value
            }
            if not stale:
                return
            if time.monotonic() >= deadline:
                log.warning("group %s still describes %s after setting %s", group_id, stale, configs)
                return
            time.sleep(0.05)

    def group_config(self, group_id: str, name: str) -> str | None:
        resource = ConfigResource(ResourceType.GROUP, group_id)
        entries = self.admin.describe_configs([resource], keys=[name]).get(resource, {})
        entry = entries.get(name)
        return None if entry is None else entry.value

    def share_progress(
        self, group_id: str, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, tuple[int, int | None]]:
        """The group's share-partition start offset (-1 where none yet) and lag (None where the broker
        does not report it), from DescribeShareGroupOffsets."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, []).append(partition)
        found = self.admin.describe_share_group_offsets(group_id, by_topic)
        return {tp: (found[tp].start_offset, found[tp].lag) if tp in found else (-1, None) for tp in tps}

    def broker_config(self, name: str) -> str | None:
        """A config of one broker (DescribeConfigs on BROKER "<id>"; the first broker in metadata)."""
        brokers = self.admin.cluster.refresh_metadata([]).brokers
        if not brokers:
            return None
        resource = ConfigResource(ResourceType.BROKER, str(min(brokers)))
        entry = self.admin.describe_configs([resource], keys=[name]).get(resource, {}).get(name)
        return None if entry is None else entry.value
