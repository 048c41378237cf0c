"""``shareq serve``: ready line, clean SIGTERM shutdown, persistent metadata, config errors."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from broker_harness import FAST_FAILURE, READY_PREFIX, BrokerProcess, free_port, kill_group, spawn
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

pytestmark = [pytest.mark.integration]


@pytest.mark.timeout(60)
def test_sigterm_is_clean_and_metadata_survives_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", "num.partitions=3")
    broker.start()
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, **FAST_FAILURE})
        producer.produce("auto-created", b"v")
        assert producer.flush(10) == 0
        before = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        assert len(before.topics["auto-created"].partitions) == 3
        assert broker.terminate() == 0
        assert any("shutting down" in line for line in broker.stderr_lines)

        broker.start()
        after = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        assert after.cluster_id == before.cluster_id
        assert len(after.topics["auto-created"].partitions) == 3
    finally:
        broker.kill()


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "pair",
    ["num.partitions=zero", "num.partitions=0", "novalue", "num.io.threads=0", "log.cleanup.policy=bogus"],
)
def test_bad_config_is_a_clear_error(tmp_path: Path, pair: str) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "shareq",
            "serve",
            "--data-dir",
            str(tmp_path),
            "--port",
            "0",
            "--config",
            pair,
        ],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode != 0
    assert "--config" in result.stderr
    assert pair.split("=")[0] in result.stderr


# Lines of a Kafka server.properties for one combined node: configs shareq has, configs that mean
# nothing on one node, and one this Kafka does not know (an older Kafka's group.share.max.groups).
SERVER_PROPERTIES = (
    "process.roles=broker,controller",
    "node.id=0",
    "controller.quorum.bootstrap.servers=127.0.0.1:9093",
    "controller.listener.names=CONTROLLER",
    "num.network.threads=3",
    "num.io.threads=8",
    "socket.send.buffer.bytes=102400",
    "log.dirs=/tmp/kraft-combined-logs",
    "offsets.topic.replication.factor=1",
    "transaction.state.log.replication.factor=1",
    "share.coordinator.state.topic.replication.factor=1",
    "log.retention.check.interval.ms=300000",
    "group.share.max.groups=50",
)


@pytest.mark.timeout(60)
def test_a_kafka_server_properties_is_accepted(tmp_path: Path) -> None:
    """Kafka's broker configs are taken at start, those of one node's meaningless ones too; a name Kafka
    4.4 does not know is kept and logged as supplied but not used, as Kafka logs it; the value given is
    described. A log.retention.ms below -1 (Kafka's has no lower bound) is described as given, and a
    topic's retention.ms is then -1, no time limit, as Kafka 4.4 started with the same line shows."""
    from shareq.client import Admin, ConfigResource, ResourceType

    broker = BrokerProcess(tmp_path / "data", *SERVER_PROPERTIES, "log.retention.ms=-5")
    broker.start()
    try:
        with Admin(broker.bootstrap) as admin:
            resource = ConfigResource(ResourceType.BROKER, "0")
            described = admin.describe_configs([resource])[resource]
            admin.create_topic("kept", 1)
            topic = ConfigResource(ResourceType.TOPIC, "kept")
            retention = admin.describe_configs([topic])[topic]["retention.ms"].value
        assert described["num.io.threads"].value == "8"
        assert described["socket.send.buffer.bytes"].value == "102400"
        assert (described["log.retention.ms"].value, retention) == ("-5", "-1")
        assert any(
            "These configurations 'group.share.max.groups' were supplied but are not used yet." in line
            for line in broker.stderr_lines
        )
    finally:
        broker.kill()


def _serve(data_dir: Path, port: int) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "shareq", "serve", "--data-dir", str(data_dir), "--port", str(port)]
    return subprocess.run(command, capture_output=True, text=True, timeout=20)


@pytest.mark.timeout(30)
def test_port_in_use_is_one_line_and_a_failed_exit(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = _serve(tmp_path / "data", port)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].endswith(f"Socket server failed to bind to 127.0.0.1:{port}: Address already in use.")
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.timeout(30)
def test_unusable_data_dir_is_one_line_and_a_failed_exit(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    data_dir = blocker / "data"
    result = _serve(data_dir, 0)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].endswith(f"Failed to create or validate data directory {data_dir}: Not a directory")
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.timeout(30)
def test_a_malformed_jaas_line_stops_the_broker_with_the_listener_named(tmp_path: Path) -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="unterminated'
    command = [
        *(sys.executable, "-m", "shareq", "serve", "--data-dir", str(tmp_path), "--port", "0"),
        *("--config", "listeners=SASL_PLAINTEXT://127.0.0.1:0"),
        *("--config", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}"),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=20)
    assert result.returncode != 0
    assert "listener SASL_PLAINTEXT: sasl.jaas.config" in result.stderr


@pytest.mark.timeout(60)
def test_serve_a_kafka_server_properties_file(tmp_path: Path) -> None:
    """``shareq serve server.properties`` as Kafka's quick start writes it: the data directory is log.dirs,
    the CONTROLLER listener is not bound, the broker listener serves; delete.topic.enable=false refuses
    DeleteTopics as Kafka does (TOPIC_DELETION_DISABLED)."""
    from confluent_kafka.admin import NewTopic

    port, controller = free_port(), free_port()
    properties = tmp_path / "server.properties"
    properties.write_text(
        "# Kafka's KRaft quick start, one combined node\n"
        "process.roles=broker,controller\nnode.id=1\n"
        f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}\n"
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n"
        "inter.broker.listener.name=PLAINTEXT\n"
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL\n"
        "num.network.threads=3\nnum.io.threads=8\n"
        f"log.dirs={tmp_path / 'kraft-combined-logs'}\n"
        "num.partitions=2\noffsets.topic.replication.factor=1\ndelete.topic.enable=false\n"
    )
    process = spawn([sys.executable, "-m", "shareq", "serve", str(properties)], stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith(READY_PREFIX)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        admin.create_topics([NewTopic("orders")])["orders"].result(timeout=15)
        assert len(admin.list_topics(timeout=10).topics["orders"].partitions) == 2
        assert (tmp_path / "kraft-combined-logs" / "orders-0").is_dir()
        with pytest.raises(Exception) as refused:
            admin.delete_topics(["orders"])["orders"].result(timeout=15)
        assert refused.value.args[0].code() == 73  # TOPIC_DELETION_DISABLED
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", controller)) != 0  # nothing listens there
    finally:
        kill_group(process)
