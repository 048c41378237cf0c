"""Version ranges of the apis: ``VersionRange`` (what a handler serves of its api) and the version
an ApiVersions request newer than any served is answered with.

Which apis and versions the broker advertises is exactly what its handler table registers
(``shareq.server.handlers``); the api key numbers are in ``api_keys``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class VersionRange:
    min_version: int
    max_version: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version


API_VERSIONS_FALLBACK_VERSION = 0
"""The version of the reply to an ApiVersions request newer than any listed here."""
