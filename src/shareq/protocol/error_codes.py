"""Mapping exceptions to Kafka error codes, done once at the edge from a table."""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode


def error_code_for(error: BaseException, table: Mapping[type[BaseException], ErrorCode]) -> ErrorCode:
    """The code of the most specific class of ``error`` in ``table``, else UNKNOWN_SERVER_ERROR."""
    for cls in type(error).__mro__:
        code = table.get(cls)
        if code is not None:
            return code
    return ErrorCode.unknown_server_error
