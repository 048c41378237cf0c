"""The api versions this broker implements, and only those (clients trust the advertisement).

librdkafka refuses share fetches unless Produce v3+ and Fetch v4+ appear here, and calls any
telemetry api it sees advertised, so those are deliberately absent until implemented.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class VersionRange:
    min_version: int
    max_version: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version


PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
FIND_COORDINATOR = 10
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
INIT_PRODUCER_ID = 22
DESCRIBE_CONFIGS = 32
INCREMENTAL_ALTER_CONFIGS = 44

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
