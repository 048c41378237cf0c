"""The share engine's seams: helpers take the explicit ``PartitionState``, never ``SharePartition``.

``SharePartition`` keeps the map, the offsets and the persister writes; its helpers (the acquire walk,
the log-start move, the TX_PENDING row, the dead-letter hand-off, the building of state writes)
receive the state object they work on. These tests fail if a module reads another object's private
attribute (``sp._runs``, ``partition._spso``), if a helper imports ``share_partition`` (even for
type checking only), or if the package's imports form a circle again.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SHARE = Path(__file__).resolve().parents[2] / "src" / "shareq" / "share"
ENTRY = "share_partition"


def _modules() -> list[Path]:
    return sorted(SHARE.glob("*.py"))


def _share_imports(tree: ast.AST, *, type_checking: bool) -> set[str]:
    """Modules of ``shareq.share`` that ``tree`` imports (with or without the ``TYPE_CHECKING`` ones)."""
    skip: set[int] = set()
    if not type_checking:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(inner) for inner in ast.walk(node))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("shareq.share"):
            parts = node.module.split(".")
            if len(parts) > 2:
                out.add(parts[2])
            else:  # ``from shareq.share import acquisition as _acq``
                out.update(alias.name for alias in node.names if (SHARE / f"{alias.name}.py").exists())
        elif isinstance(node, ast.Import):
            out.update(
                alias.name.split(".")[2] for alias in node.names if alias.name.startswith("shareq.share.")
            )
    return out


def _private_reads(source: str, name: str) -> list[str]:
    """Reads of a private attribute of anything but ``self``/``cls`` in ``source``."""
    return [
        f"{name}:{node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(ast.parse(source, filename=name))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_module_reads_another_objects_private_attribute(path: Path) -> None:
    reads = _private_reads(path.read_text(), path.name)
    assert not reads, "helpers receive an explicit state object, not another class's privates:\n" + "\n".join(
        reads
    )


def test_the_scan_sees_a_helper_reaching_into_the_partition() -> None:
    source = "def f(sp, partition):\n    self._ok = 1\n    return sp._runs, partition._spso.__class__\n"
    assert _private_reads(source, "m.py") == ["m.py:3: sp._runs", "m.py:3: partition._spso"]


@pytest.mark.parametrize(
    "path", [p for p in _modules() if p.stem not in ("__init__", ENTRY)], ids=lambda p: p.name
)
def test_helpers_do_not_import_share_partition(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    assert ENTRY not in _share_imports(tree, type_checking=True), f"{path.name} imports {ENTRY}"


def test_the_share_package_has_no_import_circle() -> None:
    graph = {
        p.stem: _share_imports(ast.parse(p.read_text()), type_checking=False) - {p.stem}
        for p in _modules()
        if p.stem != "__init__"
    }
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError("import circle: " + " -> ".join([*path[path.index(module) :], module]))
        if module in done:
            return
        for dep in sorted(graph.get(module, ())):
            visit(dep, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert graph.get(ENTRY), "the scan must see the engine's imports"
