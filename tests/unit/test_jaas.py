"""Kafka's broker-side ``plain.sasl.jaas.config``: parsed as Kafka writes it, malformed lines refused."""

from __future__ import annotations

import pytest

from shareq.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfigError,
    parse_jaas_config,
    plain_users,
)

KAFKA_DOCS_LINE = (
    f"{PLAIN_LOGIN_MODULE} required \n"
    '    username="admin" password="admin-secret"\n'
    '    user_admin="admin-secret"\n'
    '    user_alice="alice-secret";'
)


def test_the_line_from_kafkas_documentation_parses() -> None:
    entry = parse_jaas_config(KAFKA_DOCS_LINE)
    assert entry.module == PLAIN_LOGIN_MODULE
    assert entry.flag == "required"
    assert entry.options == {
        "username": "admin",
        "password": "admin-secret",
        "user_admin": "admin-secret",
        "user_alice": "alice-secret",
    }


def test_quoted_values_keep_spaces_semicolons_and_escaped_quotes() -> None:
    entry = parse_jaas_config(f'{PLAIN_LOGIN_MODULE} required user_bob="a b;c\\"d";')
    assert entry.options == {"user_bob": 'a b;c"d'}


def test_users_are_hashed_and_checked() -> None:
    users = plain_users(KAFKA_DOCS_LINE)
    assert sorted(users.credentials) == ["admin", "alice"]
    assert users.verify("alice", "alice-secret")
    assert not users.verify("alice", "admin-secret")
    assert not users.verify("mallory", "alice-secret")
    assert all(b"alice-secret" not in repr(c).encode() for c in users.credentials.values())


@pytest.mark.parametrize(
    "line",
    [
        "",
        f"{PLAIN_LOGIN_MODULE} required",  # no closing semicolon
        f'{PLAIN_LOGIN_MODULE} user_a="x";',  # no control flag
        f'{PLAIN_LOGIN_MODULE} mandatory user_a="x";',  # not a JAAS flag
        f'{PLAIN_LOGIN_MODULE} required user_a "x";',  # no '='
        f'{PLAIN_LOGIN_MODULE} required user_a="x;',  # unterminated quote
        f"{PLAIN_LOGIN_MODULE} required user_a=;",
    ],
)
def test_malformed_lines_are_refused(line: str) -> None:
    with pytest.raises(JaasConfigError):
        parse_jaas_config(line)


def test_another_login_module_is_refused_for_plain() -> None:
    with pytest.raises(JaasConfigError, match="PlainLoginModule"):
        plain_users(f'{SCRAM_LOGIN_MODULE} required username="a" password="b";')
