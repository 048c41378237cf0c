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
