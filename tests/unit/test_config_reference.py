"""docs/configuration.md is the broker's config table, regenerated (not edited by hand)."""

from __future__ import annotations

from pathlib import Path

from shareq.server.config_reference import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_committed_reference_matches_the_config_table() -> None:
    assert DOC.read_text() == render(), (
        "run: python -m shareq.server.config_reference > docs/configuration.md"
    )


def test_every_setting_has_a_row_with_its_bounds() -> None:
    text = render()
    assert "| `http.port` | int | `(unset)` | 0 .. 65535 | no |" in text
    assert "| `log.retention.ms` |" in text and "| dynamic |" in text
