"""The architecture document lists exactly the api versions the broker advertises."""

from __future__ import annotations

import re
from pathlib import Path

from shareq.protocol.codec import codec
from shareq.server.handlers import default_handlers

DOC = Path(__file__).resolve().parents[2] / "docs" / "ARCHITECTURE.md"
_START = "Implemented versions (advertised):"


def documented_versions() -> dict[str, tuple[int, int]]:
    text = DOC.read_text(encoding="utf-8")
    assert text.count(_START) == 1
    listing = text[text.index(_START) + len(_START) :]
    listing = re.split(r"\.\s", listing, maxsplit=1)[0]  # up to the end of the sentence
    listing = re.sub(r"\([^)]*\)", "", " ".join(listing.split()))  # notes in parentheses
    out: dict[str, tuple[int, int]] = {}
    for item in listing.split(","):
        match = re.fullmatch(r"\s*([A-Za-z]+) (\d+)(?:\u2013(\d+))?\s*", item)
        assert match is not None, f"cannot read {item!r}"
        name, low, high = match.group(1), int(match.group(2)), match.group(3)
        assert name not in out, f"{name} listed twice"
        out[name] = (low, int(high) if high is not None else low)
    return out


def test_implemented_versions_line_matches_the_handler_table() -> None:
    advertised = {
        codec(key, r.max_version).request_class.__name__.removesuffix("Request"): (
            r.min_version,
            r.max_version,
        )
        for key, r in default_handlers().versions.items()
    }
    assert documented_versions() == advertised
