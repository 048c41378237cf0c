"""Group, topic and broker configs as described and validated, against Kafka and shareq: names, defaults,
sources, bounds and the error for a bad value."""

from __future__ import annotations

import time
from typing import Any

import pytest
from compat_support import Server, create_topic, wait_equal
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from shareq.client import Admin, KafkaError
from shareq.client import ConfigResource as GroupResource
from shareq.client import ResourceType as GroupResourceType

pytestmark = pytest.mark.timeout(60)

DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
GROUP_CONFIG = 8
INVALID_CONFIG = 40

# Kafka 4.4's share-group configs as a fresh group describes them on a node started with the tests' broker
# configs (group.share.heartbeat.interval.ms=500 comes from the broker): value and source.
SHARE_GROUP_DEFAULTS = {
    "share.auto.offset.reset": ("latest", DEFAULT_CONFIG),
    "share.delivery.count.limit": ("5", DEFAULT_CONFIG),
    "share.heartbeat.interval.ms": ("500", STATIC_BROKER_CONFIG),
    "share.isolation.level": ("read_uncommitted", DEFAULT_CONFIG),
    "share.partition.max.record.locks": ("2000", DEFAULT_CONFIG),
    "share.record.lock.duration.ms": ("30000", DEFAULT_CONFIG),
    "share.session.timeout.ms": ("45000", DEFAULT_CONFIG),
    "share.assignment.interval.ms": ("1000", DEFAULT_CONFIG),
    "share.renew.acknowledge.enable": ("true", DEFAULT_CONFIG),
    "errors.deadletterqueue.topic.name": ("", DEFAULT_CONFIG),
    "errors.deadletterqueue.copy.record.enable": ("false", DEFAULT_CONFIG),
}

# Kafka 4.4's topic configs (DescribeConfigs of a topic created with no configs).
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "errors.deadletterqueue.group.enable",
    "file.delete.delay.ms", "flush.messages", "flush.ms", "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.decompressed.message.bytes", "max.message.bytes",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.copy.lag.bytes", "remote.copy.lag.ms", "remote.log.copy.disable", "remote.log.delete.on.disable",
    "remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes",
    "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
}  # fmt: skip


def _group_configs(server: Server, group: str) -> dict[str, tuple[str | None, int]]:
    with Admin(server.bootstrap) as admin:
        entries = admin.describe_configs([GroupResource(GroupResourceType.GROUP, group)])
    return {name: (e.value, int(e.source)) for name, e in next(iter(entries.values())).items()}


def _group_config_becomes(
    server: Server, group: str, name: str, expected: tuple[str, int]
) -> tuple[str | None, int]:
    """The described ``name`` once it is ``expected``, or the last one seen after 10 s: Kafka applies
    an altered group config through its metadata log, so a describe right after may still show the old."""
    deadline = time.monotonic() + 10
    while True:
        described = _group_configs(server, group).get(name, (None, -1))
        if described == expected or time.monotonic() > deadline:
            return described
        time.sleep(0.05)


def _alter_group(server: Server, group: str, changes: dict[str, str | None]) -> int:
    """IncrementalAlterConfigs on the group; the error code (0: accepted)."""
    with Admin(server.bootstrap) as admin:
        try:
            admin.alter_configs(GroupResource(GroupResourceType.GROUP, group), changes)
        except KafkaError as error:
            return int(error.code)
    return 0


def _describe(server: Server, kind: Any, name: str) -> dict[str, ConfigEntry]:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    resource = ConfigResource(kind, name)
    entries: dict[str, ConfigEntry] = admin.describe_configs([resource], request_timeout=15)[
        resource
    ].result()
    return entries


@pytest.mark.parametrize("name", sorted(SHARE_GROUP_DEFAULTS))
def test_share_group_config_default(server: Server, names: tuple[str, str], name: str) -> None:
    """A fresh group describes each share-group config with Kafka's default value and source."""
    described = _group_configs(server, names[1])
    assert described.get(name) == SHARE_GROUP_DEFAULTS[name]


