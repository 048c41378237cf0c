"""Operating transactions: ListTransactions, DescribeTransactions and DescribeProducers, and
``shareq transactions list|describe|abort`` on a transaction left open by librdkafka."""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio_wire import KioConnection
from txn_clients import create_topic, read_all, txn_producer

from shareq.cli.main import main
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration]


def cli(bootstrap: str, *args: str) -> str:
    result = CliRunner().invoke(main, [*args, "--bootstrap", bootstrap])
    assert result.exit_code == 0, result.output
    return result.output


def test_list_describe_and_abort_a_hanging_transaction(embedded_broker: EmbeddedBroker) -> None:
    bootstrap = embedded_broker.bootstrap
    topic = create_topic(bootstrap, 2)
    txn_id = f"hang-{uuid.uuid4().hex[:6]}"
    producer = txn_producer(bootstrap, txn_id)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, f"h{i}".encode(), partition=i % 2)
    assert producer.flush(15) == 0

    listed = json.loads(cli(bootstrap, "transactions", "list", "--json"))
    mine = [row for row in listed if row["transactional_id"] == txn_id]
    assert len(mine) == 1 and mine[0]["state"] == "Ongoing"
    assert json.loads(cli(bootstrap, "transactions", "list", "--json", "--state", "CompleteCommit")) == []
    described = json.loads(cli(bootstrap, "transactions", "describe", txn_id, "--json"))
    assert described["state"] == "Ongoing" and described["partitions"] == [[topic, 0], [topic, 1]]
    assert described["start_ms"] > 0 and described["producer_epoch"] == 0

    connection = KioConnection(bootstrap)
    try:
        response = connection.send(
            DescribeProducersRequest(topics=(TopicRequest(name=topic, partition_indexes=(0,)),))
        )
    finally:
        connection.close()
    (state,) = response.topics[0].partitions[0].active_producers
    assert (state.producer_id, state.current_txn_start_offset) == (described["producer_id"], 0)

    dry = cli(bootstrap, "transactions", "abort", txn_id)
    assert "would abort" in dry
    assert json.loads(cli(bootstrap, "transactions", "describe", txn_id, "--json"))["state"] == "Ongoing"
    done = cli(bootstrap, "transactions", "abort", txn_id, "--execute")
    assert "aborted" in done
    after = json.loads(cli(bootstrap, "transactions", "describe", txn_id, "--json"))
    assert after["state"] == "Empty" and after["producer_epoch"] > 0
    assert read_all(bootstrap, topic, 2, "read_committed") == []
    assert len(read_all(bootstrap, topic, 2, "read_uncommitted")) == 4
    assert "nothing to abort" in cli(bootstrap, "transactions", "abort", txn_id, "--execute")
