"""Per-record acknowledgement decisions: how a pipeline RELEASEs or REJECTs rows instead of
accepting them.

The source acknowledges a micro-batch in its long-lived driver process once Spark has committed
the batch; by default every record is ACCEPTed. A pipeline that wants otherwise calls
:func:`acknowledge_failed` on the failed rows inside ``foreachBatch``. The decisions travel through a
small side-channel topic (option ``ackTopic``, default ``shareq-spark-acks``; one partition): each
message is keyed by the share group and names ``(topic, partition, offset, deliveryCount)`` tuples
and an acknowledgement type. Because ``foreachBatch`` returns (and the produce is acknowledged)
before Spark commits the batch, and the source acknowledges batch N only after that commit, the
source always sees batch N's decisions before it acknowledges batch N. The delivery count ties a
decision to one delivery, so a RELEASEd record that comes back is accepted unless marked again.

A topic rather than files is used because every party (driver, executors, the source's process on a
cluster) already reaches the broker, and no shared filesystem is assumed.

A RELEASEd record is redelivered until the group's delivery-count limit, after which the broker
archives it: a poison record cannot block the queue. REJECT archives at once.

The exactly-once sink also announces itself on this topic, once per source session it commits
(:func:`encode_sink_announcement`), before its first claim: that is how an exactly-once source
learns that its batches go to a sink that claims them (see :mod:`shareq.spark.eos`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from shareq.protocol.acknowledge_type import AcknowledgeType

from .cluster import Cluster, OutRecord
from .offsets import Run, TopicPartition
from .options import DEFAULT_ACK_TOPIC, ConnectOptions

log = logging.getLogger(__name__)

AckType = AcknowledgeType
"""The wire's acknowledgement types under the name this package has always used."""


def _ack_type(value: str | AckType) -> AckType:
    if isinstance(value, AckType):
        return value
    try:
        return AcknowledgeType[value.strip().upper()]
    except KeyError as exc:
        raise ValueError(f"acknowledgement type must be release or reject, got {value!r}") from exc


# A decision names one delivery of one record.
DeliveryKey = tuple[str, int, int, int]  # topic, partition, offset, delivery count


def encode_decisions(
    group_id: str, ack_type: AckType, rows: Iterable[DeliveryKey], *, topic: str = DEFAULT_ACK_TOPIC
) -> list[OutRecord]:
    """Side-channel messages for a set of failed deliveries (one message per topic-partition)."""
    by_tp: dict[TopicPartition, list[list[int]]] = {}
    for source_topic, partition, offset, count in rows:
        by_tp.setdefault((source_topic, partition), []).append([offset, count])
    out = []
    for (source_topic, partition), records in sorted(by_tp.items()):
        body = {"t": source_topic, "p": partition, "type": ack_type.name.lower(), "r": sorted(records)}
        out.append(OutRecord(topic=topic, key=group_id.encode(), value=json.dumps(body).encode()))
    return out


def encode_sink_announcement(group_id: str, session: str, *, topic: str = DEFAULT_ACK_TOPIC) -> OutRecord:
    """The message an exactly-once sink writes before it first claims a batch of source ``session``."""
    body = {"eosSink": session}
    return OutRecord(topic=topic, key=group_id.encode(), value=json.dumps(body).encode())


def decode_decision(value: bytes) -> tuple[AckType, list[DeliveryKey]] | str:
    """A side-channel message: a decision ``(type, deliveries)``, or the source session an
    exactly-once sink announced (a str)."""
    body = json.loads(value)
    if "eosSink" in body:
        return str(body["eosSink"])
    kind = _ack_type(str(body["type"]))
    topic, partition = str(body["t"]), int(body["p"])
    return kind, [(topic, partition, int(o), int(c)) for o, c in body["r"]]


