"""The one ``DataSource`` class behind format ``"shareq"``: batch read, stream read, batch write,
stream write."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .batch import BatchReader
from .options import BatchSourceOptions, OptionError, ShareSourceOptions, SinkOptions, _bool
from .schema import source_schema
from .sink import TopicStreamWriter, TopicWriter, check_schema
from .stream import ShareStreamReader


class ShareqDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("shareq")``."""

    @classmethod
    def name(cls) -> str:
        return "shareq"

    def schema(self) -> StructType:
        return source_schema(_bool(self.options, "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(BatchSourceOptions.parse(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return ShareStreamReader(ShareSourceOptions.parse(self.options), schema)

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
