"""Produce error codes, producer ids across restarts, FindCoordinator and DeleteTopics by id (via kio)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from kio.schema.delete_topics.v6 import request as delete_v6
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v2 import request as find_v2
from kio.schema.find_coordinator.v6 import request as find_v6
from kio.schema.init_producer_id.v4 import request as init_v4
from kio.schema.produce.v9 import request as produce_v9
from kio_wire import KioConnection

from shareq.embedded import EmbeddedBroker
from shareq.log.records import Record, encode_batch

pytestmark = [pytest.mark.integration]
TIMEOUT = datetime.timedelta(seconds=5)


def produce(connection: KioConnection, topic: str, records: bytes, acks: int = -1) -> object:
    response = connection.send(
        produce_v9.ProduceRequest(
            transactional_id=None,
            acks=acks,
            timeout=TIMEOUT,
            topic_data=(
                produce_v9.TopicProduceData(
                    name=topic, partition_data=(produce_v9.PartitionProduceData(index=0, records=records),)
                ),
            ),
        )
    )
    return response.responses[0].partition_responses[0]


@pytest.mark.timeout(30)
def test_produce_errors(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d", {"message.max.bytes": "2000"}) as broker:
        broker.call(broker.broker.create_topic, "t", 1)
        connection = KioConnection(broker.bootstrap)
        try:
            good = encode_batch([Record(key=b"k", value=b"v")])
            assert produce(connection, "t", good).error_code == ErrorCode.none
            corrupt = bytearray(good)
            corrupt[-1] ^= 0xFF  # flips a record byte: the CRC32C no longer matches
            assert produce(connection, "t", bytes(corrupt)).error_code == ErrorCode.corrupt_message
            assert produce(connection, "t", good[:40]).error_code == ErrorCode.corrupt_message
            big = encode_batch([Record(value=b"x" * 5000)])
            assert produce(connection, "t", big).error_code == ErrorCode.message_too_large
            missing = produce(connection, "missing", good)
            assert missing.error_code == ErrorCode.unknown_topic_or_partition
            second = produce(connection, "t", good)
            assert (second.error_code, second.base_offset) == (ErrorCode.none, 1)
        finally:
            connection.close()


@pytest.mark.timeout(30)
def test_producer_ids_stay_monotonic_across_restarts(tmp_path: Path) -> None:
    request = init_v4.InitProducerIdRequest(
        transactional_id=None, transaction_timeout=TIMEOUT, producer_id=-1, producer_epoch=-1
    )
    ids = []
    for _ in range(2):
        with EmbeddedBroker(tmp_path / "d") as broker:
            connection = KioConnection(broker.bootstrap)
            try:
                for _ in range(2):
                    response = connection.send(request)
                    assert response.error_code == ErrorCode.none and response.producer_epoch == 0
                    ids.append(response.producer_id)
            finally:
                connection.close()
    assert ids == sorted(set(ids))


@pytest.mark.timeout(30)
def test_find_coordinator_and_delete_by_id(embedded_broker: EmbeddedBroker) -> None:
    connection = KioConnection(embedded_broker.bootstrap)
    try:
        single = connection.send(find_v2.FindCoordinatorRequest(key="g", key_type=0))
        assert (single.error_code, single.port) == (ErrorCode.none, embedded_broker.port)
        batched = connection.send(find_v6.FindCoordinatorRequest(key_type=0, coordinator_keys=("a", "b")))
        assert [(c.key, c.port) for c in batched.coordinators] == [
            ("a", embedded_broker.port),
            ("b", embedded_broker.port),
        ]
        topic = embedded_broker.call(embedded_broker.broker.create_topic, "doomed", 1)
        deleted = connection.send(
            delete_v6.DeleteTopicsRequest(
                topics=(delete_v6.DeleteTopicState(name=None, topic_id=topic.topic_id),), timeout=TIMEOUT
            )
        )
        assert (deleted.responses[0].name, deleted.responses[0].error_code) == ("doomed", ErrorCode.none)
        assert embedded_broker.call(lambda: "doomed" in embedded_broker.broker.topics) is False
        again = connection.send(
            delete_v6.DeleteTopicsRequest(
                topics=(delete_v6.DeleteTopicState(name=None, topic_id=topic.topic_id),), timeout=TIMEOUT
            )
        )
        assert again.responses[0].error_code == ErrorCode.unknown_topic_id
    finally:
        connection.close()
