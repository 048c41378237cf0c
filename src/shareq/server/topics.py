"""The topic registry: names, topic ids, partition counts, topic configs and the cluster id.

Everything lives in one small JSON document in the data directory, replaced atomically (write a
temporary file, fsync it, rename it over the old one, fsync the directory), so a crash leaves
either the old registry or the new one.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REGISTRY_FILE = "topics.json"
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
INTERNAL_PREFIX = "__"


class InvalidTopicError(ValueError):
    """A topic name Kafka would not accept."""


class TopicExistsError(ValueError):
    """A topic of that name already exists."""


class UnknownTopicError(KeyError):
    """No topic of that name or id."""


def validate_topic_name(name: str) -> None:
    if name in (".", "..") or not _LEGAL_NAME.match(name):
        raise InvalidTopicError(
            f"topic name {name!r} is illegal: use 1-249 of [a-zA-Z0-9._-], not '.' or '..'"
        )


def is_internal(name: str) -> bool:
    return name.startswith(INTERNAL_PREFIX)


@dataclass(slots=True, kw_only=True)
class TopicInfo:
    """One topic as the registry knows it; ``configs`` holds only explicit overrides."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return is_internal(self.name)


def new_cluster_id() -> str:
    """A 22-character url-safe base64 uuid, the form Kafka uses for cluster ids."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


PRODUCER_ID_BLOCK = 1000


class TopicRegistry:
    """Topic metadata and a few cluster-wide counters, persisted on every change."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / REGISTRY_FILE
        self._data_dir = data_dir
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self.cluster_id = new_cluster_id()
        self.next_producer_id = 1000
        self._producer_id_block_end = 1000  # ids below this are reserved durably
        self.broker_overrides: dict[str, str] = {}
        self.cluster_defaults: dict[str, str] = {}
        self.client_quotas: list[dict[str, Any]] = []
        self.generation = 0
        """Bumped whenever a topic is created, deleted or grown (what Metadata answers depends on)."""
        self.change_count = 0
        """Changes written since this broker started (DescribeQuorum's offsets: they only grow)."""
        if self._path.exists():
            self._load()
        else:
            # KRaft writes this cluster default when a node is formatted; Kafka describes a topic's
            # min.insync.replicas as coming from it (DYNAMIC_DEFAULT_BROKER_CONFIG).
            self.cluster_defaults = {"min.insync.replicas": "1"}
            self._save()

    # -- queries ---------------------------------------------------------------------------------

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[TopicInfo]:
        return iter(list(self._by_name.values()))

    def get(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    # -- changes ---------------------------------------------------------------------------------

    def create(self, name: str, partitions: int, configs: Mapping[str, str] | None = None) -> TopicInfo:
        validate_topic_name(name)
        if name in self._by_name:
            raise TopicExistsError(name)
        if partitions < 1:
            raise ValueError(f"partition count must be positive, got {partitions}")
        info = TopicInfo(name=name, topic_id=uuid.uuid4(), partitions=partitions, configs=dict(configs or {}))
        self._by_name[name] = info
        self._by_id[info.topic_id] = info
        self.generation += 1
        self._save()
        return info

    def delete(self, name: str) -> TopicInfo:
        info = self._by_name.pop(name, None)
        if info is None:
            raise UnknownTopicError(name)
        del self._by_id[info.topic_id]
        self.generation += 1
        self._save()
        return info

    def set_partition_count(self, name: str, partitions: int) -> TopicInfo:
        """Grow a topic (CreatePartitions); a topic never shrinks."""
        info = self._by_name[name]
        if partitions < info.partitions:
            raise ValueError(f"topic {name} has {info.partitions} partitions, cannot shrink to {partitions}")
        info.partitions = partitions
        self.generation += 1
        self._save()
        return info

    def set_configs(self, name: str, configs: Mapping[str, str]) -> None:
        info = self._by_name[name]
        info.configs = dict(configs)
        self._save()

    def set_broker_overrides(self, overrides: Mapping[str, str]) -> None:
        """This broker's own dynamic configs (IncrementalAlterConfigs on BROKER "<node id>"),
        reapplied on restart."""
        self.broker_overrides = dict(overrides)
        self._save()

    def set_cluster_defaults(self, defaults: Mapping[str, str]) -> None:
        """The cluster-wide dynamic defaults (IncrementalAlterConfigs on BROKER ""), kept apart
        from the broker's own: a broker's own value wins over the cluster default."""
        self.cluster_defaults = dict(defaults)
        self._save()

    def set_client_quotas(self, quotas: list[dict[str, Any]]) -> None:
        """Client quotas (AlterClientQuotas), as ``quota.ClientQuotas.to_json`` writes them."""
        self.client_quotas = list(quotas)
        self._save()

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, also across restarts.

        Ids are reserved a block of ``PRODUCER_ID_BLOCK`` at a time (as Kafka's controller hands
        them out): the end of the block is persisted before its first id is used, and a restart
        resumes at the next block, so an id is never reused, whatever a crash loses.
        """
        producer_id = self.next_producer_id
        if producer_id >= self._producer_id_block_end:
            self._producer_id_block_end = producer_id + PRODUCER_ID_BLOCK
            self._save()
        self.next_producer_id += 1
        return producer_id

    # -- persistence -----------------------------------------------------------------------------

    def _load(self) -> None:
        document: dict[str, Any] = json.loads(self._path.read_text())
        self.cluster_id = document["cluster_id"]
        self.next_producer_id = self._producer_id_block_end = int(document["next_producer_id"])
        self.broker_overrides = dict(document.get("broker_overrides", {}))
        self.cluster_defaults = dict(document.get("cluster_default_configs", {}))
        self.client_quotas = list(document.get("client_quotas", []))
        for entry in document["topics"]:
            info = TopicInfo(
                name=entry["name"],
                topic_id=uuid.UUID(entry["topic_id"]),
                partitions=int(entry["partitions"]),
                configs=dict(entry.get("configs", {})),
            )
            self._by_name[info.name] = info
            self._by_id[info.topic_id] = info

    def _save(self) -> None:
        self.change_count += 1
        document = {
            "cluster_id": self.cluster_id,
            "next_producer_id": self._producer_id_block_end,
            "broker_overrides": self.broker_overrides,
            "cluster_default_configs": self.cluster_defaults,
            "client_quotas": self.client_quotas,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "partitions": t.partitions,
                    "configs": t.configs,
                }
                for t in self._by_name.values()
            ],
        }
        atomic_write(self._path, json.dumps(document, indent=1, sort_keys=True).encode())


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so readers see the old or the new content, never a mix."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
