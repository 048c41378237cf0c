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


def test_every_setting_is_known_whatever_was_imported() -> None:
    """The settings table is whole once shareq.config is imported: a fresh interpreter that imports
    nothing of the server accepts the log cleaner's, the internal topics' and the topic configs'
    broker settings, and knows as many settings as the whole broker does."""
    import subprocess
    import sys

    from shareq.config import SETTINGS
    from shareq.server import Broker  # noqa: F401  (the whole broker imported here)

    probe = (
        "from shareq.config import SETTINGS, BrokerConfig\n"
        "BrokerConfig.from_mapping({'log.cleaner.enable': 'false', 'offsets.topic.segment.bytes': '2097152',"
        " 'log.cleaner.delete.retention.ms': '1000', 'log.retention.ms': '1000'})\n"
        "import sys\n"
        "print(len(SETTINGS), 'shareq.server' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(len(SETTINGS)), "False"]
