"""The source's row shape, and building Arrow record batches of it.

Rows leave ``read()`` as ``pyarrow.RecordBatch`` (several times faster than tuples through the
Python data source API); the Arrow schema is derived from the Spark schema exactly as Spark derives
it, because Spark rejects a batch whose schema differs even in nullability.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType(), False), StructField("value", BinaryType(), True)]),
    False,
)


def source_schema(include_headers: bool) -> StructType:
    """Like Spark's Kafka source, plus ``deliveryCount`` (null for the batch source)."""
    fields = [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
        StructField("deliveryCount", IntegerType(), True),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE, True))
    return StructType(fields)


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchedRecord:
    """One record as read back from the log, in the shape the source emits."""

    offset: int
    timestamp_ms: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class ArrowBuilder:
    """Accumulates records of one topic-partition and emits Arrow record batches."""

    def __init__(self, schema: StructType, *, topic: str, partition: int, batch_rows: int = 8192) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self._schema = schema
        self._arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self._headers = "headers" in schema.fieldNames()
        self._topic = topic
        self._partition = partition
        self._batch_rows = batch_rows
        self._reset()

    def _reset(self) -> None:
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._offsets: list[int] = []
        self._timestamps: list[int] = []
        self._ts_types: list[int] = []
        self._counts: list[int | None] = []
        self._header_rows: list[list[dict[str, Any]]] = []

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self._batch_rows

    def append(
        self,
        offset: int,
        timestamp_ms: int,
        timestamp_type: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        delivery_count: int | None,
    ) -> None:
        self._keys.append(key)
        self._values.append(value)
        self._offsets.append(offset)
        self._timestamps.append(timestamp_ms * 1000)
        self._ts_types.append(timestamp_type)
        self._counts.append(delivery_count)
        if self._headers:
            self._header_rows.append([{"key": k, "value": v} for k, v in headers])

    def flush(self) -> Any:
        """The accumulated rows as one ``pyarrow.RecordBatch`` (then starts empty)."""
        import pyarrow as pa

        n = len(self._offsets)
        sch = self._arrow_schema
        arrays = [
            pa.array(self._keys, type=sch.field("key").type),
            pa.array(self._values, type=sch.field("value").type),
            pa.array([self._topic] * n, type=sch.field("topic").type),
            pa.array([self._partition] * n, type=sch.field("partition").type),
            pa.array(self._offsets, type=sch.field("offset").type),
            pa.array(self._timestamps, type=pa.int64()).cast(sch.field("timestamp").type),
            pa.array(self._ts_types, type=sch.field("timestampType").type),
            pa.array(self._counts, type=sch.field("deliveryCount").type),
        ]
        if self._headers:
            arrays.append(pa.array(self._header_rows, type=sch.field("headers").type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=sch)
        self._reset()
        return batch


def column(batch: Any, name: str) -> Sequence[Any] | None:
    """A column of an Arrow batch as a Python list, or None if the batch has no such column."""
    if name not in batch.schema.names:
        return None
    values: list[Any] = batch.column(batch.schema.get_field_index(name)).to_pylist()
    return values
