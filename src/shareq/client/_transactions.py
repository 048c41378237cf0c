"""Requests of a transactional producer (KIP-98, TV1) and of KIP-1289's share acknowledgements.

Plain functions over a connection: the ``Producer`` keeps the state (transactional id, producer id
and epoch, the partitions already in the transaction) and calls these.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol.acknowledge_type import AcknowledgeType
from shareq.protocol.api_keys import ADD_PARTITIONS_TO_TXN, END_TXN, INIT_PRODUCER_ID, TXN_SHARE_ACKNOWLEDGE

from ._share_state import AckRange
from .connection import BrokerConnection
from .errors import KafkaError
from .records import ConsumerRecord

_RETRY = {
    ErrorCode.concurrent_transactions,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
}
TXN_ACK_TYPES = frozenset({AcknowledgeType.ACCEPT, AcknowledgeType.REJECT, AcknowledgeType.GAP})


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMetadata:
    """What a transaction needs to know about the share consumer whose acknowledgements it stages
    (KIP-1289's ``ShareGroupMetadata``); ``member_epoch`` -1 asks the broker to skip the epoch check."""

    group_id: str
    member_id: str
    member_epoch: int
    group_instance_id: str | None = None


def retrying(call: Callable[[], Any], context: str, deadline_s: float) -> Any:
    """Run ``call`` (returning a response with ``error_code``) until it is not a retriable
    coordinator error or the deadline passes; raise ``KafkaError`` on any other error."""
    delay = 0.01
    while True:
        response = call()
        code = response.error_code
        if code == ErrorCode.none:
            return response
        if code not in _RETRY or time.monotonic() >= deadline_s:
            raise KafkaError(code, context=context)
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def init_producer_id(
    conn: BrokerConnection, transactional_id: str, timeout_ms: int, deadline_s: float
) -> tuple[int, int]:
    _v, m = conn.module(INIT_PRODUCER_ID)
    request = m.InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout=datetime.timedelta(milliseconds=timeout_ms)
    )
    response = retrying(lambda: conn.send(request), "InitProducerId", deadline_s)
    return int(response.producer_id), int(response.producer_epoch)


def add_partitions(
    conn: BrokerConnection,
    txn: tuple[str, int, int],
    partitions: Iterable[tuple[str, int]],
    deadline_s: float,
) -> None:
    _v, m = conn.module(ADD_PARTITIONS_TO_TXN)
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, p in partitions:
        by_topic[topic].append(p)
    request = m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn[0],
        v3_and_below_producer_id=txn[1],
        v3_and_below_producer_epoch=txn[2],
        v3_and_below_topics=tuple(
            m.AddPartitionsToTxnTopic(name=t, partitions=tuple(sorted(ps))) for t, ps in by_topic.items()
        ),
    )

    def call() -> Any:
        response = conn.send(request)
        codes = [
            p.partition_error_code
            for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition
        ]
        bad = next((c for c in codes if c != ErrorCode.none), ErrorCode.none)
        return _Coded(bad)

    retrying(call, "AddPartitionsToTxn", deadline_s)


def end_txn(conn: BrokerConnection, txn: tuple[str, int, int], commit: bool, deadline_s: float) -> None:
    _v, m = conn.module(END_TXN)
    request = m.EndTxnRequest(
        transactional_id=txn[0], producer_id=txn[1], producer_epoch=txn[2], committed=commit
    )
    retrying(lambda: conn.send(request), "EndTxn", deadline_s)


@dataclass(frozen=True, slots=True)
class _Coded:
    error_code: ErrorCode


def ack_ranges(
    acknowledgements: Iterable[tuple[ConsumerRecord, AcknowledgeType] | AckRange],
) -> list[AckRange]:
    """Acknowledgements as ranges (one per record for pairs; adjacent equal ones merged);
    raises ``ValueError`` for a type a transaction may not stage (only ACCEPT, REJECT, GAP)."""
    out: list[AckRange] = []
    for item in acknowledgements:
        if isinstance(item, AckRange):
            r = item
        else:
            record, ack = item
            if record.topic_id is None:
                raise ValueError(f"record {record.topic}-{record.partition}@{record.offset} has no topic id")
            r = AckRange(
                topic_id=record.topic_id,
                partition=record.partition,
                first_offset=record.offset,
                last_offset=record.offset,
                type=AcknowledgeType(ack),
            )
        if r.type not in TXN_ACK_TYPES:
            raise ValueError(f"a transaction may stage only ACCEPT, REJECT or GAP, not {r.type.name}")
        out.append(r)
    out.sort(key=lambda r: (str(r.topic_id), r.partition, r.first_offset))
    merged: list[AckRange] = []
    for r in out:
        if merged:
            p = merged[-1]
            if (p.topic_id, p.partition, p.type) == (
                r.topic_id,
                r.partition,
                r.type,
            ) and p.last_offset + 1 == r.first_offset:
                merged[-1] = AckRange(
                    topic_id=p.topic_id,
                    partition=p.partition,
                    first_offset=p.first_offset,
                    last_offset=r.last_offset,
                    type=p.type,
                )
                continue
        merged.append(r)
    return merged


def txn_share_acknowledge(
    conn: BrokerConnection, txn: tuple[str, int, int], metadata: ShareGroupMetadata, ranges: list[AckRange]
) -> dict[tuple[uuid.UUID, int], ErrorCode]:
    """One TxnShareAcknowledge; raises ``KafkaError`` for a top-level error, returns per-partition codes."""
    _v, m = conn.module(TXN_SHARE_ACKNOWLEDGE)
    by_part: dict[uuid.UUID, dict[int, list[AckRange]]] = defaultdict(lambda: defaultdict(list))
    for r in ranges:
        by_part[r.topic_id][r.partition].append(r)
    request = m.TxnShareAcknowledgeRequest(
        transactional_id=txn[0],
        group_id=metadata.group_id,
        producer_id=txn[1],
        producer_epoch=txn[2],
        member_id=metadata.member_id,
        member_epoch=metadata.member_epoch,
        topics=tuple(
            m.TxnShareAcknowledgeTopic(
                topic_id=tid,
                partitions=tuple(
                    m.TxnShareAcknowledgePartition(
                        partition_index=p,
                        acknowledgement_batches=tuple(
                            m.TxnShareAcknowledgeBatch(
                                first_offset=r.first_offset,
                                last_offset=r.last_offset,
                                acknowledge_types=(int(r.type),),
                            )
                            for r in rs
                        ),
                    )
                    for p, rs in parts.items()
                ),
            )
            for tid, parts in by_part.items()
        ),
    )
    response = conn.send(request)
    if response.error_code != ErrorCode.none:
        raise KafkaError(response.error_code, context="TxnShareAcknowledge")
    return {
        (t.topic_id, int(p.partition_index)): p.error_code for t in response.responses for p in t.partitions
    }
