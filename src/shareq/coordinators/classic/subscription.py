"""The topics in a consumer-protocol subscription (JoinGroup metadata of protocol type ``consumer``).

Only the leading fields are read: ``>h`` version, then an ``>i`` count of ``>h``-length topic
names (the same in every version). Anything unreadable counts as no topics.
"""

from __future__ import annotations

import struct

_H = struct.Struct(">h")
_I = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> frozenset[str]:
    try:
        pos = 2
        (count,) = _I.unpack_from(metadata, pos)
        pos += 4
        if count < 0 or count > len(metadata):
            return frozenset()
        topics = []
        for _ in range(count):
            (n,) = _H.unpack_from(metadata, pos)
            pos += 2
            if n < 0 or pos + n > len(metadata):
                return frozenset()
            topics.append(metadata[pos : pos + n].decode())
            pos += n
        return frozenset(topics)
    except (struct.error, UnicodeDecodeError):
        return frozenset()
