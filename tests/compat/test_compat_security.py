"""Security APIs on a broker without an authorizer or SASL listener, against Kafka and shareq:
ACL requests answer SECURITY_DISABLED; SCRAM credentials are created, described, refused and deleted
with Kafka's per-user errors. (ACL enforcement and SASL listeners need a Kafka formatted with SCRAM
credentials and an authorizer; that fixture is not built, so those are tested against shareq only.)"""

from __future__ import annotations

import pytest
from compat_support import FAST, Server, wait_for
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kio.schema.errors import ErrorCode

from shareq.client import Admin
from shareq.client import KafkaError as ShareqKafkaError

pytestmark = pytest.mark.timeout(60)


def _admin(server: Server) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap, **FAST})


def _described(admin: AdminClient, user: str) -> object | None:
    """The user's credential description, or None while the broker answers RESOURCE_NOT_FOUND."""
    try:
        return admin.describe_user_scram_credentials([user])[user].result(timeout=15)
    except KafkaException as error:
        if error.args[0].code() == KafkaError.RESOURCE_NOT_FOUND:
            return None
        raise


def _code(call: object, message: str | None = None) -> int:
    with pytest.raises(KafkaException) as refused:
        call()  # type: ignore[operator]
    if message is not None:
        assert refused.value.args[0].str() == message
    return int(refused.value.args[0].code())


def test_acl_requests_without_an_authorizer(server: Server) -> None:
    admin = _admin(server)
    binding = AclBinding(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        "User:a",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    every = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    disabled = KafkaError.SECURITY_DISABLED
    no_authorizer = "No Authorizer is configured."
    assert _code(lambda: admin.create_acls([binding])[binding].result(timeout=15), no_authorizer) == disabled
    assert admin.describe_acls(every).result(timeout=15) == []  # librdkafka drops the top-level error
    with Admin(server.bootstrap) as ours, pytest.raises(ShareqKafkaError) as refused:
        ours.describe_acls()
    assert refused.value.code == ErrorCode.security_disabled
    assert refused.value.message == "No Authorizer is configured on the broker"
    assert _code(lambda: admin.delete_acls([every])[every].result(timeout=15), no_authorizer) == disabled


def test_scram_credentials_round_trip(server: Server, names: tuple[str, str]) -> None:
    admin = _admin(server)
    user = names[0]
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    for future in admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, b"pw")]
    ).values():
        future.result(timeout=15)
    # Kafka applies a credential through its metadata log: a describe right after the alter can
    # still miss it, so wait for it to be described (shareq answers at once)
    described = wait_for(lambda: _described(admin, user), timeout=15)
    infos = [(i.mechanism, i.iterations) for i in described.scram_credential_infos]
    assert infos == [(ScramMechanism.SCRAM_SHA_512, 8192)]

    missing = f"nobody-{user}"
    assert (
        _code(lambda: admin.describe_user_scram_credentials([missing])[missing].result(timeout=15))
        == KafkaError.RESOURCE_NOT_FOUND
    )
    too_few = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw"
    )
    assert (
        _code(lambda: admin.alter_user_scram_credentials([too_few])[user].result(timeout=15))
        == KafkaError.UNACCEPTABLE_CREDENTIAL
    )
    absent = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
    assert (
        _code(lambda: admin.alter_user_scram_credentials([absent])[user].result(timeout=15))
        == KafkaError.RESOURCE_NOT_FOUND
    )
    gone = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([gone])[user].result(timeout=15)
    wait_for(lambda: _described(admin, user) is None, timeout=15)
    assert (
        _code(lambda: admin.describe_user_scram_credentials([user])[user].result(timeout=15))
        == KafkaError.RESOURCE_NOT_FOUND
    )
