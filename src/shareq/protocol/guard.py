"""A length guard run before kio's native reader.

kio's reader allocates an array for the element count a peer claims before reading a single
element; a four-byte count of two billion makes it abort the whole process on a failed
allocation. Nothing a client sends may stop the server, so each request body is first walked
here, compiled once per class from kio's own field metadata: every string, bytes, records and
array length must fit in the bytes that remain. Only lengths are checked; values are not built.
The same walk drops tagged fields unknown to this version, which the protocol says to skip and
kio refuses.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)

from .errors import MalformedRequestError
from .header import read_uvarint
from .varint import write_uvarint

Edits = list[tuple[int, int, bytes]]
"""``(start, end, replacement)`` spans: tagged-field sections rewritten without unknown tags."""
Check = Callable[[bytes, int, int, Edits], int]
"""``check(buf, pos, end, edits) -> new pos``; raises ``MalformedRequestError`` past ``end``."""

_FIXED_SIZES = {
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float64": 8,
    "bool": 1,
    "uuid": 16,
    "error_code": 2,
    "timedelta_i32": 4,
    "timedelta_i64": 8,
    "datetime_i64": 8,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_CACHE: dict[tuple[type[Any], bool], Check] = {}


def check_body(cls: type[Any], buf: bytes, pos: int) -> bytes:
    """Check every length in the body of ``cls``; return the payload to decode.

    Raises ``MalformedRequestError`` if a length overruns the frame. Tagged fields this version
    does not know are legal (the protocol says to skip them) but kio rejects them, so they are cut
    out here and a rewritten payload is returned; normally ``buf`` comes back unchanged.
    """
    edits: Edits = []
    entity_check(cls)(buf, pos, len(buf), edits)
    if not edits:
        return buf
    parts: list[bytes] = []
    cursor = 0
    for start, stop, replacement in edits:
        parts.append(buf[cursor:start])
        parts.append(replacement)
        cursor = stop
    parts.append(buf[cursor:])
    return b"".join(parts)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    write_uvarint(out, value)
    return bytes(out)


def entity_check(cls: type[Any], nullable: bool = False) -> Check:
    key = (cls, nullable)
    check = _CACHE.get(key)
    if check is None:
        check = _CACHE[key] = _compile_entity(cls, nullable)
    return check


def reference_check(cls: type[Any]) -> Check:
    """The walk of ``cls`` without the fast paths (uncached): what the tests hold them against."""
    return _compile_entity(cls, False, fast=False)


def _need(pos: int, size: int, end: int) -> int:
    if size < 0 or pos + size > end:
        raise MalformedRequestError(f"a field of {size} bytes at {pos} overruns the frame ({end} bytes)")
    return pos + size


def _compile_entity(cls: type[Any], nullable: bool, *, fast: bool = True) -> Check:
    flexible = bool(cls.__flexible__)
    steps: list[Check] = []
    tagged: dict[int, Check] = {}
    for field in dataclasses.fields(cls):
        tag = field.metadata.get("tag")
        if tag is None:
            steps.append(_compile_field(field, flexible, is_tag=False, fast=fast))
        else:
            tagged[int(tag)] = _compile_field(field, flexible, is_tag=True, fast=fast)

    def check(buf: bytes, pos: int, end: int, edits: Edits) -> int:
        if nullable:
            _need(pos, 1, end)
            marker = buf[pos]
            pos += 1
            if marker == 0xFF:
                return pos
        for step in steps:
            pos = step(buf, pos, end, edits)
        if flexible:
            section_start = pos
            count, pos = read_uvarint(buf, pos)
            kept: list[bytes] = []
            dropped = False
            for _ in range(count):
                field_start = pos
                tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                tag_end = _need(pos, size, end)
                known = tagged.get(tag)
                if known is None:
                    dropped = True
                else:
                    known(buf, pos, tag_end, [])
                    kept.append(buf[field_start:tag_end])
                pos = tag_end
            if dropped:
                edits.append((section_start, pos, _uvarint(len(kept)) + b"".join(kept)))
        return pos

    return check


def _compile_field(field: dataclasses.Field[Any], flexible: bool, *, is_tag: bool, fast: bool) -> Check:
    field_class = classify_field(field)
    optional = False if is_tag else is_optional(field)
    element: Check
    match field_class:
        case PrimitiveField():
            element = _compile_primitive(
                get_schema_field_type(field), flexible, nullable=optional, name=field.name
            )
        case PrimitiveTupleField():
            element = _compile_primitive(
                get_schema_field_type(field), flexible, nullable=False, name=field.name
            )
        case EntityField(entity_type):
            element = (
                entity_check(entity_type, nullable=optional)
                if fast
                else _compile_entity(entity_type, optional, fast=False)
            )
        case EntityTupleField(entity_type):
            element = entity_check(entity_type) if fast else _compile_entity(entity_type, False, fast=False)
    if not field_class.is_array:
        return element
    generic = _compile_array(field, field_class, element, flexible, optional)
    if fast and flexible and isinstance(field_class, EntityTupleField) and _is_ack_batch(field_class.type_):
        return _ack_batches_check(generic)
    return generic


def _compile_array(
    field: dataclasses.Field[Any], field_class: Any, element: Check, flexible: bool, optional: bool
) -> Check:
    fixed = (
        _FIXED_SIZES.get(get_schema_field_type(field), 1)
        if isinstance(field_class, PrimitiveTupleField)
        else 1
    )

    def check_array(buf: bytes, pos: int, end: int, edits: Edits) -> int:
        if flexible:
            count, pos = read_uvarint(buf, pos)
            count -= 1
        else:
            _need(pos, 4, end)
            count = _I32.unpack_from(buf, pos)[0]
            pos += 4
        if count < 0:
            if count < -1 or not optional:
                raise MalformedRequestError(f"non-nullable array {field.name} was serialized as null")
            return pos
        _need(pos, count * fixed, end)
        for _ in range(count):
            pos = element(buf, pos, end, edits)
        return pos

    return check_array


def _is_ack_batch(cls: type[Any]) -> bool:
    """ShareFetch's and ShareAcknowledge's AcknowledgementBatch: first and last offset, a compact
    int8 array of types, tagged fields (whichever it declares: shareq's ShareAcknowledge adds its
    release delay, and the fast walk hands any batch carrying a tagged field to the generic one)."""
    names = [f.name for f in dataclasses.fields(cls) if "tag" not in f.metadata]
    return cls.__name__ == "AcknowledgementBatch" and names == [
        "first_offset",
        "last_offset",
        "acknowledge_types",
    ]


def _ack_batches_check(generic: Check) -> Check:
    """The AcknowledgementBatches array, walked without a call per field.

    Clients split a poll's acknowledgements where the type changes, so a request may carry
    hundreds of batches. The usual batch (under 127 types, no tagged fields) is stepped over in
    one loop; anything else (a null or long array, tagged fields, a short frame) goes to the
    generic check from the array's start, which decides exactly as it would have alone."""

    def check_ack_batches(buf: bytes, pos: int, end: int, edits: Edits) -> int:
        count, p = read_uvarint(buf, pos)
        count -= 1
        if count < 0:
            return generic(buf, pos, end, edits)
        for _ in range(count):
            p += 16  # first_offset, last_offset
            if p >= end:
                return generic(buf, pos, end, edits)
            n = buf[p]  # the types' compact length, one byte: n - 1 types follow
            if n == 0 or n >= 0x80:
                return generic(buf, pos, end, edits)
            p += n
            if p >= end or buf[p]:  # no tagged fields
                return generic(buf, pos, end, edits)
            p += 1
        return p

    return check_ack_batches


def _compile_primitive(kafka_type: str, flexible: bool, *, nullable: bool = True, name: str = "") -> Check:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        fixed_size = size

        def check_fixed(buf: bytes, pos: int, end: int, edits: Edits) -> int:
            return _need(pos, fixed_size, end)

        return check_fixed
    if kafka_type not in ("string", "bytes", "records"):
        raise MalformedRequestError(f"no length guard for kafka type {kafka_type!r}")
    if flexible:

        def check_compact(buf: bytes, pos: int, end: int, edits: Edits) -> int:
            length, pos = read_uvarint(buf, pos)
            if length == 0:
                if not nullable:
                    raise MalformedRequestError(f"non-nullable field {name} was serialized as null")
                return pos
            return _need(pos, length - 1, end)

        return check_compact
    prefix = _I16 if kafka_type == "string" else _I32

    def check_legacy(buf: bytes, pos: int, end: int, edits: Edits) -> int:
        _need(pos, prefix.size, end)
        length = prefix.unpack_from(buf, pos)[0]
        pos += prefix.size
        if length < 0:
            if length < -1 or not nullable:
                raise MalformedRequestError(f"non-nullable field {name} was serialized as null")
            return pos
        return _need(pos, length, end)

    return check_legacy