def test_group_config_set_is_described_as_group_config(server: Server, names: tuple[str, str]) -> None:
    """A value set on the group is described with source GROUP_CONFIG; deleting it restores the default."""
    group = names[1]
    name = "share.record.lock.duration.ms"
    assert _alter_group(server, group, {name: "20000"}) == 0
    assert _group_config_becomes(server, group, name, ("20000", GROUP_CONFIG)) == ("20000", GROUP_CONFIG)
    assert _alter_group(server, group, {name: None}) == 0
    assert _group_config_becomes(server, group, name, ("30000", DEFAULT_CONFIG)) == ("30000", DEFAULT_CONFIG)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("share.record.lock.duration.ms", "100"),
        ("share.record.lock.duration.ms", "abc"),
        ("share.delivery.count.limit", "1"),
        ("share.delivery.count.limit", "11"),
        ("share.heartbeat.interval.ms", "400"),
        ("share.auto.offset.reset", "middle"),
        ("share.bogus", "1"),
    ],
    ids=["lock-below-min", "lock-not-int", "limit-below-min", "limit-above-max", "heartbeat-below-min",
         "reset-unknown", "unknown-name"],
)  # fmt: skip
def test_group_config_rejected(server: Server, names: tuple[str, str], name: str, value: str) -> None:
    """A group config outside the broker's bounds, of the wrong type or unknown: INVALID_CONFIG."""
    assert _alter_group(server, names[1], {name: value}) == INVALID_CONFIG


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("share.delivery.count.limit", "10"),
        ("share.record.lock.duration.ms", "1000"),
        ("share.auto.offset.reset", "by_duration:PT1H"),
        ("share.isolation.level", "read_committed"),
    ],
    ids=["limit-at-max", "lock-at-min", "reset-by-duration", "read-committed"],
)
def test_group_config_accepted(server: Server, names: tuple[str, str], name: str, value: str) -> None:
    """A group config at the edge of the broker's bounds, or of a non-default kind, is stored as given."""
    assert _alter_group(server, names[1], {name: value}) == 0
    assert _group_config_becomes(server, names[1], name, (value, GROUP_CONFIG)) == (value, GROUP_CONFIG)


def test_topic_config_override_source(server: Server, names: tuple[str, str]) -> None:
    """A config given at CreateTopics is described with source DYNAMIC_TOPIC_CONFIG, not default."""
    create_topic(server, names[0], configs={"retention.ms": "3600000"})
    entry = _describe(server, ResourceType.TOPIC, names[0])["retention.ms"]
    assert (entry.value, int(entry.source), entry.is_default) == ("3600000", DYNAMIC_TOPIC_CONFIG, False)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("cleanup.policy", "delete"),
        ("segment.bytes", "1073741824"),
        ("max.message.bytes", "1048588"),
        ("retention.bytes", "-1"),
        ("message.timestamp.type", "CreateTime"),
        ("compression.type", "producer"),
    ],
)
def test_topic_config_default(
    server: Server, names: tuple[str, str], name: str, value: str, request: pytest.FixtureRequest
) -> None:
    """A topic config nobody set is described with Kafka's default value and source DEFAULT_CONFIG."""
    create_topic(server, names[0])
    entry = _describe(server, ResourceType.TOPIC, names[0]).get(name)
    assert entry is not None
    assert (entry.value, int(entry.source), entry.is_default) == (value, DEFAULT_CONFIG, True)


def test_topic_min_insync_replicas_from_cluster_default(server: Server, names: tuple[str, str]) -> None:
    """min.insync.replicas of a new topic comes from the cluster-wide default KRaft writes at format time
    (source DYNAMIC_DEFAULT_BROKER_CONFIG)."""
    create_topic(server, names[0])
    entry = _describe(server, ResourceType.TOPIC, names[0])["min.insync.replicas"]
    assert (entry.value, int(entry.source)) == ("1", DYNAMIC_DEFAULT_BROKER_CONFIG)


def test_topic_config_names(server: Server, names: tuple[str, str]) -> None:
    """A topic describes exactly Kafka 4.4's 37 topic configs."""
    create_topic(server, names[0])
    assert set(_describe(server, ResourceType.TOPIC, names[0])) == KAFKA_TOPIC_CONFIGS