def acknowledge_failed(
    rows: Any,
    *,
    bootstrap_servers: str,
    group_id: str,
    ack_type: str | AckType = "reject",
    ack_topic: str = DEFAULT_ACK_TOPIC,
) -> int:
    """Mark rows from the shareq source as failed; call it inside ``foreachBatch``.

    ``rows`` is a DataFrame with the source's ``topic``, ``partition``, ``offset`` and
    ``deliveryCount`` columns, or already collected rows/tuples in that order. ``ack_type`` is
    ``"reject"`` (archive now) or ``"release"`` (redeliver, up to the group's delivery limit).
    Returns the number of rows marked. Failed rows are expected to be few, so a DataFrame is
    collected to the driver and the decisions are produced from there.
    """
    kind = _ack_type(ack_type)
    if kind not in (AckType.RELEASE, AckType.REJECT):
        raise ValueError("acknowledge_failed takes release or reject")
    if hasattr(rows, "select"):
        rows = rows.select("topic", "partition", "offset", "deliveryCount").collect()
    keys = [(str(r[0]), int(r[1]), int(r[2]), int(r[3] or 0)) for r in rows]
    if not keys:
        return 0
    with Cluster(ConnectOptions(bootstrap=bootstrap_servers)) as cluster:
        cluster.ensure_topic(ack_topic, partitions=1)
        cluster.produce(encode_decisions(group_id, kind, keys, topic=ack_topic))
    return len(keys)


class DecisionLog:
    """The source's reader of the side channel: tails the topic and keeps this group's decisions."""

    RETAIN_SECONDS = 3600.0

    def __init__(self, cluster: Cluster, *, topic: str, group_id: str, from_earliest: bool = False) -> None:
        self._cluster = cluster
        self._topic = topic
        self._group = group_id.encode()
        cluster.ensure_topic(topic, partitions=1)
        # Decisions older than this process cannot concern batches it acquired. (An exactly-once
        # sink's commit process does not acquire, so it reads from the start: a decision names one
        # delivery, so an old one matches nothing.)
        self._position = cluster.list_offsets([(topic, 0)], -2 if from_earliest else -1)[(topic, 0)]
        self._decisions: dict[DeliveryKey, tuple[AckType, float]] = {}
        self.eos_sink_sessions: set[str] = set()  # source sessions an exactly-once sink announced

    def poll(self) -> None:
        """Read every decision written so far."""
        end = self._cluster.list_offsets([(self._topic, 0)], -1)[(self._topic, 0)]
        now = time.monotonic()
        while self._position < end:
            records, next_offset = self._cluster.fetch(self._topic, 0, self._position, max_bytes=1 << 20)
            for record in records:
                if record.offset < self._position or record.key != self._group or record.value is None:
                    continue
                try:
                    message = decode_decision(record.value)
                except (ValueError, KeyError, TypeError):
                    log.warning("ignoring a malformed decision at %s-0@%d", self._topic, record.offset)
                    continue
                if isinstance(message, str):
                    self.eos_sink_sessions.add(message)
                    continue
                kind, keys = message
                for key in keys:
                    self._decisions[key] = (kind, now)
            if next_offset <= self._position:
                break
            self._position = next_offset
        stale = [k for k, (_, seen) in self._decisions.items() if now - seen > self.RETAIN_SECONDS]
        for key in stale:
            del self._decisions[key]

    def split(
        self, acquired: Mapping[TopicPartition, tuple[Run, ...]]
    ) -> list[tuple[str, int, int, int, AckType]]:
        """Acknowledgement ranges for a batch: ACCEPT except the decided deliveries (consumed here)."""
        out: list[tuple[str, int, int, int, AckType]] = []
        for (topic, partition), runs in sorted(acquired.items()):
            for first, last, count in runs:
                start = first
                decided = sorted(
                    (offset, self._decisions.pop((t, p, offset, c))[0])
                    for (t, p, offset, c) in list(self._decisions)
                    if t == topic and p == partition and c == count and first <= offset <= last
                )
                for offset, kind in decided:
                    if offset > start:
                        out.append((topic, partition, start, offset - 1, AckType.ACCEPT))
                    out.append((topic, partition, offset, offset, kind))
                    start = offset + 1
                if start <= last:
                    out.append((topic, partition, start, last, AckType.ACCEPT))
        return out
