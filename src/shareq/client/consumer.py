"""An assign()-style consumer: Fetch (by topic id) from explicit offsets, records decoded client-side.

No group membership and no committed offsets: the caller owns positions (the Spark batch source plans
offset ranges and reads them with ``fetch``).
"""

from __future__ import annotations

import datetime
import struct
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from shareq.log.records import Record
from shareq.protocol.api_keys import FETCH

from . import _offsets
from .admin_types import OffsetInfo, OffsetSpec
from .cluster import Cluster
from .errors import BrokerConnectionError, ClientError, KafkaError
from .records import ConsumerRecord, iter_record_batches
from .security import ClientSecurity

_REFRESH = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.unknown_topic_id,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.leader_not_available,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResult:
    """One partition's fetch: the records at or after the requested offset, and the log's bounds."""

    topic: str
    partition: int
    records: tuple[ConsumerRecord, ...]
    next_offset: int
    high_watermark: int
    log_start_offset: int
    error: ErrorCode = ErrorCode.none


def records_from_blob(
    blob: bytes | None,
    *,
    topic: str,
    partition: int,
    topic_id: uuid.UUID | None,
    from_offset: int,
    aborted: Iterable[tuple[int, int]] | None = None,
) -> tuple[list[ConsumerRecord], int]:
    """Decode a fetched ``records`` blob into records at offsets >= ``from_offset`` (control batches skipped);
    return them with the offset after the last whole batch seen.

    ``aborted`` is a read_committed Fetch's aborted transactions, ``(producer id, first offset)``:
    a transactional batch of a producer whose aborted transaction has begun at or before it is
    dropped, until that producer's ABORT marker, as Kafka's consumer does (the broker sends the
    list; filtering is the client's job)."""
    out: list[ConsumerRecord] = []
    next_offset = from_offset
    if not blob:
        return out, next_offset
    pending = sorted(aborted or (), key=lambda entry: entry[1])
    aborting: set[int] = set()
    for batch in iter_record_batches(bytes(blob)):
        header = batch.header
        next_offset = max(next_offset, header.next_offset)
        while pending and pending[0][1] <= header.last_offset:
            aborting.add(pending.pop(0)[0])
        if header.is_control:
            if header.producer_id in aborting and _is_abort_marker(batch.records):
                aborting.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in aborting:
            continue
        for r in batch.records:
            if r.offset < from_offset:
                continue
            out.append(
                ConsumerRecord(
                    topic=topic,
                    partition=partition,
                    offset=r.offset,
                    key=r.key,
                    value=r.value,
                    headers=r.headers,
                    timestamp=-1 if r.timestamp is None else r.timestamp,
                    topic_id=topic_id,
                    leader_epoch=batch.header.partition_leader_epoch,
                )
            )
    return out, next_offset


def _is_abort_marker(records: Iterable[Record]) -> bool:
    """A control batch's record key is (version int16, type int16): type 0 is ABORT, 1 COMMIT."""
    for record in records:
        key = record.key
        return key is not None and len(key) >= 4 and struct.unpack_from(">h", key, 2)[0] == 0
    return False


