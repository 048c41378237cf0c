"""transaction.version 2 on the wire (KIP-890 part 2), against Kafka 4.4 and shareq: the error codes, producer
ids and epochs each request gets, step by step, with the version a TV2 client sends (EndTxn v5, Produce v12,
TxnOffsetCommit v5) and the brokers' verify-only AddPartitionsToTxn v5; and a TV1 client's versions on the
same broker."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from compat_support import Server, create_topic
from kio.schema.add_partitions_to_txn.v3 import request as ADD_V3
from kio.schema.add_partitions_to_txn.v5 import request as ADD
from kio.schema.end_txn.v3 import request as END_V3
from kio.schema.end_txn.v5 import request as END
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as FIND
from kio.schema.init_producer_id.v5 import request as INIT
from kio.schema.produce.v11 import request as PRODUCE_V11
from kio.schema.produce.v12 import request as PRODUCE
from kio.schema.txn_offset_commit.v5 import request as TXN_COMMIT
from kio.schema.types import GroupId, ProducerId, TopicName
from kio.static.primitive import i8, i16, i32, i64
from kio_wire import KioConnection

from shareq.log.records import Record, encode_batch

pytestmark = pytest.mark.timeout(90)

_RETRIABLE = {
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator,
    ErrorCode.concurrent_transactions,
    ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_topic_or_partition,
}


@pytest.fixture
def conn(server: Server) -> Iterator[KioConnection]:
    c = KioConnection(server.bootstrap)
    try:
        yield c
    finally:
        c.close()


def _until_settled(call: Callable[[], Any], code: Callable[[Any], ErrorCode]) -> Any:
    """Repeat ``call`` while it answers a coordinator-not-ready error (Kafka creates its transaction log
    on first use)."""
    deadline = time.monotonic() + 30
    while True:
        response = call()
        if code(response) not in _RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


def _init(conn: KioConnection, txn_id: str) -> tuple[int, int]:
    """FindCoordinator (Kafka creates its transaction log then), then InitProducerId."""
    find = FIND.FindCoordinatorRequest(key_type=i8(1), coordinator_keys=(txn_id,))
    found = _until_settled(lambda: conn.send(find), lambda r: r.coordinators[0].error_code)
    assert found.coordinators[0].error_code == ErrorCode.none, found
    request = INIT.InitProducerIdRequest(
        transactional_id=txn_id,
        transaction_timeout=datetime.timedelta(seconds=30),
        producer_id=ProducerId(-1),
        producer_epoch=i16(-1),
    )
    response = _until_settled(lambda: conn.send(request), lambda r: r.error_code)
    assert response.error_code == ErrorCode.none, response
    return int(response.producer_id), int(response.producer_epoch)


def _verify(conn: KioConnection, txn_id: str, pid: int, epoch: int, topic: str) -> str:
    request = ADD.AddPartitionsToTxnRequest(
        transactions=(
            ADD.AddPartitionsToTxnTransaction(
                transactional_id=txn_id,
                producer_id=ProducerId(pid),
                producer_epoch=i16(epoch),
                verify_only=True,
                topics=(ADD.AddPartitionsToTxnTopic(name=TopicName(topic), partitions=(i32(0),)),),
            ),
        )
    )
    response = conn.send(request)
    codes = [
        p.partition_error_code.name
        for r in response.results_by_transaction
        for t in r.topic_results
        for p in t.results_by_partition
    ]
    return f"{response.error_code.name} {codes}"


def _produce(
    conn: KioConnection, module: Any, txn_id: str, pid: int, epoch: int, seq: int, topic: str, value: bytes
) -> str:
    batch = encode_batch(
        [Record(value=value)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
        base_timestamp=int(time.time() * 1000),
    )
    request = module.ProduceRequest(
        transactional_id=txn_id,
        acks=i16(-1),
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            module.TopicProduceData(
                name=TopicName(topic),
                partition_data=(module.PartitionProduceData(index=i32(0), records=batch),),
            ),
        ),
    )
    response = _until_settled(
        lambda: conn.send(request), lambda r: r.responses[0].partition_responses[0].error_code
    )
    return response.responses[0].partition_responses[0].error_code.name


def _end(conn: KioConnection, txn_id: str, pid: int, epoch: int, commit: bool) -> tuple[str, int, int]:
    request = END.EndTxnRequest(
        transactional_id=txn_id,
        producer_id=ProducerId(pid),
        producer_epoch=i16(epoch),
        committed=commit,
    )
    response = _until_settled(lambda: conn.send(request), lambda r: r.error_code)
    return response.error_code.name, int(response.producer_id), int(response.producer_epoch)


def _end_v3(conn: KioConnection, txn_id: str, pid: int, epoch: int, commit: bool) -> str:
    request = END_V3.EndTxnRequest(
        transactional_id=txn_id,
        producer_id=ProducerId(pid),
        producer_epoch=i16(epoch),
        committed=commit,
    )
    return str(_until_settled(lambda: conn.send(request), lambda r: r.error_code).error_code.name)


def _add_v3(conn: KioConnection, txn_id: str, pid: int, epoch: int, topic: str) -> str:
    request = ADD_V3.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=ProducerId(pid),
        v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=(ADD_V3.AddPartitionsToTxnTopic(name=TopicName(topic), partitions=(i32(0),)),),
    )
    response = _until_settled(
        lambda: conn.send(request),
        lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
    )
    return str(response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code.name)


def _commit_offset(conn: KioConnection, txn_id: str, pid: int, epoch: int, group: str, topic: str) -> str:
    find = FIND.FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,))
    found = _until_settled(lambda: conn.send(find), lambda r: r.coordinators[0].error_code)
    assert found.coordinators[0].error_code == ErrorCode.none, found
    request = TXN_COMMIT.TxnOffsetCommitRequest(
        transactional_id=txn_id,
        group_id=GroupId(group),
        producer_id=ProducerId(pid),
        producer_epoch=i16(epoch),
        generation_id=i32(-1),
        member_id="",
        group_instance_id=None,
        topics=(
            TXN_COMMIT.TxnOffsetCommitRequestTopic(
                name=TopicName(topic),
                partitions=(
                    TXN_COMMIT.TxnOffsetCommitRequestPartition(
                        partition_index=i32(0),
                        committed_offset=i64(5),
                        committed_leader_epoch=i32(-1),
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    )
    response = _until_settled(
        lambda: conn.send(request),
        lambda r: r.topics[0].partitions[0].error_code if r.topics else ErrorCode.none,
    )
    return str(response.topics[0].partitions[0].error_code.name)


def test_tv2_protocol_step_by_step(conn: KioConnection, server: Server, names: tuple[str, str]) -> None:
    """Produce v12 opens the transaction (verify-only then finds the partition), each EndTxn v5 bumps the
    epoch and names it, a retry at the previous epoch is answered again, an abort with nothing open is
    allowed (a commit is not), the old epoch is fenced, TxnOffsetCommit v5 joins on its own."""
    topic, group = names
    txn_id = "wire-" + topic
    create_topic(server, topic)
    pid, epoch = _init(conn, txn_id)
    seen: list[object] = [epoch]
    seen.append(_verify(conn, txn_id, pid, epoch, topic))
    seen.append(_produce(conn, PRODUCE, txn_id, pid, epoch, 0, topic, b"a"))
    seen.append(_verify(conn, txn_id, pid, epoch, topic))
    end = _end(conn, txn_id, pid, epoch, True)
    seen.append((end[0], end[1] == pid, end[2]))
    retry = _end(conn, txn_id, pid, epoch, True)
    seen.append((retry[0], retry[1] == pid, retry[2]))
    seen.append(_end(conn, txn_id, pid, 1, False)[::2])  # nothing open: aborted at a new epoch
    seen.append(_end(conn, txn_id, pid, 2, True)[::2])  # nothing open: no commit
    seen.append(_produce(conn, PRODUCE, txn_id, pid, 1, 1, topic, b"late"))  # an ended epoch
    seen.append(_commit_offset(conn, txn_id, pid, 2, group, topic))
    seen.append(_produce(conn, PRODUCE, txn_id, pid, 2, 0, topic, b"b"))
    seen.append(_end(conn, txn_id, pid, 2, True)[::2])
    assert seen == [
        0,
        "none ['transaction_abortable']",
        "none",
        "none ['none']",
        ("none", True, 1),
        ("none", True, 1),
        ("none", 2),
        ("invalid_txn_state", -1),
        "invalid_producer_epoch",
        "none",
        "none",
        ("none", 3),
    ], seen


def test_tv1_client_on_a_tv2_broker(conn: KioConnection, server: Server, names: tuple[str, str]) -> None:
    """A client before KIP-890 (Produce v11, EndTxn v3) keeps its epoch across transactions and may not
    produce to a partition it did not add."""
    topic = names[0]
    txn_id = "wire-v1-" + topic
    create_topic(server, topic)
    pid, epoch = _init(conn, txn_id)
    seen: list[object] = [_produce(conn, PRODUCE_V11, txn_id, pid, epoch, 0, topic, b"unadded")]
    seen.append(_end_v3(conn, txn_id, pid, epoch, True))
    seen.append(_end_v3(conn, txn_id, pid, epoch, False))
    for seq, commit in ((0, True), (1, False)):  # two transactions at the one epoch
        seen.append(_add_v3(conn, txn_id, pid, epoch, topic))
        seen.append(_produce(conn, PRODUCE_V11, txn_id, pid, epoch, seq, topic, b"added"))
        seen.append(_end_v3(conn, txn_id, pid, epoch, commit))
    assert seen == ["transaction_abortable", "invalid_txn_state", "invalid_txn_state"] + ["none"] * 6, seen
