"""Key-ordered share groups with real clients: the ordering checker, and the edge cases (null keys,
compressed batches, read_committed transactions, a DLQ, switching a group from none to key).

The checker runs 8 librdkafka ShareConsumers in 4 processes on one topic (1 and 4 partitions) with
many keys and one hot key holding 10% of the records; consumers pause at random and RELEASE a few
records; one consumer process is SIGKILLed mid-run, then the broker is SIGKILLed and restarted.
Every receive and acknowledgement is logged on the host clock. It checks that every record is
accepted (the durable SPSO reaches the end), that for every key the offsets of its confirmed
ACCEPTs are strictly increasing, and that no two consumers held records of one key at once (a hold
runs from the receive to the sending of its acknowledgement, for acknowledgements the broker
confirmed: those are the leases it honoured).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_harness import BrokerProcess, spawn
from click.testing import CliRunner
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kio_wire import KioConnection
from share_consumers import (
    FAST,
    SHARE_BROKER,
    as_pairs,
    create_topic,
    poll_values,
    share_consumer,
    user_records,
)
from share_requests import fetch, heartbeat

from shareq.cli.main import main as cli_main
from shareq.client import Admin
from shareq.embedded import EmbeddedBroker
from shareq.server.monitor.figures import share_partition_figures
from shareq.server.monitor.prometheus import BrokerCollector
from shareq.server.monitor.view import snapshot
from shareq.share.persister import SharePartitionKey

pytestmark = [pytest.mark.integration]

WORKER = Path(__file__).with_name("key_order_worker.py")
GROUP = "kg"


def set_group(bootstrap: str, group: str, **configs: str) -> None:
    """IncrementalAlterConfigs on the GROUP resource, as any Kafka admin client sends it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)


def produce_keyed(bootstrap: str, topic: str, keys: list[bytes], **extra: object) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **FAST, **extra})
    for seq, key in enumerate(keys):
        producer.produce(topic, key=key, value=b"%s|%d|%s" % (key, seq, b"x" * 60))
        if seq % 1000 == 999:
            producer.poll(0)
    assert producer.flush(20) == 0


class Checked:
    """What the logs say: holds, confirmed accepts, counts."""

    def __init__(self, lines: list[str]) -> None:
        received: dict[tuple[str, int, int], float] = {}
        self.holds: dict[tuple[int, str], list[tuple[float, float, str]]] = defaultdict(list)
        self.accepts: dict[tuple[int, str], list[tuple[float, int]]] = defaultdict(list)
        self.confirmed: set[tuple[int, int]] = set()
        self.keys: set[str] = set()
        for line in lines:
            f = line.split()
            if f[0] == "R":
                received[(f[1], int(f[2]), int(f[3]))] = float(f[5])
                self.keys.add(f[4])
            elif f[0] == "A" and f[7] == "1":
                cid, part, off, key, kind, sent = f[1], int(f[2]), int(f[3]), f[4], f[5], float(f[6])
                got = received.get((cid, part, off))
                assert got is not None, line
                self.holds[(part, key)].append((got, sent, cid))
                if kind == "ACCEPT":
                    self.accepts[(part, key)].append((sent, off))
                    self.confirmed.add((part, off))

    def overlaps(self) -> list[str]:
        """Holds of one key by two consumers at once."""
        bad = []
        for key, holds in self.holds.items():
            active: list[tuple[float, str]] = []  # (end, consumer) of holds begun so far
            for start, end, cid in sorted(holds):
                active = [(e, c) for e, c in active if e > start]
                bad += [f"{key}: {c} until {e:.6f}, {cid} from {start:.6f}" for e, c in active if c != cid]
                active.append((end, cid))
        return bad

    def disorder(self) -> list[str]:
        bad = []
        for key, accepts in self.accepts.items():
            offsets = [o for _, o in sorted(accepts)]
            if any(b <= a for a, b in itertools.pairwise(offsets)):
                bad.append(f"{key}: {offsets}")
        return bad


def read_logs(paths: list[Path]) -> list[str]:
    lines: list[str] = []
    for p in paths:
        if p.exists():
            lines += [x for x in p.read_text().splitlines() if x.strip()]
    return lines