class Consumer:
    """``c = Consumer(bootstrap); c.assign({("t", 0): 0}); c.poll(1.0)``."""

    def __init__(
        self,
        bootstrap: str | list[str],
        *,
        client_id: str = "shareq-consumer",
        request_timeout: float = 30.0,
        security: ClientSecurity | None = None,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
        max_partition_bytes: int = 1024 * 1024,
        isolation_level: int = 0,
    ) -> None:
        self.cluster = Cluster(
            bootstrap, client_id=client_id, request_timeout=request_timeout, security=security
        )
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.max_partition_bytes = max_partition_bytes
        self.isolation_level = isolation_level
        self._positions: dict[tuple[str, int], int] = {}
        self._buffer: list[ConsumerRecord] = []

    def close(self) -> None:
        self.cluster.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- positions ---------------------------------------------------------------------------------

    def assign(self, positions: Mapping[tuple[str, int], int]) -> None:
        """Replace the assignment; each offset may be OffsetSpec.EARLIEST (-2) or LATEST (-1)."""
        self._positions = {}
        self._buffer = []
        for (topic, partition), offset in positions.items():
            self.seek(topic, partition, offset)

    def assignment(self) -> list[tuple[str, int]]:
        return sorted(self._positions)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        if offset < 0:
            offset = self.offsets(topic, OffsetSpec(offset), [partition])[partition].offset
        self._positions[(topic, partition)] = offset
        self._buffer = [r for r in self._buffer if (r.topic, r.partition) != (topic, partition)]

    def position(self, topic: str, partition: int) -> int:
        return self._positions[(topic, partition)]

    def offsets(
        self, topic: str, spec: OffsetSpec | int = OffsetSpec.LATEST, partitions: Iterable[int] | None = None
    ) -> dict[int, OffsetInfo]:
        return _offsets.list_offsets(
            self.cluster,
            topic,
            None if partitions is None else list(partitions),
            spec,
            isolation_level=self.isolation_level,
        )

    # -- fetching ----------------------------------------------------------------------------------

    def poll(self, timeout: float = 1.0, max_records: int = 500) -> list[ConsumerRecord]:
        """Up to ``max_records`` records from the assigned partitions, advancing positions."""
        if not self._buffer and self._positions:
            wanted = dict(self._positions)
            results = self.fetch_many(wanted, max_wait_ms=min(int(timeout * 1000), self.max_wait_ms))
            for r in results:
                for rec in r.records:
                    self._buffer.append(rec)
                if r.error != ErrorCode.none:
                    raise KafkaError(r.error, context=f"Fetch({r.topic}-{r.partition})")
                if not r.records and r.next_offset > wanted[(r.topic, r.partition)]:
                    # only control or aborted batches: step over them, as Kafka's consumer does
                    self._positions[(r.topic, r.partition)] = r.next_offset
        out, self._buffer = self._buffer[:max_records], self._buffer[max_records:]
        for rec in out:
            self._positions[(rec.topic, rec.partition)] = rec.offset + 1
        return out

    def fetch(
        self, topic: str, partition: int, offset: int, *, max_wait_ms: int = 0, max_bytes: int | None = None
    ) -> FetchResult:
        """One stateless fetch of ``topic``-``partition`` from ``offset`` (no positions touched)."""
        (result,) = self.fetch_many(
            {(topic, partition): offset}, max_wait_ms=max_wait_ms, max_bytes=max_bytes
        )
        return result

    def fetch_many(
        self,
        offsets: Mapping[tuple[str, int], int],
        *,
        max_wait_ms: int | None = None,
        max_bytes: int | None = None,
    ) -> list[FetchResult]:
        """One Fetch per partition leader for the given (topic, partition) -> offset map."""
        by_leader: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
        for (topic, partition), offset in offsets.items():
            by_leader[self.cluster.topic(topic).partition(partition).leader].append(
                (topic, partition, offset)
            )
        out: list[FetchResult] = []
        refresh = False
        for leader, items in by_leader.items():
            try:
                results = self._fetch_from(leader, items, max_wait_ms, max_bytes)
            except BrokerConnectionError:
                refresh = True
                continue
            for r in results:
                if r.error in _REFRESH:
                    refresh = True
                out.append(r)
        if refresh:
            self.cluster.refresh_metadata(sorted({t for t, _ in offsets}))
        return out

    def _fetch_from(
        self, leader: int, items: list[tuple[str, int, int]], max_wait_ms: int | None, max_bytes: int | None
    ) -> list[FetchResult]:
        conn = self.cluster.connection(leader)
        _v, m = conn.module(FETCH)
        by_topic: dict[uuid.UUID, list[tuple[int, int]]] = defaultdict(list)
        names: dict[uuid.UUID, str] = {}
        for topic, partition, offset in items:
            tid = self.cluster.topic(topic).topic_id
            names[tid] = topic
            by_topic[tid].append((partition, offset))
        part_bytes = max_bytes if max_bytes is not None else self.max_partition_bytes
        wait = self.max_wait_ms if max_wait_ms is None else max_wait_ms
        request = m.FetchRequest(
            max_wait=datetime.timedelta(milliseconds=wait),
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            isolation_level=self.isolation_level,
            session_id=0,
            session_epoch=-1,
            topics=tuple(
                m.FetchTopic(
                    topic_id=tid,
                    partitions=tuple(
                        m.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=part_bytes)
                        for p, o in parts
                    ),
                )
                for tid, parts in by_topic.items()
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
        response = conn.send(request, timeout=conn.request_timeout + wait / 1000.0)
        if response.error_code != ErrorCode.none:
            raise KafkaError(response.error_code, context="Fetch")
        requested = {(names[tid], p): o for tid, parts in by_topic.items() for p, o in parts}
        out = []
        for t in response.responses:
            if t.topic_id not in names:
                raise ClientError(f"fetch answered for unknown topic id {t.topic_id}")
            topic = names[t.topic_id]
            for p in t.partitions:
                start = requested[(topic, int(p.partition_index))]
                records, next_offset = records_from_blob(
                    p.records,
                    topic=topic,
                    partition=int(p.partition_index),
                    topic_id=t.topic_id,
                    from_offset=start,
                    aborted=[(int(a.producer_id), int(a.first_offset)) for a in p.aborted_transactions or ()],
                )
                out.append(
                    FetchResult(
                        topic=topic,
                        partition=int(p.partition_index),
                        records=tuple(records),
                        next_offset=next_offset,
                        high_watermark=int(p.high_watermark),
                        log_start_offset=int(p.log_start_offset),
                        error=p.error_code,
                    )
                )
        return out
