"""``GroupConsumer``: a KIP-848 consumer-group member (``group.protocol=consumer``) that reads its
assigned partitions from their committed offsets and commits what it has read.

Single-threaded: ``poll`` sends a ConsumerGroupHeartbeat when one is due (or the assignment is
still settling) and then fetches. Partitions the coordinator revokes are committed, dropped and
reported as no longer owned on the next heartbeat, so a partition is never read by two members.
Only Kafka's wire is used, so it works against any Kafka 4.x cluster as well.
"""

from __future__ import annotations

import base64
import datetime
import time
import uuid
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol.api_keys import CONSUMER_GROUP_HEARTBEAT, OFFSET_COMMIT, OFFSET_FETCH

from . import _admin_consumer
from .admin_types import OffsetSpec
from .cluster import COORDINATOR_ERRORS
from .consumer import Consumer
from .errors import BrokerConnectionError, KafkaError
from .records import ConsumerRecord

_REJOIN = {ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch}
_RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms


class GroupConsumer:
    """``c = GroupConsumer(bootstrap, "billing", ["orders"]); c.poll(1.0); c.commit(); c.close()``."""

    def __init__(
        self,
        bootstrap: str | list[str],
        group_id: str,
        topics: Sequence[str],
        *,
        client_id: str = "shareq-group-consumer",
        request_timeout: float = 30.0,
        auto_offset_reset: str = "earliest",
        rebalance_timeout_ms: int = 60_000,
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest"):
            raise ValueError(f"auto_offset_reset must be earliest or latest, got {auto_offset_reset!r}")
        self.group_id = group_id
        self.topics = tuple(topics)
        self._reset = OffsetSpec.EARLIEST if auto_offset_reset == "earliest" else OffsetSpec.LATEST
        self._rebalance_timeout_ms = rebalance_timeout_ms
        self._fetcher = Consumer(bootstrap, client_id=client_id, request_timeout=request_timeout)
        self.cluster = self._fetcher.cluster
        self.member_id = _new_member_id()
        self.epoch = 0
        self._interval_s = 0.0
        self._next_heartbeat = 0.0
        self._settling = True
        self._owned: dict[uuid.UUID, frozenset[int]] = {}

    # -- membership --------------------------------------------------------------------------------

    def _heartbeat(self, *, leave: bool = False) -> None:
        try:
            conn = self.cluster.coordinator(self.group_id)
        except BrokerConnectionError:
            if leave:
                raise
            self._retry_heartbeat()
            return
        _v, m = conn.module(CONSUMER_GROUP_HEARTBEAT)
        joining = self.epoch == 0
        request = m.ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=-1 if leave else self.epoch,
            rebalance_timeout=datetime.timedelta(milliseconds=self._rebalance_timeout_ms),
            subscribed_topic_names=self.topics if joining else None,
            topic_partitions=tuple(
                m.TopicPartitions(topic_id=t, partitions=tuple(sorted(ps))) for t, ps in self._owned.items()
            ),
        )
        try:
            response = conn.send(request)
        except BrokerConnectionError:
            if leave:
                raise
            self.cluster.forget_coordinator(self.group_id)
            self._retry_heartbeat()
            return
        if response.error_code in COORDINATOR_ERRORS and not leave:
            self.cluster.forget_coordinator(self.group_id)
            self._retry_heartbeat()
            return
        if response.error_code in _REJOIN and not leave:  # fenced: what it held is no longer its own
            self._drop(set(self._owned_names()), commit=False)
            self.member_id, self.epoch, self._owned = _new_member_id(), 0, {}
            self._next_heartbeat = 0.0
            return
        if response.error_code != ErrorCode.none:
            raise KafkaError(response.error_code, response.error_message, context="ConsumerGroupHeartbeat")
        if leave:
            return
        self.member_id = response.member_id or self.member_id
        previous_epoch, self.epoch = self.epoch, int(response.member_epoch)
        self._interval_s = _seconds(response.heartbeat_interval)
        self._next_heartbeat = time.monotonic() + self._interval_s
        if response.assignment is not None:
            topics = response.assignment.topic_partitions
            self._assign({tp.topic_id: frozenset(int(p) for p in tp.partitions) for tp in topics})
        self._settling = response.assignment is not None or previous_epoch != self.epoch

    def _retry_heartbeat(self) -> None:
        """The coordinator moved, is loading or dropped the connection: as Kafka's consumer, look
        it up again and retry after the backoff rather than failing the poll."""
        self._next_heartbeat = time.monotonic() + _RETRY_BACKOFF_S

    def _owned_names(self) -> list[tuple[str, int]]:
        return [(self.cluster.topic_name(t), p) for t, ps in self._owned.items() for p in ps]

    def _assign(self, assignment: dict[uuid.UUID, frozenset[int]]) -> None:
        before = set(self._owned_names())
        self._owned = {t: ps for t, ps in assignment.items() if ps}
        after = set(self._owned_names())
        self._drop(before - after)
        added = sorted(after - before)
        if not added:
            return
        committed = self._committed(added)
        for topic, partition in added:
            offset = committed.get((topic, partition), -1)
            self._fetcher.seek(topic, partition, offset if offset >= 0 else int(self._reset))

    def _drop(self, partitions: set[tuple[str, int]], *, commit: bool = True) -> None:
        """Commit and stop reading revoked partitions."""
        if not partitions:
            return
        held = set(self._fetcher.assignment())
        if commit:
            self._commit({tp: self._fetcher.position(*tp) for tp in partitions & held})
        keep = {tp: self._fetcher.position(*tp) for tp in held - partitions}
        self._fetcher.assign(keep)

    def _committed(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        wanted: dict[str, list[int]] = {}
        for topic, partition in partitions:
            wanted.setdefault(topic, []).append(partition)
        response = self.cluster.coordinator_call(
            self.group_id,
            OFFSET_FETCH,
            lambda m: _admin_consumer.build_offset_fetch(m, self.group_id, wanted),
        )
        found = _admin_consumer.parse_offset_fetch(response, self.group_id)
        return {key: o.offset for key, o in found.items()}

    # -- consuming ---------------------------------------------------------------------------------

    def poll(self, timeout: float = 1.0, max_records: int = 500) -> list[ConsumerRecord]:
        """Records from the assigned partitions, after a heartbeat if one is due."""
        deadline = time.monotonic() + timeout
        while True:
            if self._settling or time.monotonic() >= self._next_heartbeat:
                self._heartbeat()
            left = deadline - time.monotonic()
            if self._fetcher.assignment():
                records = self._fetcher.poll(max(0.0, min(left, self._until_heartbeat())), max_records)
                if records or time.monotonic() >= deadline:
                    return records
            elif left <= 0:
                return []
            else:
                time.sleep(max(0.0, min(left, self._until_heartbeat(), 0.05 if self._settling else 1.0)))

    def _until_heartbeat(self) -> float:
        return max(0.0, self._next_heartbeat - time.monotonic())

    @property
    def heartbeat_interval_ms(self) -> int:
        """The interval the coordinator last asked for."""
        return round(self._interval_s * 1000)

    def assignment(self) -> list[tuple[str, int]]:
        return self._fetcher.assignment()

    def commit(self) -> None:
        """Commit the position of every assigned partition (the offset after the last record polled)."""
        self._commit({tp: self._fetcher.position(*tp) for tp in self._fetcher.assignment()})

    def _commit(self, positions: dict[tuple[str, int], int]) -> None:
        if not positions:
            return

        def build(m: Any) -> Any:
            request: Any = _admin_consumer.build_offset_commit(m, self.group_id, positions)
            return type(request)(
                group_id=request.group_id,
                generation_id_or_member_epoch=self.epoch,
                member_id=self.member_id,
                topics=request.topics,
            )

        response = self.cluster.coordinator_call(self.group_id, OFFSET_COMMIT, build)
        for (topic, partition), code in _admin_consumer.parse_partition_errors(response).items():
            if code != ErrorCode.none:
                raise KafkaError(code, context=f"OffsetCommit({self.group_id}) {topic}-{partition}")

    def close(self, *, commit: bool = True) -> None:
        """Commit (unless told not to), leave the group and close the connections."""
        try:
            if self.epoch > 0:
                if commit:
                    self.commit()
                self._heartbeat(leave=True)
        finally:
            self._fetcher.close()

    def __enter__(self) -> GroupConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _new_member_id() -> str:
    """A member id chosen by the member, as KIP-1082 asks of ConsumerGroupHeartbeat v1 clients."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _seconds(value: Any) -> float:
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return int(value) / 1000