def confirmed_count(paths: list[Path]) -> int:
    return len(
        {
            (f[2], f[3])
            for f in (x.split() for x in read_logs(paths))
            if f[0] == "A" and f[5] == "ACCEPT" and f[7] == "1"
        }
    )


def wait_for(condition, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def settle(logs: list[Path], total: int, idle: float = 8.0, timeout: float = 60) -> None:
    """Until every record is confirmed, or nothing new was confirmed for ``idle`` seconds (an
    acknowledgement that became durable while its reply was lost to the broker's kill is never
    confirmed; the durable state says whether it was done)."""
    deadline = time.monotonic() + timeout
    seen, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        count = confirmed_count(logs)
        if count >= total:
            return
        if count != seen:
            seen, since = count, time.monotonic()
        elif time.monotonic() - since > idle:
            return
        time.sleep(0.05)


def spso_reaches_end(
    data: Path, config: dict[str, str], topic: str, partitions: int
) -> list[tuple[int, int, int]]:
    with EmbeddedBroker(data, config=config) as reopened:
        share = reopened.broker.share
        info = reopened.broker.topics.get(topic)
        assert share is not None and info is not None

        async def spsos() -> list[tuple[int, int, int]]:
            out = []
            for part in range(partitions):
                sp = await share.partitions.get(
                    SharePartitionKey(group_id=GROUP, topic_id=info.topic_id, partition=part)
                )
                plog = reopened.broker.partition(topic, part)
                assert plog is not None
                end, count = user_records(plog.log)
                out.append((sp.spso, end, count))
            return out

        result: list[tuple[int, int, int]] = reopened.run(spsos())
        return result


@pytest.mark.timeout(150)
@pytest.mark.parametrize("partitions", [1, 4])
def test_ordering_checker(tmp_path: Path, partitions: int) -> None:
    config = dict(SHARE_BROKER)
    broker = BrokerProcess(tmp_path / "data", *as_pairs(config))
    broker.start()
    topic = "ordered"
    total = 20_000
    rnd = random.Random(partitions)
    # 10,000 distinct keys, each at least once and 8,000 more at random, and one hot key with 10%
    keys = [b"k%d" % i for i in range(10_000)] + [b"k%d" % rnd.randrange(10_000) for _ in range(8_000)]
    keys += [b"hot"] * (total - len(keys))
    rnd.shuffle(keys)
    logs = [tmp_path / f"worker{i}.log" for i in range(4)]
    stop = tmp_path / "stop"
    workers: list[subprocess.Popen[str]] = []
    kills = 0
    try:
        create_topic(broker.bootstrap, topic, partitions)
        set_group(
            broker.bootstrap, GROUP, **{"shareq.share.ordering": "key", "share.delivery.count.limit": "10"}
        )
        produce_keyed(broker.bootstrap, topic, keys, **{"linger.ms": 5})
        workers = [
            spawn(
                [
                    sys.executable,
                    str(WORKER),
                    broker.bootstrap,
                    GROUP,
                    topic,
                    str(logs[i]),
                    str(stop),
                    "2",
                    str(i),
                ],
                env=os.environ.copy(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for i in range(4)
        ]
        assert wait_for(lambda: confirmed_count(logs) >= total // 5, 40), "no progress"
        workers[0].send_signal(signal.SIGKILL)  # a consumer process dies holding records
        workers[0].wait(10)
        kills += 1
        assert wait_for(lambda: confirmed_count(logs) >= total // 2, 40), "no progress after the kill"
        broker.kill()  # and the broker, with records in flight
        broker.start()
        kills += 1
        settle(logs, total)
    finally:
        stop.touch()
        for w in workers[1:]:
            try:
                w.wait(20)
            except subprocess.TimeoutExpired:
                w.kill()
        broker.kill()
    checked = Checked(read_logs(logs))
    assert checked.overlaps() == []
    assert checked.disorder() == []
    ends = spso_reaches_end(tmp_path / "data", config, topic, partitions)
    assert all(spso >= end for spso, end, _ in ends), ends
    assert sum(count for _, _, count in ends) == total
    holds = sum(len(h) for h in checked.holds.values())
    print(
        f"checker: {total} records, {len(checked.keys)} keys, {holds} holds checked, "
        f"{len(checked.confirmed)} confirmed accepts, {kills} kills survived"
    )


# ---------------------------------------------------------------------------------- edge cases


def holder(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    return share_consumer(bootstrap, group, [topic], **{"share.acknowledgement.mode": "explicit"})


def take(consumer: ShareConsumer, until: Callable[[list[Any]], bool], timeout: float = 20) -> list[Any]:
    """Poll until ``until``, accepting every record as it comes (sent with the next poll)."""
    return poll_values(consumer, until, timeout, lambda m: consumer.acknowledge(m, AcknowledgeType.ACCEPT))


def hold(consumer: ShareConsumer, n: int) -> list[Any]:
    """One poll that returns records (``n`` of them), left unacknowledged."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        got = [m for m in consumer.poll(0.2) if m.error() is None]
        if got:
            assert len(got) == n, keys_of(got)
            return got
    raise AssertionError("nothing to hold")


def keys_of(messages: list[Any]) -> list[bytes | None]:
    return [m.key() for m in messages]


def accept_all(consumer: ShareConsumer, messages: list[Any]) -> None:
    for m in messages:
        consumer.acknowledge(m, AcknowledgeType.ACCEPT)
    consumer.commit_sync(10)


def settle_acks(consumer: ShareConsumer) -> None:
    consumer.commit_sync(10)


def held_then_freed(
    bootstrap: str,
    group: str,
    topic: str,
    first: list[bytes | None],
    then: list[bytes | None],
    **producer: Any,
) -> tuple[list[Any], list[Any]]:
    """Consumer a takes and holds what ``first`` produced; ``then`` is produced; consumer b polls
    until it has every record of ``then`` whose key a does not hold (a held key's records must not
    come), a accepts, and b polls until it has the rest. Returns b's two takes."""
    produce_list(bootstrap, topic, first, **producer)
    a = holder(bootstrap, group, topic)
    b = holder(bootstrap, group, topic)
    try:
        got_a = hold(a, len(first))
        held = {m.key() for m in got_a if m.key() is not None}
        produce_list(bootstrap, topic, then, **producer)
        free = [k for k in then if k is None or k not in held]
        early = take(b, lambda out: len(out) >= len(free), timeout=15)
        early += take(b, lambda out: False, timeout=0.6)  # nothing more comes while a holds
        settle_acks(b)
        accept_all(a, got_a)
        late = take(b, lambda out: len(out) >= len(then) - len(free))
        settle_acks(b)
        return early, late
    finally:
        a.close()
        b.close()


def produce_list(bootstrap: str, topic: str, keys: list[bytes | None], **extra: Any) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **FAST, **extra})
    for i, key in enumerate(keys):
        producer.produce(topic, key=key, value=b"v%d" % i, partition=0)
    assert producer.flush(15) == 0


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "d", config=SHARE_BROKER) as broker:
        yield broker


@pytest.mark.timeout(60)
def test_a_fetch_carrying_acknowledgements_hands_out_the_next_records_of_their_keys(
    embedded: EmbeddedBroker,
) -> None:
    """A ShareFetch that acknowledges a key's records acquires once that is durable, so the same
    answer carries the key's next records (in offset order, one range) instead of looking past them
    and handing them out scattered, a fetch later."""
    bootstrap = embedded.bootstrap
    create_topic(bootstrap, "acked", 1)
    set_group(bootstrap, "g", **{"shareq.share.ordering": "key", "share.auto.offset.reset": "earliest"})
    info = embedded.broker.topics.get("acked")
    assert info is not None
    produce_list(bootstrap, "acked", [b"a%d" % i for i in range(10)])
    conn = KioConnection(bootstrap)
    member = "M" * 22
    try:
        assert heartbeat(conn, member, 0, ("acked",)).error_code == 0
        first = raw_acquired(fetch(conn, member, 0, info.topic_id, (0,), wait_ms=5_000))
        assert first == list(range(10))
        produce_list(bootstrap, "acked", [b"a%d" % i for i in range(10)] + [b"b%d" % i for i in range(10)])
        second = fetch(conn, member, 1, info.topic_id, (0,), wait_ms=5_000, acks=((0, 9, 1),))
        assert [p.error_code for t in second.responses for p in t.partitions] == [0]
        assert raw_acquired(second) == list(range(10, 30))
    finally:
        conn.close()


def raw_acquired(response: Any) -> list[int]:
    """The offsets a raw ShareFetch answer acquired, in order."""
    return [
        o
        for t in response.responses
        for p in t.partitions
        for r in p.acquired_records
        for o in range(r.first_offset, r.last_offset + 1)
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd", "snappy"])
def test_null_keys_are_unordered_and_a_held_key_waits(embedded: EmbeddedBroker, codec: str) -> None:
    """Batches of any codec: the broker reads the keys inside them. A key a consumer holds is looked
    past (its new records wait until it lets go, then come in order); null keys and other keys go
    to the other consumer at once."""
    bootstrap = embedded.bootstrap
    create_topic(bootstrap, "t", 1)
    set_group(bootstrap, "g", **{"shareq.share.ordering": "key"})
    then = [b"k", None, b"j", b"k", None, b"j", b"k"]
    early, late = held_then_freed(bootstrap, "g", "t", [b"k", b"k"], then, **{"compression.type": codec})
    assert sorted(keys_of(early), key=str) == sorted([None, b"j", None, b"j"], key=str)
    assert keys_of(late) == [b"k", b"k", b"k"]
    assert [m.offset() for m in late] == sorted(m.offset() for m in late)


@pytest.mark.timeout(60)
def test_a_group_switched_from_none_to_key_honours_records_in_flight(embedded: EmbeddedBroker) -> None:
    """Records a consumer holds from before the switch block their key for new acquisitions."""
    bootstrap = embedded.bootstrap
    create_topic(bootstrap, "t", 1)
    set_group(bootstrap, "g", **{"share.auto.offset.reset": "earliest"})
    produce_list(bootstrap, "t", [b"k", b"k"])
    a = holder(bootstrap, "g", "t")
    b = holder(bootstrap, "g", "t")
    try:
        got_a = hold(a, 2)
        set_group(bootstrap, "g", **{"shareq.share.ordering": "key"})
        produce_list(bootstrap, "t", [b"k", b"j"])
        early = take(b, lambda out: len(out) >= 1)
        early += take(b, lambda out: False, timeout=0.6)
        assert keys_of(early) == [b"j"]
        settle_acks(b)
        accept_all(a, got_a)
        late = take(b, lambda out: len(out) >= 1)
        assert keys_of(late) == [b"k"]
        settle_acks(b)
    finally:
        a.close()
        b.close()


@pytest.mark.timeout(60)
def test_read_committed_transactions_in_key_order(embedded: EmbeddedBroker) -> None:
    """read_committed: aborted records never come, markers are not records, and a key held by one
    consumer waits for it across transactions."""
    bootstrap = embedded.bootstrap
    create_topic(bootstrap, "t", 1)
    set_group(bootstrap, "g", **{"shareq.share.ordering": "key", "share.isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx", **FAST})
    producer.init_transactions(15)

    def txn(keys: list[bytes], commit: bool) -> None:
        producer.begin_transaction()
        for i, key in enumerate(keys):
            producer.produce("t", key=key, value=b"%s-%d-%d" % (key, i, commit), partition=0)
        if commit:
            producer.commit_transaction(15)
        else:
            producer.abort_transaction(15)

    txn([b"k", b"k"], commit=True)
    a = holder(bootstrap, "g", "t")
    b = holder(bootstrap, "g", "t")
    try:
        got_a = hold(a, 2)
        assert keys_of(got_a) == [b"k", b"k"]
        txn([b"k", b"j"], commit=False)
        txn([b"k", b"j"], commit=True)
        early = take(b, lambda out: len(out) >= 1)
        early += take(b, lambda out: False, timeout=0.6)
        assert [m.value() for m in early] == [b"j-1-1"]
        settle_acks(b)
        accept_all(a, got_a)
        late = take(b, lambda out: len(out) >= 1)
        assert [m.value() for m in late] == [b"k-0-1"]
        settle_acks(b)
    finally:
        a.close()
        b.close()


@pytest.mark.timeout(60)
def test_a_dead_lettered_record_frees_its_key(embedded: EmbeddedBroker) -> None:
    """A REJECTed record goes to the group's DLQ; its key goes on with the next records."""
    bootstrap = embedded.bootstrap
    create_topic(bootstrap, "t", 1)
    with Admin(bootstrap) as admin:
        admin.create_topic("dlq.t", 1, configs={"errors.deadletterqueue.group.enable": "true"})
    set_group(
        bootstrap, "g", **{"shareq.share.ordering": "key", "errors.deadletterqueue.topic.name": "dlq.t"}
    )
    produce_list(bootstrap, "t", [b"k", b"k", b"j"])
    c = holder(bootstrap, "g", "t")
    try:
        got = hold(c, 3)
        for m in got:
            c.acknowledge(m, AcknowledgeType.REJECT if m.offset() == 0 else AcknowledgeType.ACCEPT)
        c.commit_sync(10)
        produce_list(bootstrap, "t", [b"k"])
        more = take(c, lambda out: len(out) >= 1)
        assert [(m.key(), m.offset()) for m in more] == [(b"k", 3)]
        settle_acks(c)
    finally:
        c.close()
    dlq = embedded.broker.partition("dlq.t", 0)
    assert dlq is not None
    assert wait_for(lambda: dlq.log.log_end_offset >= 1, 15), "nothing dead-lettered"
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "r",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
            **FAST,
        }
    )
    reader.subscribe(["dlq.t"])
    try:
        dead = None
        deadline = time.monotonic() + 20
        while dead is None and time.monotonic() < deadline:
            m = reader.poll(0.2)
            if m is not None and m.error() is None:
                dead = m
        assert dead is not None
        assert dict(dead.headers() or [])["__dlq.errors.offset"] == b"0"
    finally:
        reader.close()


@pytest.mark.timeout(60)
def test_describe_metrics_and_view_show_ordering_and_blocked_keys(embedded: EmbeddedBroker) -> None:
    bootstrap = embedded.bootstrap
    create_topic(bootstrap, "t", 1)
    set_group(bootstrap, "g", **{"shareq.share.ordering": "key"})
    produce_list(bootstrap, "t", [b"k", b"k"])
    a = holder(bootstrap, "g", "t")
    b = holder(bootstrap, "g", "t")
    try:
        got_a = hold(a, 2)
        produce_list(bootstrap, "t", [b"k", b"k", b"j"])
        early = take(b, lambda out: len(out) >= 1)
        assert keys_of(early) == [b"j"]
        broker = embedded.broker
        figures = embedded.call(lambda: share_partition_figures(broker, int(time.time() * 1000)))
        (f,) = [x for x in figures if x.group == "g"]
        assert (f.ordering, f.blocked_keys, f.key_waiting) == ("key", 1, 2)
        metrics = embedded.call(lambda: list(BrokerCollector(broker).collect()))
        samples = {(s.name, s.labels.get("group")): s.value for m in metrics for s in m.samples}
        assert samples[("shareq_share_partition_key_ordered", "g")] == 1
        assert samples[("shareq_share_partition_blocked_keys", "g")] == 1
        assert samples[("shareq_share_partition_key_waiting_records", "g")] == 2
        state = embedded.call(lambda: snapshot(broker))
        rows = [p for g in state["share_groups"] if g["group_id"] == "g" for p in g["partitions"]]
        assert [(r["ordering"], r["blocked_keys"], r["key_waiting"]) for r in rows] == [("key", 1, 2)]
        described = CliRunner().invoke(
            cli_main, ["groups", "describe", "g", "--json", "--bootstrap", bootstrap]
        )
        assert described.exit_code == 0, described.output
        assert json.loads(described.output)["ordering"] == "key"
        text = CliRunner().invoke(cli_main, ["groups", "describe", "g", "--bootstrap", bootstrap]).output
        assert "ORDERING" in text and " key " in text
        accept_all(a, got_a)
    finally:
        a.close()
        b.close()
