"""The feature table ApiVersions carries, and the member-host form Kafka prints."""

from __future__ import annotations

from shareq.server.context import kafka_host
from shareq.server.features import FEATURES, finalized_features, supported_features


def test_levels_are_what_shareq_serves() -> None:
    levels = {f.name: (f.min_supported, f.max_supported, f.finalized) for f in FEATURES}
    assert levels == {
        "eligible.leader.replicas.version": (0, 0, 0),
        "group.version": (0, 1, 1),  # KIP-848 consumer groups
        "kraft.version": (0, 0, 0),
        "metadata.version": (7, 33, 33),  # 3.3-IV3 .. 4.4-IV2
        "share.version": (0, 2, 2),  # share groups with dead-letter queues (level 2)
        "streams.version": (0, 0, 0),
        "transaction.version": (0, 2, 2),  # KIP-890 part 2: an epoch bump at every EndTxn
    }
    for f in FEATURES:
        assert f.min_supported <= f.finalized <= f.max_supported


def test_versions_filter_as_kafka_does() -> None:
    assert supported_features(2) == () and finalized_features(2) == ()
    # v3 omits supported features whose minimum level is 0 (KAFKA-17492).
    assert [f.name for f in supported_features(3)] == ["metadata.version"]
    assert len(supported_features(4)) == 7
    # Level 0 is "off": never listed as finalized.
    assert [f.name for f in finalized_features(3)] == [
        "group.version",
        "metadata.version",
        "share.version",
        "transaction.version",
    ]
    assert finalized_features(4) == finalized_features(3)


def test_member_host_is_java_inet_address_form() -> None:
    assert kafka_host("127.0.0.1:52311") == "/127.0.0.1"
    assert kafka_host("::1:52311") == "/0:0:0:0:0:0:0:1"
    assert kafka_host("fe80::a:1:9092") == "/fe80:0:0:0:0:0:a:1"
    assert kafka_host("::ffff:10.0.0.7:9092") == "/10.0.0.7"
    assert kafka_host("unix-socket") == "/unix-socket"
