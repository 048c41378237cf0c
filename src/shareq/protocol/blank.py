"""Entities of any kio class with every required field at a neutral value.

The authorizer answers a refused request with a blank response of its version (the error code in
the top-level ``error_code``), and the frame fuzzer starts from blank and sample requests.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

ZERO_UUID = uuid.UUID(int=0)
_PLAIN: dict[Any, Any] = {str: "", bytes: b"", bool: False, float: 0.0, uuid.UUID: ZERO_UUID}
_PHANTOM_ZEROS: tuple[Any, ...] = (0, datetime.timedelta(0), "", b"")
_PHANTOM_SAMPLES: tuple[Any, ...] = (1, datetime.timedelta(milliseconds=1), "x", b"x")


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def blank(cls: type[Any], *, error_code: ErrorCode = ErrorCode.none, fill: bool = False) -> Any:
    """An instance of ``cls``: ``error_code`` where a field of that name is, defaults where the
    schema has them, zero / empty / null elsewhere. ``fill``: each array holds one filled item and
    strings are ``"x"`` (a sample request with some depth to it, for fuzzing)."""
    values: dict[str, Any] = {}
    hints = _hints(cls)
    for field in dataclasses.fields(cls):
        if field.name == "error_code":
            values[field.name] = error_code
            continue
        has_default = (
            field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
        )
        if has_default and not fill:
            continue
        values[field.name] = _value(hints[field.name], error_code, fill)
    return cls(**values)


def _value(hint: Any, error_code: ErrorCode, fill: bool) -> Any:
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if type(None) in args:
        if not fill:
            return None
        hint = next(a for a in args if a is not type(None))
        args, origin = typing.get_args(hint), typing.get_origin(hint)
    if origin is tuple:
        if not fill:
            return ()
        return (_value(args[0], error_code, fill),)
    if dataclasses.is_dataclass(hint):
        return blank(hint, error_code=error_code, fill=fill)  # type: ignore[arg-type]
    if hint is ErrorCode:
        return ErrorCode.none
    if fill and hint is str:
        return "x"
    if hint in _PLAIN:
        return _PLAIN[hint]
    if getattr(hint, "__name__", "") == "f64":
        return hint(1.0 if fill else 0.0)
    for candidate in (1, datetime.timedelta(milliseconds=1)) if fill else _PHANTOM_ZEROS:
        try:
            return hint(candidate)  # kio's phantom types (i32, i32Timedelta...) parse what they accept
        except (TypeError, ValueError):
            continue
    for candidate in _PHANTOM_ZEROS:
        try:
            return hint(candidate)
        except (TypeError, ValueError):
            continue
    return None