def test_topic_config_synonyms(server: Server, names: tuple[str, str]) -> None:
    """Synonyms name where a topic config's value comes from: the override, or the broker default."""
    create_topic(server, names[0], configs={"retention.ms": "3600000"})
    entries = _describe(server, ResourceType.TOPIC, names[0])
    synonyms = {
        name: [(s.name, s.value, int(s.source)) for s in entries[name].synonyms.values()]
        for name in ("retention.ms", "cleanup.policy", "segment.bytes")
    }
    assert synonyms == {
        "retention.ms": [("retention.ms", "3600000", DYNAMIC_TOPIC_CONFIG)],
        "cleanup.policy": [("log.cleanup.policy", "delete", DEFAULT_CONFIG)],
        "segment.bytes": [("log.segment.bytes", "1073741824", DEFAULT_CONFIG)],
    }


def test_alter_topic_config_incrementally(server: Server, names: tuple[str, str]) -> None:
    """IncrementalAlterConfigs SET on a topic, through librdkafka: described with the new value."""
    create_topic(server, names[0])
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    resource = ConfigResource(
        ResourceType.TOPIC,
        names[0],
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    entry = _describe(server, ResourceType.TOPIC, names[0])["retention.ms"]
    assert (entry.value, int(entry.source)) == ("7200000", DYNAMIC_TOPIC_CONFIG)


def test_describe_configs_unknown_topic(server: Server, names: tuple[str, str]) -> None:
    """DescribeConfigs of a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION."""
    with pytest.raises(KafkaException) as raised:
        _describe(server, ResourceType.TOPIC, "missing-" + names[0])
    assert raised.value.args[0].code() == 3


@pytest.mark.parametrize(
    ("name", "value", "source"),
    [
        ("group.share.min.record.lock.duration.ms", "1000", STATIC_BROKER_CONFIG),
        ("share.coordinator.state.topic.num.partitions", "3", STATIC_BROKER_CONFIG),
        ("group.share.record.lock.duration.ms", "30000", DEFAULT_CONFIG),
        ("group.share.delivery.count.limit", "5", DEFAULT_CONFIG),
        ("num.partitions", "1", DEFAULT_CONFIG),
        ("auto.create.topics.enable", "true", DEFAULT_CONFIG),
        ("log.segment.bytes", "1073741824", DEFAULT_CONFIG),
        ("message.max.bytes", "1048588", DEFAULT_CONFIG),
    ],
)
def test_broker_config_source(server: Server, name: str, value: str, source: int) -> None:
    """Broker 0's configs: those given at start-up are STATIC_BROKER_CONFIG, the rest Kafka's defaults."""
    entry = _describe(server, ResourceType.BROKER, "0").get(name)
    assert entry is not None
    assert (entry.value, int(entry.source)) == (value, source)


def test_broker_config_read_only(server: Server) -> None:
    """Static-only broker configs are described read-only; dynamically changeable ones are not."""
    entries = _describe(server, ResourceType.BROKER, "0")
    flags = {n: entries[n].is_read_only for n in ("group.share.record.lock.duration.ms", "num.partitions")}
    flags["log.segment.bytes"] = entries["log.segment.bytes"].is_read_only
    assert flags == {
        "group.share.record.lock.duration.ms": True,
        "num.partitions": True,
        "log.segment.bytes": False,
    }


def test_broker_log_retention_names(server: Server) -> None:
    """Retention is described as Kafka's server.properties has it: log.retention.hours=168 by default and
    log.retention.ms unset (null)."""
    entries = _describe(server, ResourceType.BROKER, "0")
    assert entries["log.retention.hours"].value == "168"
    assert entries["log.retention.ms"].value is None


def _alter_broker(server: Server, name: str, value: str | None) -> None:
    """IncrementalAlterConfigs of one config on broker 0: SET ``value``, or DELETE when None."""
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(
        ResourceType.BROKER, "0", incremental_configs=[ConfigEntry(name, value, incremental_operation=op)]
    )
    admin.incremental_alter_configs([resource], request_timeout=15)[resource].result()


def test_broker_log_retention_ms_below_minus_one(server: Server, names: tuple[str, str]) -> None:
    """A broker's log.retention.ms has no lower bound in Kafka (any negative value means no time
    limit), unlike a topic's retention.ms (at least -1): set to -7 on broker 0 it is accepted and
    described as a dynamic broker config, and a topic without its own retention describes
    retention.ms -1; a topic's -7 is INVALID_CONFIG. (Kafka applies a dynamic change a moment after
    answering, so the descriptions are polled.)"""
    topic = names[0]
    create_topic(server, topic)
    try:
        _alter_broker(server, "log.retention.ms", "-7")
        wait_equal(
            lambda: (
                (entry := _describe(server, ResourceType.BROKER, "0")["log.retention.ms"]).value,
                int(entry.source),
                _describe(server, ResourceType.TOPIC, topic)["retention.ms"].value,
            ),
            ("-7", 2, "-1"),
            timeout=15,
        )
    finally:  # set back, and seen set back, before another test describes the broker
        _alter_broker(server, "log.retention.ms", None)
        wait_equal(lambda: _describe(server, ResourceType.BROKER, "0")["log.retention.ms"].value, None, 15)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("retention.ms", "-7", incremental_operation=AlterConfigOpType.SET)],
    )
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([resource], request_timeout=15)[resource].result()
    assert refused.value.args[0].code() == INVALID_CONFIG


