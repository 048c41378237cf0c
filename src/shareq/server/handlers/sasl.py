"""SaslHandshake and SaslAuthenticate: thin shells over the connection's ``SaslState``.

Registered only when a listener speaks SASL. SaslHandshake v0 (raw tokens after the handshake)
is not offered; every client in use sends v1 and wraps tokens in SaslAuthenticate.
"""

from __future__ import annotations

import datetime
import logging
import time
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange
from shareq.protocol.api_keys import SASL_AUTHENTICATE, SASL_HANDSHAKE

from ..context import RequestContext

log = logging.getLogger("shareq.server.sasl")


def handle_sasl_handshake(request: Any, ctx: RequestContext) -> Any:
    state = ctx.session.sasl
    if state is None:  # a SASL request on a listener that does not speak SASL
        return ctx.build(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    error = state.handshake(request.mechanism)
    code = ErrorCode.none if error is None else ErrorCode[error]
    return ctx.build(error_code=code, mechanisms=state.enabled)


def handle_sasl_authenticate(request: Any, ctx: RequestContext) -> Any:
    state = ctx.session.sasl
    if state is None:
        return ctx.build(
            error_code=ErrorCode.illegal_sasl_state,
            error_message="this listener does not use SASL",
            auth_bytes=b"",
        )
    step = state.authenticate(bytes(request.auth_bytes), time.time_ns() // 1_000_000)
    if step.error is None:
        if state.principal is not None and ctx.session.principal != state.principal:
            ctx.session.principal = state.principal
            log.info("%s authenticated as %s with %s", ctx.peer, state.principal, state.mechanism)
    else:
        log.info("%s failed SASL authentication: %s", ctx.peer, step.message)
    return ctx.build(
        error_code=ErrorCode.none if step.error is None else ErrorCode[step.error],
        error_message=step.message,
        auth_bytes=step.auth_bytes,
        session_lifetime=datetime.timedelta(milliseconds=step.session_lifetime_ms),
    )


HANDLERS = {
    SASL_HANDSHAKE: (VersionRange(1, 1), handle_sasl_handshake),
    SASL_AUTHENTICATE: (VersionRange(0, 2), handle_sasl_authenticate),
}
