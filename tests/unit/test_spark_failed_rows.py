"""The share source's ``failedRows`` option and shareq's group configs as source options (no Spark)."""

from __future__ import annotations

import pytest

from shareq.spark.acks import AckType
from shareq.spark.options import OptionError, ShareSourceOptions
from shareq.spark.stream import release_failed

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t", "group.id": "g"}


def test_failed_rows_are_rejected_by_default_and_released_on_request() -> None:
    assert not ShareSourceOptions.parse(BASE).release_failed
    options = ShareSourceOptions.parse(
        {**BASE, "failedRows": "release", "shareq.redelivery.backoff.ms": "500"}
    )
    assert options.release_failed
    assert ("shareq.redelivery.backoff.ms", "500") in options.group_configs


def test_bad_values_and_exactly_once_are_refused() -> None:
    with pytest.raises(OptionError, match="failedRows"):
        ShareSourceOptions.parse({**BASE, "failedRows": "drop"})
    with pytest.raises(OptionError, match="exactlyOnce"):
        ShareSourceOptions.parse({**BASE, "failedRows": "release", "exactlyOnce": "true"})


def test_rejections_become_releases_and_nothing_else_changes() -> None:
    acks = [
        ("t", 0, 0, 4, AckType.ACCEPT),
        ("t", 0, 5, 5, AckType.REJECT),
        ("t", 0, 6, 6, AckType.RELEASE),
        ("t", 0, 7, 9, AckType.ACCEPT),
    ]
    assert release_failed(acks) == [
        ("t", 0, 0, 4, AckType.ACCEPT),
        ("t", 0, 5, 5, AckType.RELEASE),
        ("t", 0, 6, 6, AckType.RELEASE),
        ("t", 0, 7, 9, AckType.ACCEPT),
    ]