def test_group_config_alter_applies_to_fresh_groups_only(server: Server, names: tuple[str, str]) -> None:
    """Configs of one group do not leak into another group."""
    assert _alter_group(server, names[1], {"share.delivery.count.limit": "3"}) == 0
    assert _group_configs(server, names[1] + "-other")["share.delivery.count.limit"] == ("5", DEFAULT_CONFIG)


# DescribeConfigs' ConfigType ids by Kafka's type names.
CONFIG_TYPES = {
    "BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5,
    "DOUBLE": 6, "LIST": 7, "CLASS": 8, "PASSWORD": 9,
}  # fmt: skip


def _raw_describe(server: Server, resource_type: int, name: str) -> dict[str, Any]:
    """DescribeConfigs v4 with synonyms, by hand (the admin clients drop the config type)."""
    import sys

    import kio.index as ki
    from kio_wire import KioConnection

    schema = sys.modules[ki.load_request_schema(32, 4).__module__]
    conn = KioConnection(server.bootstrap)
    try:
        resource = schema.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=None
        )
        response = conn.send(
            schema.DescribeConfigsRequest(
                resources=(resource,), include_synonyms=True, include_documentation=False
            )
        )
    finally:
        conn.close()
    (result,) = response.results
    assert int(result.error_code) == 0, result
    return {entry.name: entry for entry in result.configs}


def test_broker_describes_kafkas_whole_config_set(server: Server) -> None:
    """Broker 0 describes every broker config of Kafka 4.4's definitions (shareq's generated table), with
    its type and whether it can change at runtime; the replication throttles only once set."""
    from shareq.kafka_configs import BROKER_CONFIGS

    described = _raw_describe(server, 4, "0")
    kafkas = {name for name in described if name in BROKER_CONFIGS}
    assert kafkas == {name for name, config in BROKER_CONFIGS.items() if config.described}
    assert {name: int(described[name].config_type) for name in kafkas} == {
        name: CONFIG_TYPES[BROKER_CONFIGS[name].type] for name in kafkas
    }
    assert {name: described[name].read_only for name in kafkas} == {
        name: BROKER_CONFIGS[name].mode == "read-only" for name in kafkas
    }


# Broker configs whose default shareq sets otherwise, on purpose.
SHAREQ_DEFAULTS = {
    "group.share.max.partition.max.record.locks",  # in-flight state is kept as runs: a larger bound
    "node.id",  # 0 unless set; Kafka has no default (its server.properties always sets it)
    "sasl.enabled.mechanisms",  # PLAIN and SCRAM on SASL listeners; shareq has no GSSAPI
    "security.inter.broker.protocol",  # no peers
    "share.coordinator.state.topic.segment.bytes",  # smaller segments for the state topic's cleaner
    "ssl.keystore.type",  # PEM only
    "ssl.truststore.type",  # PEM only
}


