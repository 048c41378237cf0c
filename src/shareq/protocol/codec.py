"""Request/response codecs on kio, cached once per ``(api_key, version)``.

kio's schema lookups are not cached (a few microseconds each); a broker decodes thousands of
requests a second, so the class, reader and writer are resolved once and kept here.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from .errors import MalformedRequestError
from .guard import check_body

Reader = Callable[[bytes, int], tuple[Any, int]]
Writer = Callable[[Any, Any], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Codec:
    """Everything needed to decode one request version and encode its response."""

    api_key: int
    version: int
    request_class: type[Any]
    reader: Reader
    response_class: type[Any]
    writer: Writer
    request_header_version: int
    response_header_version: int

    @property
    def response_module(self) -> ModuleType:
        """The kio module holding the nested response classes of this version."""
        return sys.modules[self.response_class.__module__]

    def decode(self, payload: bytes, offset: int) -> Any:
        """Decode a request body; trailing bytes are tolerated (librdkafka sends some after Metadata)."""
        payload = check_body(self.request_class, payload, offset)
        try:
            entity, _ = self.reader(payload, offset)
        except Exception as error:  # kio raises ValueError, KeyError (unknown tag), IndexError...
            raise MalformedRequestError(
                f"cannot decode api {self.api_key} v{self.version} body: {error!r}"
            ) from error
        return entity

    def encode_body(self, response: Any) -> bytes:
        out = io.BytesIO()
        self.writer(out, response)
        return out.getvalue()


def _local_schemas() -> dict[tuple[int, int], tuple[type[Any], type[Any]]]:
    from .schema import LOCAL_SCHEMAS

    return LOCAL_SCHEMAS


@functools.cache
def codec(api_key: int, version: int) -> Codec:
    """The codec for ``(api_key, version)``; raises kio's index errors if kio does not know it."""
    local = _local_schemas().get((api_key, version))
    if local is not None:
        request_class, response_class = local
    else:
        request_class = load_request_schema(api_key, version)
        response_class = load_response_schema(api_key, version)
    return Codec(
        api_key=api_key,
        version=version,
        request_class=request_class,
        reader=entity_reader(request_class),
        response_class=response_class,
        writer=entity_writer(response_class),
        request_header_version=int(request_class.__header_schema__.__version__),
        response_header_version=int(response_class.__header_schema__.__version__),
    )


_FIELD_NAMES: dict[type[Any], frozenset[str]] = {}


def field_names(cls: type[Any]) -> frozenset[str]:
    """The field names of a kio entity class (cached: computed once per class)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


def build(cls: type[Any], **values: Any) -> Any:
    """Construct a kio entity from ``values``, dropping those this version does not have.

    Handlers describe a response once and let each version keep the fields it knows, which is
    how one handler serves a range of versions.
    """
    names = field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})
