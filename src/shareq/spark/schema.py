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


@dataclass(frozen=True, slots=True, kw_only=True)
class Columns:
    """Decoded records of one partition as columns: Arrow arrays where bytes are sliced out of the
    fetched buffer, numpy arrays for the numbers."""

    keys: Any
    values: Any
    offsets: Any
    timestamps_ms: Any
    timestamp_types: Any
    delivery_counts: Any | None
    headers: Any | None = None


class ArrowBuilder:
    """Accumulates decoded columns of one topic-partition and emits Arrow record batches."""

    def __init__(self, schema: StructType, *, topic: str, partition: int, batch_rows: int = 8192) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self._schema = schema
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.has_headers = "headers" in schema.fieldNames()
        self._topic = topic
        self._partition = partition
        self._batch_rows = batch_rows
        self._chunks: list[Columns] = []
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    @property
    def full(self) -> bool:
        return self._rows >= self._batch_rows

    def add(self, columns: Columns) -> None:
        self._chunks.append(columns)
        self._rows += len(columns.offsets)

    def flush(self) -> Any:
        """The accumulated rows as one ``pyarrow.RecordBatch`` (then starts empty)."""
        import numpy as np
        import pyarrow as pa

        chunks, self._chunks = self._chunks, []
        n, self._rows = self._rows, 0
        sch = self.arrow_schema

        def joined(name: str) -> Any:
            parts = [getattr(c, name) for c in chunks]
            return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)

        def numbers(name: str, arrow_type: Any, scale: int = 1) -> Any:
            parts = [getattr(c, name) for c in chunks]
            values = parts[0] if len(parts) == 1 else np.concatenate(parts)
            return pa.array(values * scale if scale != 1 else values, type=arrow_type)

        if not chunks:
            return pa.RecordBatch.from_pylist([], schema=sch)
        counts_type = sch.field("deliveryCount").type
        arrays = [
            joined("keys"),
            joined("values"),
            pa.repeat(pa.scalar(self._topic, sch.field("topic").type), n),
            pa.repeat(pa.scalar(self._partition, sch.field("partition").type), n),
            numbers("offsets", sch.field("offset").type),
            numbers("timestamps_ms", sch.field("timestamp").type, 1000),
            numbers("timestamp_types", sch.field("timestampType").type),
            pa.nulls(n, counts_type)
            if chunks[0].delivery_counts is None
            else numbers("delivery_counts", counts_type),
        ]
        if self.has_headers:
            arrays.append(joined("headers"))
        return pa.RecordBatch.from_arrays(arrays, schema=sch)


def column(batch: Any, name: str) -> Sequence[Any] | None:
    """A column of an Arrow batch as a Python list, or None if the batch has no such column."""
    if name not in batch.schema.names:
        return None
    values: list[Any] = batch.column(batch.schema.get_field_index(name)).to_pylist()
    return values