def test_broker_config_defaults_are_kafkas(server: Server) -> None:
    """Every broker config nobody set is described with Kafka's default (its built-in synonym's value)."""
    from shareq.kafka_configs import BROKER_CONFIGS

    described = _raw_describe(server, 4, "0")
    defaults: dict[str, str | None] = {}
    for name, entry in described.items():
        if (
            name in BROKER_CONFIGS
            and name not in SHAREQ_DEFAULTS
            and int(entry.config_source) == DEFAULT_CONFIG
        ):
            defaults[name] = entry.value
    assert len(defaults) > 250
    assert defaults == {name: BROKER_CONFIGS[name].default for name in defaults}


def test_group_describes_kafkas_group_configs(server: Server, names: tuple[str, str]) -> None:
    """A fresh group describes Kafka 4.4's group configs, streams groups' included: names, types, and each
    falls back to its broker config, whose built-in value is Kafka's default."""
    from shareq.kafka_configs import GROUP_CONFIGS

    described = _raw_describe(server, 32, names[1])
    assert set(described) == set(GROUP_CONFIGS)
    assert {n: int(e.config_type) for n, e in described.items()} == {
        n: CONFIG_TYPES[c.type] for n, c in GROUP_CONFIGS.items()
    }
    fallback = {n: (e.synonyms[-1].name, int(e.synonyms[-1].source)) for n, e in described.items()}
    assert fallback == {n: ((c.synonyms or (n,))[0], DEFAULT_CONFIG) for n, c in GROUP_CONFIGS.items()}
    builtin = {n: e.synonyms[-1].value for n, e in described.items() if n != "streams.assignor.name"}
    assert builtin == {n: c.default for n, c in GROUP_CONFIGS.items() if n != "streams.assignor.name"}


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        ("num.io.threads", "4", 0),  # cluster-wide dynamic in Kafka; one node: stored
        ("log.cleaner.threads", "2", 0),
        ("broker.rack", "r1", 42),  # read-only
        ("default.replication.factor", "1", 42),
        ("num.io.threads", "abc", 42),
        ("num.io.threads", "0", 42),
        ("no.such.broker.config", "1", 0),  # kept, as Kafka keeps it
    ],
)
def test_broker_config_alter_validate_only(server: Server, name: str, value: str, code: int) -> None:
    """IncrementalAlterConfigs (validate only) of Kafka's broker configs: what Kafka changes at runtime is
    taken, what it fixes at start-up is INVALID_REQUEST, a bad value too."""
    admin = _admin_client(server)
    resource = ConfigResource(
        ResourceType.BROKER, "0", incremental_configs=[ConfigEntry(name, value, incremental_operation=SET_OP)]
    )
    future = admin.incremental_alter_configs([resource], validate_only=True)[resource]
    try:
        future.result(timeout=15)
        got = 0
    except KafkaException as error:
        got = error.args[0].code()
    assert got == code


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        ("streams.num.standby.replicas", "1", 0),
        ("streams.session.timeout.ms", "abc", INVALID_CONFIG),
        ("streams.heartbeat.interval.ms", "0", INVALID_CONFIG),
        ("consumer.assignment.interval.ms", "2000", 0),
        ("consumer.assignment.interval.ms", "-1", INVALID_CONFIG),
        ("consumer.assignment.interval.ms", "20000", INVALID_CONFIG),  # above group.consumer.max.*
        ("streams.num.standby.replicas", "3", INVALID_CONFIG),  # above group.streams.max.standby.replicas
        ("streams.assignor.name", "bogus", INVALID_CONFIG),
    ],
)
def test_stored_group_config(
    server: Server, names: tuple[str, str], name: str, value: str, code: int
) -> None:
    """Kafka's group configs shareq only stores are validated as Kafka validates them and described as set."""
    assert _alter_group(server, names[1], {name: value}) == code
    if code == 0:
        assert _group_config_becomes(server, names[1], name, (value, GROUP_CONFIG)) == (value, GROUP_CONFIG)


SET_OP = AlterConfigOpType.SET


def _admin_client(server: Server) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap})
