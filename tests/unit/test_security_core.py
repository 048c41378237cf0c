"""The pure security core: the authorizer's decisions and filters, SCRAM credentials against a
real SCRAM client, the SASL state machine (gate, failures, re-authentication) and listener parsing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scramp import ScramClient

from shareq.security.acl import (
    AclBinding,
    AclError,
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    parse_super_users,
)
from shareq.security.listeners import (
    ListenerConfigError,
    SecurityProtocol,
    advertised_for,
    parse_listeners,
    parse_protocol_map,
)
from shareq.security.sasl import Phase, SaslState
from shareq.security.scram import (
    CredentialError,
    CredentialStore,
    ScramCredential,
    ScramMechanism,
    credential_from_password,
    credential_from_salted,
    salted_password,
)

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def bind(
    rtype: ResourceType,
    name: str,
    op: Operation,
    principal: str = "User:bob",
    permission: Permission = ALLOW,
    pattern: PatternType = LIT,
    host: str = "*",
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


# -- authorizer -----------------------------------------------------------------------------------


def test_no_binding_denies_unless_allow_everyone() -> None:
    assert not Authorizer().authorize("User:bob", "1.2.3.4", Operation.READ, T, "t")
    assert Authorizer(allow_if_no_acl=True).authorize("User:bob", "1.2.3.4", Operation.READ, T, "t")
    # a binding for someone else on the resource means "there are ACLs": no fallback
    other = Authorizer([bind(T, "t", Operation.READ, "User:eve")], allow_if_no_acl=True)
    assert not other.authorize("User:bob", "h", Operation.READ, T, "t")


def test_super_users_are_allowed_everything() -> None:
    authorizer = Authorizer([bind(T, "t", Operation.ALL, "User:admin", DENY)], super_users=["User:admin"])
    assert authorizer.authorize("User:admin", "h", Operation.DELETE, T, "t")
    assert parse_super_users("User:a; User:b;") == ["User:a", "User:b"]


def test_implied_operations_and_all() -> None:
    authorizer = Authorizer(
        [bind(T, "t", Operation.WRITE), bind(T, "u", Operation.ALTER_CONFIGS), bind(G, "g", Operation.ALL)]
    )
    assert authorizer.authorize("User:bob", "h", Operation.DESCRIBE, T, "t")  # WRITE implies DESCRIBE
    assert not authorizer.authorize("User:bob", "h", Operation.READ, T, "t")
    assert authorizer.authorize("User:bob", "h", Operation.DESCRIBE_CONFIGS, T, "u")
    assert not authorizer.authorize("User:bob", "h", Operation.DESCRIBE, T, "u")
    assert authorizer.authorize("User:bob", "h", Operation.DELETE, G, "g")


def test_deny_wins_and_is_not_implied() -> None:
    authorizer = Authorizer([bind(T, "*", Operation.ALL), bind(T, "secret", Operation.READ, permission=DENY)])
    assert not authorizer.authorize("User:bob", "h", Operation.READ, T, "secret")
    assert authorizer.authorize(
        "User:bob", "h", Operation.DESCRIBE, T, "secret"
    )  # DENY READ denies only READ
    assert authorizer.authorize("User:bob", "h", Operation.READ, T, "public")


def test_prefixed_wildcards_and_hosts() -> None:
    authorizer = Authorizer(
        [
            bind(T, "logs.", Operation.READ, pattern=PRE),
            bind(G, "g", Operation.READ, "User:*"),
            bind(T, "local", Operation.WRITE, host="127.0.0.1"),
        ]
    )
    assert authorizer.authorize("User:bob", "h", Operation.READ, T, "logs.app")
    assert not authorizer.authorize("User:bob", "h", Operation.READ, T, "log")
    assert authorizer.authorize("User:anyone", "h", Operation.READ, G, "g")
    assert authorizer.authorize("User:bob", "127.0.0.1", Operation.WRITE, T, "local")
    assert not authorizer.authorize("User:bob", "10.0.0.1", Operation.WRITE, T, "local")


def test_authorized_operations_bits() -> None:
    authorizer = Authorizer([bind(T, "t", Operation.READ)])
    bits = authorizer.authorized_operations("User:bob", "h", T, "t")
    assert bits == (1 << Operation.READ) | (1 << Operation.DESCRIBE)


def test_filters_match_as_kafka_describes() -> None:
    literal, prefixed, wildcard = (
        bind(T, "a.b", Operation.READ),
        bind(T, "a.", Operation.READ, pattern=PRE),
        bind(T, "*", Operation.READ),
    )
    authorizer = Authorizer([literal, prefixed, wildcard, bind(G, "a.b", Operation.READ)])

    def f(name: str | None, pattern: PatternType, rtype: ResourceType = T) -> list[AclBinding]:
        return authorizer.describe(AclFilter(rtype, name, pattern, None, None, Operation.ANY, Permission.ANY))

    assert f("a.b", PatternType.MATCH) == [literal, prefixed, wildcard]
    assert f("a.b", PatternType.LITERAL) == [literal]
    assert f("a.", PatternType.ANY) == [prefixed]
    assert len(f(None, PatternType.ANY, ResourceType.ANY)) == 4
    removed = authorizer.delete(AclFilter(T, None, PatternType.ANY, "User:bob", None, Operation.READ, ALLOW))
    assert removed == [literal, prefixed, wildcard] and len(authorizer.bindings) == 1
    with pytest.raises(AclError):
        authorizer.describe(
            AclFilter(ResourceType.UNKNOWN, None, PatternType.ANY, None, None, Operation.ANY, ALLOW)
        )


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (bind(ResourceType.ANY, "t", Operation.READ), "Invalid resourceType"),
        (bind(T, "t", Operation.READ, pattern=PatternType.MATCH), "Invalid patternType"),
        (bind(T, "t", Operation.ANY), "Invalid operation"),
        (bind(T, "t", Operation.READ, "bob"), "Could not parse principal"),
        (bind(C, "other", Operation.ALTER), "kafka-cluster"),
        (bind(T, "", Operation.READ), "should not be empty"),
    ],
)
def test_new_bindings_are_validated(binding: AclBinding, message: str) -> None:
    with pytest.raises(AclError, match=message):
        Authorizer().add(binding)


names = st.sampled_from(["a", "ab", "abc", "b", "*"])


@given(
    bindings=st.lists(
        st.builds(
            AclBinding,
            st.sampled_from([T, G]),
            names,
            st.sampled_from([LIT, PRE]),
            st.sampled_from(["User:bob", "User:*", "User:eve"]),
            st.sampled_from(["*", "h"]),
            st.sampled_from([Operation.READ, Operation.WRITE, Operation.ALL, Operation.DESCRIBE]),
            st.sampled_from([ALLOW, DENY]),
        ),
        max_size=8,
    ),
    name=names,
    op=st.sampled_from([Operation.READ, Operation.WRITE, Operation.DESCRIBE]),
)
def test_adding_a_deny_never_grants(bindings: list[AclBinding], name: str, op: Operation) -> None:
    before = Authorizer(bindings).authorize("User:bob", "h", op, T, name)
    after = Authorizer([*bindings, bind(T, name, op, permission=DENY)]).authorize(
        "User:bob", "h", op, T, name
    )
    assert not after and (before or not after)


# -- SCRAM ----------------------------------------------------------------------------------------


def test_credential_from_salted_password_matches_a_scram_client_exchange() -> None:
    store = CredentialStore()
    salt = b"0123456789abcdef"
    salted = salted_password(ScramMechanism.SCRAM_SHA_256, b"pw", salt, 4096)
    store.upsert("alice", credential_from_salted(ScramMechanism.SCRAM_SHA_256, salt, salted, 4096))
    state = SaslState(CredentialStore.from_json(store.to_json()), ("SCRAM-SHA-256",), 0)
    assert state.handshake("SCRAM-SHA-256") is None
    client = ScramClient(["SCRAM-SHA-256"], "alice", "pw")
    first = state.authenticate(client.get_client_first().encode(), now=0)
    client.set_server_first(first.auth_bytes.decode())
    final = state.authenticate(client.get_client_final().encode(), now=0)
    assert final.error is None
    client.set_server_final(final.auth_bytes.decode())  # the server proved it knows the key
    assert state.principal == "User:alice" and state.phase is Phase.AUTHENTICATED


def test_credentials_keep_no_password() -> None:
    credential = credential_from_password(ScramMechanism.SCRAM_SHA_512, "hunter2", 4096)
    assert "hunter2" not in str(credential.to_json())
    assert credential.verify_password("hunter2") and not credential.verify_password("hunter3")
    assert ScramCredential.from_json(credential.to_json()) == credential
    with pytest.raises(CredentialError, match="Too few iterations"):
        credential_from_password(ScramMechanism.SCRAM_SHA_512, "x", 100)
    with pytest.raises(CredentialError, match="Too many iterations"):
        credential_from_password(ScramMechanism.SCRAM_SHA_512, "x", 20_000)


def _store() -> CredentialStore:
    store = CredentialStore()
    store.upsert("alice", credential_from_password(ScramMechanism.SCRAM_SHA_512, "pw", 4096))
    return store


def test_wrong_scram_proof_fails_and_the_gate_stays_shut() -> None:
    state = SaslState(_store(), ("SCRAM-SHA-512",), 0)
    assert state.admits(3, now=0) is not None  # Metadata before authentication closes the connection
    assert state.admits(18, now=0) is None  # ApiVersions is always allowed
    state.handshake("SCRAM-SHA-512")
    client = ScramClient(["SCRAM-SHA-512"], "alice", "not-pw")
    client.set_server_first(state.authenticate(client.get_client_first().encode(), 0).auth_bytes.decode())
    step = state.authenticate(client.get_client_final().encode(), 0)
    assert step.error == "sasl_authentication_failed"
    assert step.message is not None and "SCRAM-SHA-512" in step.message
    assert state.phase is Phase.FAILED and state.admits(3, 0) is not None


def test_unknown_user_and_disabled_mechanism() -> None:
    state = SaslState(_store(), ("SCRAM-SHA-512",), 0)
    assert state.handshake("PLAIN") == "unsupported_sasl_mechanism"
    state.handshake("SCRAM-SHA-512")
    client = ScramClient(["SCRAM-SHA-512"], "mallory", "pw")
    assert state.authenticate(client.get_client_first().encode(), 0).error == "sasl_authentication_failed"


def test_plain_checks_the_salted_credential() -> None:
    state = SaslState(_store(), ("PLAIN",), 0)
    state.handshake("PLAIN")
    assert state.authenticate(b"\x00alice\x00pw", 0).error is None
    bad = SaslState(_store(), ("PLAIN",), 0)
    bad.handshake("PLAIN")
    assert (
        bad.authenticate(b"\x00alice\x00nope", 0).message
        == "Authentication failed: Invalid username or password"
    )
    garbage = SaslState(_store(), ("PLAIN",), 0)
    garbage.handshake("PLAIN")
    assert garbage.authenticate(b"\xff\xfe", 0).error == "sasl_authentication_failed"


def test_reauthentication_extends_the_session_and_keeps_the_principal() -> None:
    state = SaslState(_store(), ("PLAIN",), 1000)
    state.handshake("PLAIN")
    assert state.authenticate(b"\x00alice\x00pw", now=0).session_lifetime_ms == 1000
    assert state.admits(0, now=999) is None
    assert state.admits(0, now=1000) is not None  # expired: the next request closes the connection
    assert state.handshake("PLAIN") is None  # re-authentication on the same connection
    assert state.admits(0, now=500) is None  # the old session serves until it ends
    assert state.authenticate(b"\x00alice\x00pw", now=900).error is None
    assert state.admits(0, now=1800) is None and state.admits(0, now=1900) is not None


def test_reauthentication_cannot_change_the_principal() -> None:
    store = _store()
    store.upsert("bob", credential_from_password(ScramMechanism.SCRAM_SHA_512, "pw2", 4096))
    state = SaslState(store, ("PLAIN",), 1000)
    state.handshake("PLAIN")
    state.authenticate(b"\x00alice\x00pw", 0)
    state.handshake("PLAIN")
    step = state.authenticate(b"\x00bob\x00pw2", 10)
    assert step.error == "sasl_authentication_failed" and "Cannot change principals" in (step.message or "")


# -- listeners ------------------------------------------------------------------------------------


def test_listeners_with_a_protocol_map_and_advertised_endpoints() -> None:
    mapping = parse_protocol_map("CLIENT:SASL_SSL,INTERNAL:PLAINTEXT")
    listeners = parse_listeners("CLIENT://:9094,INTERNAL://127.0.0.1:9092", mapping, default_host="0.0.0.0")
    assert [(lst.name, lst.host, lst.port, lst.protocol) for lst in listeners] == [
        ("CLIENT", "0.0.0.0", 9094, SecurityProtocol.SASL_SSL),
        ("INTERNAL", "127.0.0.1", 9092, SecurityProtocol.PLAINTEXT),
    ]
    advertised = advertised_for(
        listeners, parse_listeners("CLIENT://broker.example:19094", mapping, default_host="x")
    )
    assert advertised["CLIENT"].url() == "CLIENT://broker.example:19094"
    assert advertised["INTERNAL"] is listeners[1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("FOO://:1", "no security protocol defined for listener FOO"),
        ("PLAINTEXT://:1,PLAINTEXT://:2", "different name"),
        ("PLAINTEXT:/x", "unable to parse"),
        ("SSL://:70000", "out of range"),
    ],
)
def test_bad_listeners_are_refused(text: str, message: str) -> None:
    with pytest.raises(ListenerConfigError, match=message):
        parse_listeners(text, parse_protocol_map(None), default_host="h")


def test_unknown_protocol_in_the_map() -> None:
    with pytest.raises(ListenerConfigError, match="No enum constant"):
        parse_protocol_map("A:TLS")
