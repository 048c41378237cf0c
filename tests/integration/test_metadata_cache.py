"""Metadata answers reused from the broker's cache: the same bytes as the full path, and never
stale after topics, partitions or ACLs change, nor shared between principals."""

from __future__ import annotations

import io
import struct
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.metadata.v13 import request as metadata_v13
from kio.serial import entity_writer
from kio_wire import KioConnection, recv_frame
from secure_broker import ADMIN, ADMIN_PASSWORD, Certificates, bootstrap, client_security

from shareq.client import Admin
from shareq.embedded import EmbeddedBroker
from shareq.security.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType

pytestmark = [pytest.mark.integration]
ZERO = uuid.UUID(int=0)


def _raw(connection: KioConnection, request: Any, correlation_id: int) -> bytes:
    """The reply frame exactly as the broker wrote it (without the length prefix)."""
    header_cls = request.__header_schema__
    out = io.BytesIO()
    entity_writer(header_cls)(
        out,
        header_cls(
            request_api_key=request.__api_key__,
            request_api_version=request.__version__,
            correlation_id=correlation_id,
            client_id="cache-test",
        ),
    )
    entity_writer(type(request))(out, request)
    payload = out.getvalue()
    connection.sock.sendall(struct.pack(">i", len(payload)) + payload)
    return recv_frame(connection.sock)


def _by_name(*names: str, auto: bool = False) -> Any:
    return metadata_v13.MetadataRequest(
        topics=tuple(metadata_v13.MetadataRequestTopic(topic_id=ZERO, name=n) for n in names),
        allow_auto_topic_creation=auto,
        include_topic_authorized_operations=False,
    )


ALL = metadata_v13.MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


@pytest.mark.timeout(30)
def test_a_cached_answer_is_the_full_paths_bytes(embedded_broker: EmbeddedBroker) -> None:
    embedded_broker.call(embedded_broker.broker.create_topic, "same", 3)
    cache = embedded_broker.broker.metadata_cache
    connection = KioConnection(embedded_broker.bootstrap)
    try:
        for request in (
            _by_name("same"),
            ALL,
            metadata_v12.MetadataRequest(
                topics=(metadata_v12.MetadataRequestTopic(topic_id=None, name="same"),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=True,
            ),
        ):
            hits = cache.hits
            first = _raw(connection, request, 7)
            again = _raw(connection, request, 8)
            assert cache.hits == hits + 1, "the second identical question is answered from the cache"
            assert struct.unpack_from(">i", again)[0] == 8
            assert again[4:] == first[4:], "only the correlation id differs"
        assert connection.send(_by_name("same")).topics[0].error_code == ErrorCode.none
    finally:
        connection.close()


@pytest.mark.timeout(30)
def test_cached_answers_follow_topic_changes(embedded_broker: EmbeddedBroker) -> None:
    embedded_broker.call(embedded_broker.broker.create_topic, "grow", 2)
    connection = KioConnection(embedded_broker.bootstrap)

    def twice(request: Any) -> Any:
        first = connection.send(request)
        assert connection.send(request) == first
        return first

    try:
        (grow,) = twice(_by_name("grow")).topics
        assert len(grow.partitions) == 2
        assert {t.name for t in twice(ALL).topics} == {"grow"}
        by_id = metadata_v13.MetadataRequest(
            topics=(metadata_v13.MetadataRequestTopic(topic_id=grow.topic_id, name=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        assert twice(by_id).topics[0].name == "grow"
        with Admin(embedded_broker.bootstrap) as admin:
            admin.create_partitions("grow", 5)  # CreatePartitions
            assert len(twice(_by_name("grow")).topics[0].partitions) == 5
            assert len(twice(by_id).topics[0].partitions) == 5
            admin.create_topic("other", 1)  # CreateTopics
            assert {t.name for t in twice(ALL).topics} == {"grow", "other"}
            admin.delete_topics(["grow"])  # DeleteTopics
            assert twice(_by_name("grow")).topics[0].error_code == ErrorCode.unknown_topic_or_partition
            assert twice(by_id).topics[0].error_code == ErrorCode.unknown_topic_id
            assert {t.name for t in twice(ALL).topics} == {"other"}
            admin.create_topic("grow", 1)
        (again,) = twice(_by_name("grow")).topics
        assert (again.error_code, len(again.partitions)) == (ErrorCode.none, 1)
        assert again.topic_id != grow.topic_id
        # a topic created by the question itself (auto-creation) is answered as created
        (auto,) = connection.send(_by_name("made-by-asking", auto=True)).topics
        assert twice(_by_name("made-by-asking")).topics[0].topic_id == auto.topic_id
        assert {t.name for t in twice(ALL).topics} == {"grow", "other", "made-by-asking"}
    finally:
        connection.close()


DAN, DAN_PASSWORD = "dan", "dan-secret"


@pytest.mark.timeout(60)
def test_cached_answers_are_per_principal_and_follow_acls(
    secure: EmbeddedBroker, certs: Certificates
) -> None:
    endpoint = bootstrap(secure, "SASL_SSL")

    def admin_as(user: str, password: str) -> Admin:
        return Admin(endpoint, security=client_security(certs, user, password), request_timeout=10)

    theirs = AclBinding(
        ResourceType.TOPIC,
        "theirs",
        PatternType.LITERAL,
        f"User:{DAN}",
        "*",
        Operation.DESCRIBE,
        Permission.ALLOW,
    )
    with admin_as(ADMIN, ADMIN_PASSWORD) as admin:
        admin.upsert_scram_credential(DAN, DAN_PASSWORD)
        admin.create_topic("mine", 1)
        admin.create_topic("theirs", 1)
        admin.create_acls(
            [
                AclBinding(
                    ResourceType.TOPIC,
                    "mine",
                    PatternType.LITERAL,
                    f"User:{DAN}",
                    "*",
                    Operation.READ,
                    Permission.ALLOW,
                )
            ]
        )
    with admin_as(ADMIN, ADMIN_PASSWORD) as admin, admin_as(DAN, DAN_PASSWORD) as dan:
        for _ in range(2):  # the second round is answered from the cache, each principal its own
            assert set(admin.list_topics()) == {"mine", "theirs"}
            assert set(dan.list_topics()) == {"mine"}
        admin.create_acls([theirs])
        for _ in range(2):
            assert set(dan.list_topics()) == {"mine", "theirs"}
        admin.delete_acls(
            [
                AclFilter(
                    ResourceType.TOPIC,
                    "theirs",
                    PatternType.LITERAL,
                    f"User:{DAN}",
                    "*",
                    Operation.DESCRIBE,
                    Permission.ALLOW,
                )
            ]
        )
        for _ in range(2):
            assert set(dan.list_topics()) == {"mine"}
            assert set(admin.list_topics()) == {"mine", "theirs"}
