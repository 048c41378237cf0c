"""The ``shareq`` client verbs end to end: topics, produce, consume, groups, offsets, configs.

Most run in-process through ``CliRunner`` against an embedded broker; one test drives the real
command (``python -m shareq``) against the broker as a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from broker_harness import BrokerProcess, free_port
from click.testing import CliRunner, Result

from shareq.cli.main import main
from shareq.client import ShareConsumer
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


class Cli:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None, ok: bool = True) -> Result:
        result = self.runner.invoke(main, [*args, "--bootstrap", self.bootstrap], input=input)
        if ok:
            assert result.exit_code == 0, result.output
        else:
            assert result.exit_code == 1, result.output
            assert "Traceback" not in result.output
            assert result.exception is None or isinstance(result.exception, SystemExit)
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)


@pytest.fixture
def cli(broker: EmbeddedBroker) -> Cli:
    return Cli(broker.bootstrap)


def consumed(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_topics_verbs(cli: Cli) -> None:
    assert "created topic t1 (3 partition(s)" in cli("topics", "create", "t1", "-p", "3").output
    cli("topics", "create", "t2", "--config", "retention.ms=60000")
    assert "already exists" in cli("topics", "create", "t1", ok=False).output
    listed = cli.json("topics", "list")
    assert [(t["topic"], t["partitions"]) for t in listed] == [("t1", 3), ("t2", 1)]
    assert "TOPIC" in cli("topics", "list").output
    cli("produce", "--topic", "t1", "--partition", "2", input="a\nb\n")
    described = cli.json("topics", "describe", "t1")
    assert [p["end_offset"] for p in described["partitions"]] == [0, 0, 2]
    assert "END-OFFSET" in cli("topics", "describe", "t1").output
    assert "no such topic" in cli("topics", "describe", "nope", ok=False).output
    cli("topics", "delete", "t2")
    assert "no such topic" in cli("topics", "delete", "t2", ok=False).output


def test_topics_alter_and_records_delete(cli: Cli) -> None:
    cli("topics", "create", "grow")
    cli("produce", "--topic", "grow", input="".join(f"{i}\n" for i in range(5)))
    assert cli.json("records", "delete", "--topic", "grow", "--before", "3") == {
        "topic": "grow",
        "partitions": [{"partition": 0, "start_offset": 3}],
    }
    assert "START-OFFSET" in cli("records", "delete", "--topic", "grow", "--before", "3").output
    assert "offset out of range" in cli("records", "delete", "-t", "grow", "--before", "9", ok=False).output
    assert "now has 3 partition(s)" in cli("topics", "alter", "grow", "--partitions", "3").output
    described = cli.json("topics", "describe", "grow")
    assert [(p["start_offset"], p["end_offset"]) for p in described["partitions"]] == [(3, 5), (0, 0), (0, 0)]
    assert "would not be an increase" in cli("topics", "alter", "grow", "-p", "2", ok=False).output
    assert cli.json("records", "delete", "-t", "grow", "--before", "-1")["partitions"][0]["start_offset"] == 5


def test_produce_consume_groups_and_offsets(cli: Cli, broker: EmbeddedBroker) -> None:
    cli("topics", "create", "q", "-p", "1")
    cli("configs", "alter", "--group", "workers", "--set", "share.auto.offset.reset=earliest")
    lines = "".join(f"k{i}:v{i}\n" for i in range(6))
    assert "produced 6 record(s)" in cli("produce", "-t", "q", "--key-separator", ":", input=lines).output

    # Release two: they come back with a higher delivery count; then accept four.
    released = consumed(
        cli("consume", "-g", "workers", "-t", "q", "--ack", "release", "--max-records", "2", "--json")
    )
    assert [(r["offset"], r["delivery_count"]) for r in released] == [(0, 1), (1, 1)]
    accepted = cli("consume", "-g", "workers", "-t", "q", "--max-records", "4", "--print-key")
    assert accepted.stdout.splitlines() == ["k0\tv0", "k1\tv1", "k2\tv2", "k3\tv3"]
    assert "consumed 4 record(s)" in accepted.stderr
    missing = cli("consume", "-g", "workers", "-t", "nope", "--max-records", "1", ok=False)
    assert "nope: no such topic" in missing.output

    assert cli.json("groups", "list") == [{"group": "workers", "state": "Empty", "type": "share"}]
    assert "Empty" in cli("groups", "describe", "workers").output
    offsets = cli.json("offsets", "describe", "workers")
    assert [(o["start_offset"], o["lag"]) for o in offsets] == [(4, 2)]
    assert "START-OFFSET" in cli("offsets", "describe", "workers").output

    # Dry run by default: the plan is printed, nothing changes.
    plan = cli("offsets", "alter", "workers", "--topic", "q", "--to-earliest")
    assert "dry run" in plan.output
    assert cli.json("offsets", "describe", "workers")[0]["start_offset"] == 4
    done = cli.json("offsets", "alter", "workers", "--topic", "q", "--to-offset", "1", "--execute")
    assert done["offsets"] == [{"topic": "q", "partition": 0, "current": 4, "new": 1}]
    assert [(o["start_offset"], o["lag"]) for o in cli.json("offsets", "describe", "workers")] == [(1, 5)]
    cli("offsets", "alter", "workers", "--topic", "q", "--to-latest", "--execute")
    assert cli.json("offsets", "describe", "workers")[0]["start_offset"] == 6
    cli("offsets", "alter", "workers", "--topic", "q", "--to-datetime", "2000-01-01T00:00:00", "--execute")
    assert cli.json("offsets", "describe", "workers")[0]["start_offset"] == 0

    # Bad offsets and partitions are refused before anything is sent.
    assert (
        "outside q-0"
        in cli("offsets", "alter", "workers", "--topic", "q", "--to-offset", "99", ok=False).output
    )
    assert (
        "no partition 5"
        in cli(
            "offsets", "alter", "workers", "--topic", "q", "--partition", "5", "--to-earliest", ok=False
        ).output
    )
    for bad in (["--to-datetime", "yesterday"], ["--to-offset", "-1"], ["--to-earliest", "--to-latest"]):
        usage = cli.runner.invoke(
            main, ["offsets", "alter", "workers", "--topic", "q", *bad, "-b", cli.bootstrap]
        )
        assert usage.exit_code == 2, usage.output
        assert "Traceback" not in usage.output
    assert cli.json("offsets", "describe", "workers")[0]["start_offset"] == 0

    # While a consumer is in the group, altering, deleting offsets and deleting the group fail.
    member = ShareConsumer(broker.bootstrap, "workers", topics=["q"])
    try:
        deadline = time.monotonic() + 30
        while member.assignment() != [("q", 0)]:
            assert time.monotonic() < deadline, "the consumer never got its assignment"
            member.poll(0.2)
        assert "Stable" in cli("groups", "describe", "workers").output
        described = cli.json("groups", "describe", "workers")
        assert described["state"] == "Stable"
        assert [(m["member_id"], m["assignment"]) for m in described["members"]] == [
            (member.member_id, {"q": [0]})
        ]
        busy = cli("offsets", "alter", "workers", "--topic", "q", "--to-earliest", "--execute", ok=False)
        assert "no members" in busy.output
        assert "no members" in cli("offsets", "delete", "workers", "--topic", "q", ok=False).output
        assert "active members" in cli("groups", "delete", "workers", ok=False).output
    finally:
        member.close(release=True)

    assert "dry run" in cli("offsets", "delete", "workers", "--topic", "q").output
    assert (
        "has no offsets for topic(s) zz"
        in cli("offsets", "delete", "workers", "--topic", "zz", ok=False).output
    )
    cli("offsets", "delete", "workers", "--topic", "q", "--execute")
    assert cli.json("offsets", "describe", "workers") == []
    assert "deleted share group workers" in cli("groups", "delete", "workers").output
    assert "does not exist" in cli("groups", "describe", "workers", ok=False).output
    assert "does not exist" in cli("offsets", "describe", "workers", ok=False).output
    assert "does not exist" in cli("groups", "delete", "workers", ok=False).output
    assert cli("groups", "list").output.strip() == "no groups"


def test_configs_verbs(cli: Cli) -> None:
    cli("configs", "alter", "--group", "g", "--set", "share.record.lock.duration.ms=20000")
    described = cli.json("configs", "describe", "--group", "g")
    assert described["share.record.lock.duration.ms"] == {
        "value": "20000",
        "source": "GROUP_CONFIG",
        "default": False,
        "synonyms": [
            {"name": "share.record.lock.duration.ms", "value": "20000", "source": "GROUP_CONFIG"},
            {"name": "group.share.record.lock.duration.ms", "value": "30000", "source": "DEFAULT_CONFIG"},
        ],
    }
    shown = cli("configs", "describe", "--group", "g").output
    assert "DEFAULT_CONFIG:group.share.record.lock.duration.ms=30000" in shown
    assert described["share.delivery.count.limit"]["source"] == "DEFAULT_CONFIG"
    bad = cli("configs", "alter", "--group", "g", "--set", "share.delivery.count.limit=50", ok=False)
    assert "in the range 2 to 10 inclusive" in bad.output
    unknown = cli("configs", "alter", "--group", "g", "--set", "bogus=1", ok=False)
    assert "Unknown group config name" in unknown.output
    checked = cli(
        "configs", "alter", "--group", "g", "--set", "share.delivery.count.limit=3", "--validate-only"
    )
    assert "validated" in checked.output
    assert cli.json("configs", "describe", "--group", "g")["share.delivery.count.limit"]["value"] == "5"
    cli("configs", "alter", "--group", "g", "--delete", "share.record.lock.duration.ms")
    assert (
        cli.json("configs", "describe", "--group", "g")["share.record.lock.duration.ms"]["value"] == "30000"
    )
    assert "group.share.max.size" in cli("configs", "describe", "--broker").output
    cli("configs", "alter", "--cluster-default", "--set", "log.retention.ms=5000")
    cli("configs", "alter", "--broker", "--set", "log.retention.ms=6000")
    cluster_defaults = cli.json("configs", "describe", "--cluster-default")
    assert cluster_defaults.pop("min.insync.replicas")["value"] == "1"  # written when the cluster formed
    assert cluster_defaults == {
        "log.retention.ms": {
            "value": "5000",
            "source": "DYNAMIC_DEFAULT_BROKER_CONFIG",
            "default": False,
            "synonyms": [
                {"name": "log.retention.ms", "value": "5000", "source": "DYNAMIC_DEFAULT_BROKER_CONFIG"}
            ],
        }
    }
    own = cli.json("configs", "describe", "--broker")["log.retention.ms"]
    assert (own["value"], own["source"]) == ("6000", "DYNAMIC_BROKER_CONFIG")
    cli("topics", "create", "ct")
    cli("configs", "alter", "--topic", "ct", "--set", "retention.ms=1000")
    assert cli.json("configs", "describe", "--topic", "ct")["retention.ms"]["value"] == "1000"
    usage = cli.runner.invoke(main, ["configs", "describe", "--group", "g", "--topic", "ct"])
    assert usage.exit_code == 2 and "exactly one" in usage.output
    nothing = cli.runner.invoke(main, ["configs", "alter", "--group", "g"])
    assert nothing.exit_code == 2 and "nothing to change" in nothing.output


def test_quotas_verbs(cli: Cli) -> None:
    assert "no quotas" in cli("quotas", "describe").output
    cli("quotas", "alter", "--client-id", "app", "--set", "producer_byte_rate=1024")
    cli("quotas", "alter", "--client-id", "*", "--set", "consumer_byte_rate=2048")
    assert cli.json("quotas", "describe", "--client-id", "app") == [
        {"entity": {"client-id": "app"}, "values": {"producer_byte_rate": 1024.0}}
    ]
    assert cli.json("quotas", "describe", "--client-id", "*") == [
        {"entity": {"client-id": None}, "values": {"consumer_byte_rate": 2048.0}}
    ]
    shown = cli("quotas", "describe").output
    assert "client-id=app" in shown and "client-id=<default>" in shown
    bad = cli("quotas", "alter", "--client-id", "app", "--set", "producer_byte_rate=1.5", ok=False)
    assert "fractional" in bad.output
    cli("quotas", "alter", "--client-id", "app", "--delete", "producer_byte_rate")
    assert cli.json("quotas", "describe", "--client-id", "app") == []
    usage = cli.runner.invoke(main, ["quotas", "alter", "--set", "producer_byte_rate=1"])
    assert usage.exit_code == 2 and "--client-id" in usage.output


def test_unreachable_broker_is_one_line() -> None:
    cli = Cli(f"127.0.0.1:{free_port()}")
    result = cli("groups", "list", ok=False)
    assert "cannot reach the broker" in result.output


def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shareq", *args],
        input=input,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=60,
        check=False,
    )


def test_real_command_against_a_broker_process(tmp_path: Any) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        b = ["--bootstrap", broker.bootstrap]
        assert run("topics", "create", "s", *b).returncode == 0
        assert (
            run(
                "configs", "alter", "--group", "sg", "--set", "share.auto.offset.reset=earliest", *b
            ).returncode
            == 0
        )
        assert run("produce", "-t", "s", *b, input="one\ntwo\nthree\n").returncode == 0
        got = run("consume", "-g", "sg", "-t", "s", "--max-records", "3", "--timeout", "30", *b)
        assert got.returncode == 0, got.stderr
        assert got.stdout.splitlines() == ["one", "two", "three"]
        described = run("offsets", "describe", "sg", "--json", *b)
        assert [(o["start_offset"], o["lag"]) for o in json.loads(described.stdout)] == [(3, 0)]
        missing = run("groups", "describe", "nobody", *b)
        assert missing.returncode == 1
        assert "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    finally:
        broker.kill()
    unreachable = run("topics", "list", "--bootstrap", broker.bootstrap)
    assert unreachable.returncode == 1
    assert "cannot reach the broker" in unreachable.stderr and "Traceback" not in unreachable.stderr
