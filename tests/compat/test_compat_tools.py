"""Kafka's own command-line tools against Kafka 4.4 and against shareq, asserting the same observations.

Each tool runs from the project's resolved Kafka jars, exactly as an operator runs ``kafka-topics.sh`` and
friends. Several of Kafka's tools exit 0 even when every request failed, so every test reads the output,
never the exit code alone. Ids, ports and times differ between runs and servers and are not compared.
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest
from compat_support import Server, create_topic, earliest_group, wait_for

import kafka_harness

pytestmark = pytest.mark.timeout(180)

TOOLS = "org.apache.kafka.tools."


def tool(
    server: Server,
    main_class: str,
    *args: str,
    stdin: str | None = None,
    timeout: float = 90.0,
    subcommand: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``TOOLS + main_class [subcommand] --bootstrap-server B args`` (stdin fed if given; its process
    group is killed on timeout)."""
    full = (*subcommand, "--bootstrap-server", server.bootstrap, *args)
    if stdin is None:
        return kafka_harness.run_tool(TOOLS + main_class, *full, timeout=timeout)
    command = kafka_harness.java_command(
        TOOLS + main_class,
        *full,
        jvm_opts=("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"),
    )
    return subprocess.run(
        command, input=stdin, capture_output=True, text=True, timeout=timeout, start_new_session=True
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    return result.stdout


def produce_lines(server: Server, topic: str, lines: list[str]) -> None:
    ok(tool(server, "ConsoleProducer", "--topic", topic, stdin="\n".join(lines) + "\n"))


def test_topic_command_create_list_describe_delete(server: Server, names: tuple[str, str]) -> None:
    topic = names[0]
    out = ok(tool(server, "TopicCommand", "--create", "--topic", topic, "--partitions", "3"))
    assert f"Created topic {topic}." in out
    assert topic in ok(tool(server, "TopicCommand", "--list")).split()
    described = ok(tool(server, "TopicCommand", "--describe", "--topic", topic))
    assert re.search(rf"Topic: {topic}\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 1", described)
    rows = re.findall(
        rf"\tTopic: {topic}\tPartition: (\d+)\tLeader: (\d+)\tReplicas: (\d+)\tIsr: (\d+)", described
    )
    assert sorted(int(r[0]) for r in rows) == [0, 1, 2]
    assert all(r[1] == r[2] == r[3] for r in rows)
    ok(tool(server, "TopicCommand", "--delete", "--topic", topic))
    wait_for(
        lambda: topic not in ok(tool(server, "TopicCommand", "--list")).split(), timeout=60, interval=0.5
    )


def test_topic_command_rejects_a_duplicate(server: Server, names: tuple[str, str]) -> None:
    topic = names[0]
    create_topic(server, topic)
    again = tool(server, "TopicCommand", "--create", "--topic", topic, "--partitions", "1")
    assert again.returncode != 0
    assert f"Topic '{topic}' already exists." in again.stdout + again.stderr


def test_config_command_topic_config(server: Server, names: tuple[str, str]) -> None:
    topic = names[0]
    create_topic(server, topic)
    alter = (
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--add-config",
        "retention.ms=3600000",
    )
    assert f"Completed updating config for topic {topic}." in ok(tool(server, "ConfigCommand", *alter))
    described = ok(
        tool(server, "ConfigCommand", "--describe", "--entity-type", "topics", "--entity-name", topic)
    )
    assert f"Dynamic configs for topic {topic} are:" in described
    assert (
        "retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000"
        in described
    )


def test_config_command_group_config(server: Server, names: tuple[str, str]) -> None:
    group = names[1]
    settings = "share.record.lock.duration.ms=20000,share.auto.offset.reset=earliest"
    alter = ("--alter", "--entity-type", "groups", "--entity-name", group, "--add-config", settings)
    assert f"Completed updating config for group {group}." in ok(tool(server, "ConfigCommand", *alter))
    described = ok(
        tool(server, "ConfigCommand", "--describe", "--entity-type", "groups", "--entity-name", group)
    )
    assert "share.record.lock.duration.ms=20000" in described
    assert "share.auto.offset.reset=earliest" in described
    bad = (
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        group,
        "--add-config",
        "share.delivery.count.limit=1",
    )
    refused = tool(server, "ConfigCommand", *bad)
    assert "share.delivery.count.limit" in refused.stdout + refused.stderr
    assert "InvalidConfigurationException" in refused.stdout + refused.stderr
    listed = ok(tool(server, "ConfigCommand", "--describe", "--entity-type", "groups"))
    assert f"Dynamic configs for group {group} are:" in listed


def test_console_producer_and_console_share_consumer(server: Server, names: tuple[str, str]) -> None:
    topic, group = names
    create_topic(server, topic)
    earliest_group(server, group)
    lines = [f"line-{i}" for i in range(25)]
    produce_lines(server, topic, lines)
    consumed = tool(
        server,
        "consumer.ConsoleShareConsumer",
        *("--topic", topic, "--group", group, "--max-messages", "25", "--timeout-ms", "30000"),
    )
    assert sorted(consumed.stdout.split()) == sorted(lines)
    assert "Processed a total of 25 messages" in consumed.stderr


def test_console_consumer_by_partition(server: Server, names: tuple[str, str]) -> None:
    topic = names[0]
    create_topic(server, topic)
    lines = [f"v{i}" for i in range(12)]
    produce_lines(server, topic, lines)
    args = ("--topic", topic, "--partition", "0", "--offset", "earliest", "--max-messages", "12")
    consumed = tool(server, "consumer.ConsoleConsumer", *args, "--timeout-ms", "20000")
    assert consumed.stdout.split() == lines
    assert "Processed a total of 12 messages" in consumed.stderr


def test_get_offset_shell(server: Server, names: tuple[str, str]) -> None:
    topic = names[0]
    create_topic(server, topic)
    produce_lines(server, topic, [str(i) for i in range(7)])
    assert ok(tool(server, "GetOffsetShell", "--topic", topic)).split() == [f"{topic}:0:7"]
    earliest = ok(tool(server, "GetOffsetShell", "--topic", topic, "--time", "-2"))
    assert earliest.split() == [f"{topic}:0:0"]


def _share_rows(out: str, group: str, topic: str) -> dict[int, tuple[str, str]]:
    """ShareGroupCommand --describe --offsets rows: partition -> (start offset, lag)."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0] == group and parts[1] == topic:
            rows[int(parts[2])] = (parts[3], parts[4])
    return rows


def test_share_group_command_list_describe_reset_delete(server: Server, names: tuple[str, str]) -> None:
    topic, group = names
    create_topic(server, topic)
    earliest_group(server, group)
    produce_lines(server, topic, [f"r{i}" for i in range(10)])
    consumed = tool(
        server,
        "consumer.ConsoleShareConsumer",
        *("--topic", topic, "--group", group, "--max-messages", "10", "--timeout-ms", "30000"),
    )
    assert len(consumed.stdout.split()) == 10
    command = "consumer.group.ShareGroupCommand"
    assert group in ok(tool(server, command, "--list")).split()
    assert 0 in _share_rows(ok(tool(server, command, "--describe", "--group", group)), group, topic)
    reset = ("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    ok(tool(server, command, *reset))
    described = ok(tool(server, command, "--describe", "--group", group))
    assert _share_rows(described, group, topic) == {0: ("0", "10")}
    members = tool(server, command, "--describe", "--group", group, "--members")
    assert f"Share group '{group}' has no active members." in members.stdout + members.stderr
    deleted = ok(tool(server, command, "--delete", "--group", group))
    assert f"Deletion of requested share groups ('{group}') was successful." in deleted
    assert group not in ok(tool(server, command, "--list")).split()


def _events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("mode", ["auto", "sync"])
def test_verifiable_share_consumer(server: Server, names: tuple[str, str], mode: str) -> None:
    """VerifiableProducer then VerifiableShareConsumer (implicit and explicit acknowledgement): every
    record is consumed once and, in explicit mode, acknowledged successfully."""
    topic, group = names
    create_topic(server, topic)
    produced = _events(ok(tool(server, "VerifiableProducer", "--topic", topic, "--max-messages", "40")))
    assert sum(1 for e in produced if e["name"] == "producer_send_success") == 40
    args = [
        "--topic",
        topic,
        "--group-id",
        group,
        "--max-messages",
        "40",
        "--offset-reset-strategy",
        "earliest",
    ]
    args += ["--acknowledgement-mode", mode]
    if mode == "sync":
        args += ["--ack-pattern", "accept"]
    events = _events(ok(tool(server, "VerifiableShareConsumer", *args, timeout=120)))
    consumed = sum(e.get("count", 0) for e in events if e["name"] == "records_consumed")
    assert consumed == 40, [e["name"] for e in events]
    if mode == "sync":
        acked = [e for e in events if e["name"] == "offsets_acknowledged"]
        assert acked and all(e.get("success", True) for e in acked)


def test_share_consumer_performance(server: Server, names: tuple[str, str]) -> None:
    topic, group = names
    create_topic(server, topic)
    produce_lines(server, topic, [f"p{i}" for i in range(500)])
    earliest_group(server, group)
    args = (
        "--topic",
        topic,
        "--group",
        group,
        "--num-records",
        "500",
        "--threads",
        "1",
        "--timeout",
        "60000",
    )
    out = ok(tool(server, "ShareConsumerPerformance", *args))
    lines = [line for line in out.splitlines() if line.strip()]
    header = next(i for i, line in enumerate(lines) if "nMsg.sec" in line)
    fields = dict(
        zip(
            (c.strip() for c in lines[header].split(",")),
            (c.strip() for c in lines[header + 1].split(",")),
            strict=False,
        )
    )
    assert float(fields["data.consumed.in.nMsg"]) == 500


def test_feature_command_describe(server: Server) -> None:
    out = ok(tool(server, "FeatureCommand", "describe"))
    features = dict(re.findall(r"Feature: (\S+)\s.*?FinalizedVersionLevel: (\S+)", out))
    assert set(features) >= {"metadata.version", "share.version", "group.version", "transaction.version"}
    assert features["metadata.version"] == "4.4-IV2"
    assert int(features["share.version"]) >= 1


def test_feature_levels_as_kafka_finalizes_them(server: Server) -> None:
    out = ok(tool(server, "FeatureCommand", "describe"))
    features = dict(re.findall(r"Feature: (\S+)\s.*?FinalizedVersionLevel: (\S+)", out))
    levels = (features["share.version"], features["group.version"], features["transaction.version"])
    assert levels == ("2", "1", "2")


def test_producer_performance(server: Server, names: tuple[str, str]) -> None:
    topic = names[0]
    create_topic(server, topic)
    out = ok(
        kafka_harness.run_tool(
            TOOLS + "ProducerPerformance",
            *("--topic", topic, "--num-records", "2000", "--record-size", "100", "--throughput", "-1"),
            *("--producer-props", f"bootstrap.servers={server.bootstrap}", "acks=all"),
            timeout=90,
        )
    )
    assert re.search(r"^2000 records sent, ", out, re.MULTILINE), out
    assert ok(tool(server, "GetOffsetShell", "--topic", topic)).split() == [f"{topic}:0:2000"]


def test_groups_command_lists_a_share_group(server: Server, names: tuple[str, str]) -> None:
    topic, group = names
    create_topic(server, topic)
    earliest_group(server, group)
    produce_lines(server, topic, ["a", "b", "c"])
    consumed = tool(
        server,
        "consumer.ConsoleShareConsumer",
        *("--topic", topic, "--group", group, "--max-messages", "3", "--timeout-ms", "30000"),
    )
    assert sorted(consumed.stdout.split()) == ["a", "b", "c"]
    rows = [line.split() for line in ok(tool(server, "GroupsCommand", "--list")).splitlines()]
    assert [group, "Share", "share"] in rows


def test_cluster_tool_cluster_id(server: Server) -> None:
    out = ok(tool(server, "ClusterTool", subcommand=("cluster-id",)))
    assert re.fullmatch(r"Cluster ID: [A-Za-z0-9_-]{22}\n", out), out


def test_transactions_command_list(server: Server) -> None:
    out = ok(tool(server, "TransactionsCommand", "list"))
    assert out.split("\n")[0].split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]


def test_log_dirs_command(server: Server, names: tuple[str, str]) -> None:
    topic = names[0]
    create_topic(server, topic)
    produce_lines(server, topic, ["x"])
    out = ok(tool(server, "LogDirsCommand", "--describe", "--topic-list", topic))
    report = json.loads(out.strip().splitlines()[-1])
    partitions = [p["partition"] for b in report["brokers"] for d in b["logDirs"] for p in d["partitions"]]
    assert partitions == [f"{topic}-0"]
