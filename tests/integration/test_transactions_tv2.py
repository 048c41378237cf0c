"""transaction.version 2 (KIP-890 part 2) through a broker crash: EndTxn v5's decision, logged at the bumped
epoch, is completed by the restarted broker; the client's retry of that EndTxn (at the epoch it sent) is
answered with the bumped epoch, and the producer's next transaction goes on at it.

The requests are sent as a TV2 client sends them (Produce v12 adding its partition, EndTxn v5), on the wire,
so the test does not depend on a client library taking that path.
"""

from __future__ import annotations

import datetime
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from broker_harness import BrokerProcess
from confluent_kafka import Consumer, TopicPartition
from kio.schema.end_txn.v5 import request as end_request
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.produce.v12 import request as produce_request
from kio_wire import KioConnection
from txn_clients import CONSUMER_FAST, create_topic, read_all

from shareq.log.records import Record, encode_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PARTITIONS = 2


def _produce(
    conn: KioConnection, txn_id: str, pid: int, epoch: int, topic: str, partition: int, value: str
) -> int:
    batch = encode_batch(
        [Record(value=value.encode())],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        transactional=True,
        base_timestamp=int(time.time() * 1000),
    )
    m = produce_request
    response = conn.send(
        m.ProduceRequest(
            transactional_id=txn_id,
            acks=-1,
            timeout=datetime.timedelta(seconds=10),
            topic_data=(
                m.TopicProduceData(
                    name=topic, partition_data=(m.PartitionProduceData(index=partition, records=batch),)
                ),
            ),
        )
    )
    return int(response.responses[0].partition_responses[0].error_code)


def _end(conn: KioConnection, txn_id: str, pid: int, epoch: int) -> Any:
    return conn.send(
        end_request.EndTxnRequest(
            transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=True
        )
    )


def _connect_when_up(bootstrap: str, deadline_s: float = 30.0) -> KioConnection:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return KioConnection(bootstrap)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.parametrize("point", ["txn.after_prepare", "txn.after_marker:1"])
def test_tv2_decision_logged_before_a_crash_is_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    monkeypatch.setenv("SHAREQ_CRASH_AT", point)
    broker = BrokerProcess(tmp_path / "data").start()
    monkeypatch.delenv("SHAREQ_CRASH_AT")
    conn: KioConnection | None = None
    try:
        bootstrap = broker.bootstrap
        topic = create_topic(bootstrap, PARTITIONS)
        txn_id = f"tv2-{uuid.uuid4().hex[:6]}"
        conn = KioConnection(bootstrap)
        init = conn.send(
            InitProducerIdRequest(
                transactional_id=txn_id,
                transaction_timeout=datetime.timedelta(seconds=60),
                producer_id=-1,
                producer_epoch=-1,
            )
        )
        assert init.error_code == ErrorCode.none
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        assert [_produce(conn, txn_id, pid, epoch, topic, p, f"v{p}") for p in range(PARTITIONS)] == [0, 0]
        with pytest.raises(Exception):  # noqa: B017 - the broker dies while deciding: the connection drops
            _end(conn, txn_id, pid, epoch)
        conn.close()
        assert broker.process is not None
        broker.process.wait(timeout=30)
        broker.start()
        conn = _connect_when_up(bootstrap)
        retried = _end(conn, txn_id, pid, epoch)  # the retry, at the epoch the client sent
        assert (retried.error_code, int(retried.producer_id), int(retried.producer_epoch)) == (
            ErrorCode.none,
            pid,
            epoch + 1,
        )
        assert sorted(read_all(bootstrap, topic, PARTITIONS, "read_committed")) == ["v0", "v1"]
        # the next transaction, at the bumped epoch; the old epoch is fenced
        assert _produce(conn, txn_id, pid, epoch, topic, 0, "stale") == ErrorCode.invalid_producer_epoch
        assert _produce(conn, txn_id, pid, epoch + 1, topic, 0, "next") == 0
        ended = _end(conn, txn_id, pid, epoch + 1)
        assert (ended.error_code, int(ended.producer_epoch)) == (ErrorCode.none, epoch + 2)
        assert sorted(read_all(bootstrap, topic, PARTITIONS, "read_committed")) == ["next", "v0", "v1"]
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "x", **CONSUMER_FAST})
        try:  # exactly one marker per transaction and partition: the recovery wrote none twice
            ends = [reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(2)]
        finally:
            reader.close()
        assert ends == [4, 2]
    finally:
        if conn is not None:
            conn.close()
        broker.kill()
