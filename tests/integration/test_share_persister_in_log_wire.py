"""The in-log persister over the wire: no write feeds on its own control records, and a broker
refuses to start with the other persister on existing share state."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from share_consumers import SHARE_BROKER, create_topic, poll_values, produce, share_consumer, user_records

import kafka_harness
from ci_support import in_ci
from shareq.client import Admin
from shareq.embedded import EmbeddedBroker
from shareq.persister.in_log import InLogPersister
from shareq.share.persister import SharePartitionKey

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

IN_LOG = {**SHARE_BROKER, "share.persister": "in-log"}
# short locks: a control record that was wrongly acquired would be released (a state write, so a
# new control record) within the observation below
SHORT_LOCKS = {
    **IN_LOG,
    "group.share.min.record.lock.duration.ms": "500",
    "group.share.record.lock.duration.ms": "500",
}


def _share_state_records(broker: EmbeddedBroker, topic: str) -> tuple[int, int, int]:
    """(log end, data records, SPSO of group g) of partition 0, read on the broker's loop."""
    info = broker.broker.topics.get(topic)
    share = broker.broker.share
    assert info is not None and share is not None
    key = SharePartitionKey(group_id="g", topic_id=info.topic_id, partition=0)

    async def read() -> tuple[int, int, int]:
        partition = broker.broker.partition(topic, 0)
        assert partition is not None
        summary = await share.persister.read_state_summary(key)
        _, count = user_records(partition.log)
        return partition.log.log_end_offset, count, -1 if summary is None else summary.start_offset

    return broker.run(read())


def _drain_and_settle(broker: EmbeddedBroker, consumer: Any, topic: str, values: list[bytes]) -> int:
    """Consume every value once, then keep polling (nothing more arrives) until the durable SPSO
    has passed every data record: the last acknowledgements ride on the next fetches. Returns the
    log end then, share state included."""
    got = poll_values(consumer, lambda out: len(out) >= len(values))
    assert sorted(m.value() for m in got) == sorted(values)
    deadline = time.monotonic() + 20
    while True:
        assert poll_values(consumer, lambda out: False, timeout=0.3) == []
        end, count, spso = _share_state_records(broker, topic)
        if spso >= len(values):
            return end
        assert time.monotonic() < deadline, (end, count, spso)


def test_acknowledging_never_feeds_on_its_own_state_records(tmp_path: Path) -> None:
    """Every acknowledgement appends share state to the partition being consumed; those offsets
    are passed without being delivered or acknowledged, so once the consumer is done the log end
    stays put however often it fetches again."""
    with EmbeddedBroker(tmp_path / "data", config=SHORT_LOCKS) as broker:
        create_topic(broker.bootstrap, "loop", 1)
        values = [b"v%d" % i for i in range(60)]
        produce(broker.bootstrap, "loop", values, 1, per_batch=3)
        consumer = share_consumer(broker.bootstrap, "g", ["loop"])
        try:
            settled = _drain_and_settle(broker, consumer, "loop", values)
            assert settled > 60  # the state is in the partition itself
            for _ in range(10):  # more fetch rounds, each reading the trailing state records, over
                assert poll_values(consumer, lambda out: False, timeout=0.3) == []  # six lock spans
            assert _share_state_records(broker, "loop")[0] == settled
        finally:
            consumer.close()


def _serve(data: Path, persister: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "shareq", "serve", "--data-dir", str(data), "--port", "0"]
    command += ["--host", "127.0.0.1", "--config", f"share.persister={persister}"]
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(("first", "second"), [("coordinator", "in-log"), ("in-log", "coordinator")])
def test_a_broker_refuses_the_other_persister_on_existing_share_state(
    tmp_path: Path, first: str, second: str
) -> None:
    data = tmp_path / "data"
    with EmbeddedBroker(data, config={"share.persister": first}) as broker, Admin(broker.bootstrap) as admin:
        admin.create_topic("t", 1)
        admin.alter_share_group_offsets("g", {("t", 0): 0})
    refused = _serve(data, second)
    assert refused.returncode == 1
    assert f"share.persister={second}" in refused.stderr and f"share.persister={first}" in refused.stderr
    # the original persister still starts, and the state is there
    with EmbeddedBroker(data, config={"share.persister": first}) as broker, Admin(broker.bootstrap) as admin:
        assert admin.describe_share_group_offsets("g")[("t", 0)].start_offset == 0


