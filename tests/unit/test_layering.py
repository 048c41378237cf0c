"""The sans-I/O core imports no asyncio, sockets, threads or clocks (the aioquic rule)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "shareq"
PURE_PACKAGES = ("protocol", "share", "coordinators", "quota", "security")
FORBIDDEN = {"asyncio", "socket", "threading", "time", "selectors", "concurrent"}


def _pure_modules() -> list[Path]:
    return sorted(p for pkg in PURE_PACKAGES for p in (SRC / pkg).rglob("*.py"))


@pytest.mark.parametrize("path", _pure_modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_core_module_does_no_io(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not (imported & FORBIDDEN), f"{path.name} imports {sorted(imported & FORBIDDEN)}"


def test_there_are_core_modules() -> None:
    assert _pure_modules(), "the layering rule must check something"


def _seam_modules() -> list[Path]:
    return sorted(p for pkg in ("server/handlers", "server/share") for p in (SRC / pkg).rglob("*.py"))


@pytest.mark.parametrize("path", _seam_modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_handlers_and_share_services_do_not_import_the_broker(path: Path) -> None:
    """Handlers see the broker through ``context.BrokerView`` and the share services through
    ``ShareHost``: neither imports ``server/broker.py``, not even for type checking."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            absolute = node.module if node.level == 0 else None
            relative = node.module if node.level > 0 else None
            assert absolute != "shareq.server.broker", f"{path.name}:{node.lineno} imports the broker"
            assert relative != "broker", f"{path.name}:{node.lineno} imports the broker"
        if isinstance(node, ast.Import):
            assert all(a.name != "shareq.server.broker" for a in node.names), path.name
