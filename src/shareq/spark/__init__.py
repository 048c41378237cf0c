"""PySpark connector: share groups as a Structured Streaming source, topics as batch source and sink.

    from shareq.spark import register
    register(spark)
    df = (spark.readStream.format("shareq")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "orders")
          .option("group.id", "order-pipeline")
          .load())

Built on PySpark's Python Data Source API and shareq's own client; it speaks to shareq and to
Kafka 4.2+ brokers alike. Delivery is at least once (see :mod:`shareq.spark.stream`); failed rows
can be released or rejected with :func:`acknowledge_failed` (see :mod:`shareq.spark.acks`).
"""

from __future__ import annotations

from typing import Any

from .acks import AckType, acknowledge_failed
from .source import ShareqDataSource


def register(spark: Any) -> None:
    """Register format ``"shareq"`` with a SparkSession."""
    spark.dataSource.register(ShareqDataSource)


__all__ = ["AckType", "ShareqDataSource", "acknowledge_failed", "register"]
