"""ApiVersions: the versions advertised are exactly those with a registered handler."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange, api_version_entries
from shareq.protocol.versions import API_VERSIONS

from ..context import RequestContext

NO_THROTTLE = datetime.timedelta(0)


def handle_api_versions(request: Any, ctx: RequestContext) -> Any:
    return ctx.build(
        error_code=ErrorCode.none,
        api_keys=api_version_entries(ctx.codec.response_module, ctx.broker.handlers.versions),
        throttle_time=NO_THROTTLE,
    )


HANDLERS = {API_VERSIONS: (VersionRange(0, 4), handle_api_versions)}