def test_a_data_directory_without_share_state_may_switch(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedBroker(data, config={"share.persister": "coordinator"}) as broker:
        create_topic(broker.bootstrap, "t", 1)
    with (
        EmbeddedBroker(data, config={"share.persister": "in-log"}) as broker,
        Admin(broker.bootstrap) as admin,
    ):
        admin.alter_share_group_offsets("g", {("t", 0): 0})
        assert admin.describe_share_group_offsets("g")[("t", 0)].start_offset == 0


def _checkpoint_offset(broker: EmbeddedBroker, topic: str, group: str) -> int | None:
    info = broker.broker.topics.get(topic)
    share = broker.broker.share
    assert info is not None and share is not None
    key = SharePartitionKey(group_id=group, topic_id=info.topic_id, partition=0)
    persister = share.persister
    assert isinstance(persister, InLogPersister)
    result: int | None = broker.call(lambda: persister.checkpoint_offset(key))
    return result


def _log_end(broker: EmbeddedBroker, topic: str) -> int:
    partition = broker.broker.partition(topic, 0)
    assert partition is not None
    end: int = broker.call(lambda: partition.log.log_end_offset)
    return end


def test_delete_records_stops_at_the_groups_checkpoint_until_the_group_is_deleted(tmp_path: Path) -> None:
    """The persister holds each partition at each group's Share Checkpoint Offset, again after a
    restart (recovery sets the holds before anything else runs), and releases it with the group."""
    data = tmp_path / "data"
    with EmbeddedBroker(data, config=IN_LOG) as broker, Admin(broker.bootstrap) as admin:
        create_topic(broker.bootstrap, "held", 1)
        produce(broker.bootstrap, "held", [b"r%d" % i for i in range(20)], 1, per_batch=5)
        admin.alter_share_group_offsets("g", {("held", 0): 5})
        sco = _checkpoint_offset(broker, "held", "g")
        assert sco is not None and sco >= 20  # the state follows the data it describes
        assert admin.delete_records("held", {0: _log_end(broker, "held")}) == {0: sco}
    with EmbeddedBroker(data, config=IN_LOG) as broker, Admin(broker.bootstrap) as admin:
        assert _checkpoint_offset(broker, "held", "g") == sco
        assert admin.delete_records("held", {0: _log_end(broker, "held")}) == {0: sco}
        admin.delete_groups(["g"])
        assert _checkpoint_offset(broker, "held", "g") is None
        end = _log_end(broker, "held")
        assert admin.delete_records("held", {0: end}) == {0: end}


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_kafkas_java_consumer_reads_past_the_share_state_at_the_tail(tmp_path: Path, isolation: str) -> None:
    """Kafka's Java consumer (ConsoleConsumer in a consumer group) reads a partition whose tail is
    the in-log persister's share state: it prints every data record once, and the position it commits
    is the log end, past the state, so its lag is 0 as after reading a transaction's markers."""
    try:
        kafka_harness.ensure_kafka_jars()
    except (kafka_harness.KafkaUnavailable, OSError) as error:
        if in_ci():
            pytest.fail(f"Kafka's jars are required in CI: {error}")
        pytest.skip(f"Kafka's jars not available: {error}")
    with EmbeddedBroker(tmp_path / "data", config=IN_LOG) as broker:
        create_topic(broker.bootstrap, "tail", 1)
        values = [b"j%d" % i for i in range(40)]
        produce(broker.bootstrap, "tail", values, 1, per_batch=4)
        consumer = share_consumer(broker.bootstrap, "g", ["tail"])
        try:
            end = _drain_and_settle(broker, consumer, "tail", values)
        finally:
            consumer.close()
        assert end > 40  # share state follows the last data record
        result = kafka_harness.run_tool(
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            *("--bootstrap-server", broker.bootstrap, "--topic", "tail", "--group", "java"),
            *("--consumer-property", "auto.offset.reset=earliest"),
            *("--isolation-level", isolation, "--timeout-ms", "8000"),
            timeout=60,
        )
        # the tool ends on its idle timeout, logging that as an error line among the records
        printed = [line for line in result.stdout.splitlines() if line.startswith("j")]
        assert sorted(printed) == sorted(v.decode() for v in values), result.stdout[-2000:]
        assert "Processed a total of 40 messages" in result.stderr
        with Admin(broker.bootstrap) as admin:
            committed = admin.list_consumer_group_offsets("java")
        assert committed[("tail", 0)].offset == end
