"""The config APIs side by side: random IncrementalAlterConfigs, AlterConfigs and CreateTopics requests,
good and bad, sent to Kafka and to shareq on one connection each, must get the same error code from both,
and neither may close the connection (every request is answered on the connection the last one used).

The requests are built by hand on kio, so they carry what no admin client sends: null values, repeated keys,
unknown operations, empty list items. Broker changes are validate-only (both servers are shared by other
tests); topic changes land on a topic of this test's own; group changes on a group of its own."""

from __future__ import annotations

import datetime
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import kio.index as ki
import pytest
from compat_support import Server, create_topic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio_wire import KioConnection

pytestmark = [pytest.mark.timeout(180), pytest.mark.xdist_group("kafka")]

IAC = sys.modules[ki.load_request_schema(44, 1).__module__]
AC = sys.modules[ki.load_request_schema(33, 2).__module__]
CT = sys.modules[ki.load_request_schema(19, 7).__module__]

TOPIC, BROKER, GROUP = 2, 4, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

TOPIC_NAMES = (
    "cleanup.policy",
    "retention.ms",
    "min.cleanable.dirty.ratio",
    "segment.bytes",
    "preallocate",
    "compression.type",
    "leader.replication.throttled.replicas",
    "no.such.config",
)
GROUP_NAMES = (
    "share.delivery.count.limit",
    "share.record.lock.duration.ms",
    "share.isolation.level",
    "share.renew.acknowledge.enable",
    "share.no.such.config",
    "streams.num.standby.replicas",
    "streams.session.timeout.ms",
    "consumer.assignment.interval.ms",
)
BROKER_NAMES = (
    "log.cleanup.policy",
    "message.max.bytes",
    "log.segment.bytes",
    "log.cleaner.backoff.ms",
    "log.cleaner.threads",  # 1 on both (the thread counts Kafka's node is given differ from shareq's)
    "broker.rack",
    "no.such.broker.config",
)
VALUES = (
    None,
    "",
    "delete",
    "compact",
    "delete,compact",
    "compact,,delete",
    "delete,delete",
    "compact,",
    "bogus",
    "5",
    " 5 ",
    "-5",
    "0",
    "1000",
    "3600000",
    "abc",
    "NaN",
    "nan",
    "0.5",
    "2",
    "1e3",
    "true",
    "maybe",
    "*",
    "0:0",
    "zstd",
    "read_committed",
    "99999999999",
    "3",
    "50000",
    "45000",
)


def _ops(names: tuple[str, ...]) -> st.SearchStrategy[list[tuple[str, int, str | None]]]:
    op = st.tuples(st.sampled_from(names), st.sampled_from((SET, SET, DELETE, APPEND, SUBTRACT, 7)),
                   st.sampled_from(VALUES))  # fmt: skip
    return st.lists(op, min_size=1, max_size=3)


REQUESTS = st.one_of(
    st.tuples(
        st.just("incremental"),
        st.sampled_from((TOPIC, GROUP)),
        _ops(TOPIC_NAMES + GROUP_NAMES),
        st.booleans(),
    ),
    st.tuples(st.just("incremental"), st.just(BROKER), _ops(BROKER_NAMES), st.just(True)),
    st.tuples(
        st.just("legacy"), st.sampled_from((TOPIC, GROUP)), _ops(TOPIC_NAMES + GROUP_NAMES), st.booleans()
    ),
    st.tuples(st.just("create"), st.just(TOPIC), _ops(TOPIC_NAMES), st.just(True)),
)


class Side:
    """One server: a connection, this test's topic and group there."""

    def __init__(self, server: Server, topic: str, group: str) -> None:
        self.conn = KioConnection(server.bootstrap)
        self.topic = topic
        self.group = group

    def send(
        self, kind: str, resource_type: int, ops: list[tuple[str, int, str | None]], validate: bool
    ) -> int:
        name = {TOPIC: self.topic, GROUP: self.group, BROKER: "0"}[resource_type]
        if kind == "create":
            configs = tuple(CT.CreatableTopicConfig(name=n, value=v) for n, _op, v in ops)
            topic = CT.CreatableTopic(
                name=f"{self.topic}-new",
                num_partitions=1,
                replication_factor=1,
                assignments=(),
                configs=configs,
            )
            request: Any = CT.CreateTopicsRequest(
                topics=(topic,), timeout=datetime.timedelta(seconds=15), validate_only=True
            )
            return int(self.conn.send(request).topics[0].error_code)
        if kind == "legacy":
            resource: Any = AC.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=tuple(AC.AlterableConfig(name=n, value=v) for n, _op, v in ops),
            )
            response = self.conn.send(AC.AlterConfigsRequest(resources=(resource,), validate_only=validate))
            return int(response.responses[0].error_code)
        resource = IAC.AlterConfigsResource(
            resource_type=resource_type,
            resource_name=name,
            configs=tuple(IAC.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops),
        )
        response = self.conn.send(
            IAC.IncrementalAlterConfigsRequest(resources=(resource,), validate_only=validate)
        )
        return int(response.responses[0].error_code)


@pytest.fixture
def sides(kafka_node: Server, shareq_node: Server) -> Iterator[tuple[Side, Side]]:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"config-errors-{suffix}", f"config-errors-{suffix}"
    for server in (kafka_node, shareq_node):
        create_topic(server, topic)
    kafka, shareq = Side(kafka_node, topic, group), Side(shareq_node, topic, group)
    try:
        yield kafka, shareq
    finally:
        kafka.conn.close()
        shareq.conn.close()


def test_config_requests_get_the_same_error_code(sides: tuple[Side, Side]) -> None:
    """Each random request gets Kafka's error code from shareq, and both connections stay open (a closed
    one fails the next send)."""
    kafka, shareq = sides

    @settings(max_examples=400, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
    @given(REQUESTS)
    def same_outcome(request: tuple[str, int, list[tuple[str, int, str | None]], bool]) -> None:
        kind, resource_type, ops, validate = request
        if resource_type == GROUP:
            ops = [(n, op, v) for n, op, v in ops if n in GROUP_NAMES] or [(GROUP_NAMES[0], SET, "3")]
        elif kind != "create" and resource_type == TOPIC:
            ops = [(n, op, v) for n, op, v in ops if not n.startswith("share.")] or [
                (TOPIC_NAMES[1], SET, "5")
            ]
        expected = kafka.send(kind, resource_type, ops, validate)
        assert shareq.send(kind, resource_type, ops, validate) == expected, (kind, resource_type, ops)

    same_outcome()
