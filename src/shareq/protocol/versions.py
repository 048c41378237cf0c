"""The api versions this broker implements, and only those (clients trust the advertisement).

librdkafka refuses share fetches unless Produce v3+ and Fetch v4+ appear here, and calls any
telemetry api it sees advertised, so those are deliberately absent until implemented.
"""

from __future__ import annotations

from dataclasses import dataclass

from .api_keys import (
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    FETCH,
    FIND_COORDINATOR,
    INCREMENTAL_ALTER_CONFIGS,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
)


@dataclass(frozen=True, slots=True)
class VersionRange:
    min_version: int
    max_version: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version


API_VERSIONS_FALLBACK_VERSION = 0
"""The version of the reply to an ApiVersions request newer than any listed here."""

BASE_VERSIONS: dict[int, VersionRange] = {
    PRODUCE: VersionRange(3, 13),
    FETCH: VersionRange(4, 17),
    LIST_OFFSETS: VersionRange(1, 11),
    METADATA: VersionRange(4, 13),
    FIND_COORDINATOR: VersionRange(0, 6),
    API_VERSIONS: VersionRange(0, 4),
    CREATE_TOPICS: VersionRange(2, 7),
    DELETE_TOPICS: VersionRange(1, 6),
    INIT_PRODUCER_ID: VersionRange(0, 5),
    DESCRIBE_CONFIGS: VersionRange(1, 4),
    INCREMENTAL_ALTER_CONFIGS: VersionRange(0, 1),
}
