"""The one ``DataSource`` class behind format ``"shareq"``: batch read, stream read, batch write,
stream write."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from shareq.protocol import api_keys

from .batch import BatchReader
from .cluster import Cluster
from .options import (
    BATCH_READ,
    SHARE_READ,
    BatchSourceOptions,
    OptionError,
    ShareSourceOptions,
    SinkOptions,
    _bool,
    check_options,
)
from .schema import source_schema
from .sink import TopicStreamWriter, TopicWriter, check_schema
from .stream import ShareStreamReader


def _check_read_options(options: Mapping[str, str]) -> None:
    errors: list[OptionError] = []
    for role in (SHARE_READ, BATCH_READ):
        try:
            check_options(options, role)
        except OptionError as exc:
            errors.append(exc)
        else:
            return
    share = any(key.lower() in ("group.id", "kafka.group.id") for key in options)
    raise errors[0 if share else 1]


class ShareqDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("shareq")``."""

    @classmethod
    def name(cls) -> str:
        return "shareq"

    def schema(self) -> StructType:
        # Called at load(), before Spark says whether a batch or a streaming read follows: options
        # neither source takes are refused here, the rest when the reader is made.
        _check_read_options(self.options)
        return source_schema(_bool(self.options, "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(BatchSourceOptions.parse(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = ShareSourceOptions.parse(self.options)
        needed = [api_keys.SHARE_GROUP_HEARTBEAT, api_keys.SHARE_FETCH, api_keys.SHARE_ACKNOWLEDGE]
        if options.exactly_once:  # its sink claims the batches with TxnShareAcknowledge
            needed.append(api_keys.TXN_SHARE_ACKNOWLEDGE)
        with Cluster(options.connect) as cluster:
            cluster.require(f"the shareq source reads share group {options.group_id}", *needed)
        return ShareStreamReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = SinkOptions.parse(self.options)
        check_schema(schema, options)
        if overwrite:
            raise OptionError("a topic cannot be overwritten; use mode('append')")
        return TopicWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = SinkOptions.parse(self.options)
        check_schema(schema, options)
        if options.exactly_once:
            from .eos import ExactlyOnceStreamWriter

            return ExactlyOnceStreamWriter(options)
        return TopicStreamWriter(options)
