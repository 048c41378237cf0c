"""AlterUserScramCredentials and DescribeUserScramCredentials over the broker's credential store,
with Kafka's per-user errors; the store is saved (salted keys only) after each change."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange
from shareq.protocol.api_keys import ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS
from shareq.security.scram import CredentialError, ScramMechanism, credential_from_salted

from ..context import NO_THROTTLE, RequestContext


def handle_describe_user_scram_credentials(request: Any, ctx: RequestContext) -> Any:
    security = ctx.broker.security
    assert security is not None
    store = security.credentials
    asked = [user.name for user in request.users] if request.users else list(store.users())
    counts = Counter(asked)
    results = []
    for user in dict.fromkeys(asked):
        credentials = store.mechanisms_of(user)
        if counts[user] > 1:
            code, message = (
                ErrorCode.duplicate_resource,
                f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}",
            )
        elif not credentials:
            code, message = (
                ErrorCode.resource_not_found,
                f"Attempt to describe a user credential that does not exist: {user}",
            )
        else:
            code, message = ErrorCode.none, None
        results.append(
            ctx.build(
                "DescribeUserScramCredentialsResult",
                user=user,
                error_code=code,
                error_message=message,
                credential_infos=tuple(
                    ctx.build("CredentialInfo", mechanism=int(c.mechanism), iterations=c.iterations)
                    for c in credentials
                )
                if code == ErrorCode.none
                else (),
            )
        )
    return ctx.build(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, results=tuple(results)
    )


def handle_alter_user_scram_credentials(request: Any, ctx: RequestContext) -> Any:
    security = ctx.broker.security
    assert security is not None
    store = security.credentials
    users = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    seen: dict[tuple[str, int], int] = Counter(
        [(d.name, int(d.mechanism)) for d in request.deletions]
        + [(u.name, int(u.mechanism)) for u in request.upsertions]
    )
    errors: dict[str, tuple[ErrorCode, str]] = {}
    for name, mechanism in seen:
        if seen[(name, mechanism)] > 1 and name not in errors:
            errors[name] = (
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
    changed = False
    for deletion in request.deletions:
        if deletion.name in errors:
            continue
        error = _check(deletion.name, int(deletion.mechanism))
        if error is not None:
            errors[deletion.name] = error
            continue
        if not store.delete(deletion.name, ScramMechanism(int(deletion.mechanism))):
            errors[deletion.name] = (
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
        else:
            changed = True
    for upsertion in request.upsertions:
        if upsertion.name in errors:
            continue
        error = _check(upsertion.name, int(upsertion.mechanism))
        if error is not None:
            errors[upsertion.name] = error
            continue
        try:
            credential = credential_from_salted(
                ScramMechanism(int(upsertion.mechanism)),
                bytes(upsertion.salt),
                bytes(upsertion.salted_password),
                int(upsertion.iterations),
            )
        except CredentialError as refused:
            errors[upsertion.name] = (ErrorCode[refused.error], str(refused))
            continue
        store.upsert(upsertion.name, credential)
        changed = True
    if changed:
        security.save()
    results = tuple(
        ctx.build(
            "AlterUserScramCredentialsResult",
            user=user,
            error_code=errors.get(user, (ErrorCode.none, None))[0],
            error_message=errors.get(user, (ErrorCode.none, None))[1],
        )
        for user in dict.fromkeys(users)
    )
    return ctx.build(throttle_time=NO_THROTTLE, results=results)


def _check(user: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not user:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in (1, 2):
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


HANDLERS = {
    DESCRIBE_USER_SCRAM_CREDENTIALS: (VersionRange(0, 0), handle_describe_user_scram_credentials),
    ALTER_USER_SCRAM_CREDENTIALS: (VersionRange(0, 0), handle_alter_user_scram_credentials),
}
