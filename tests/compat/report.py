"""Render the differential test results (``pytest tests/compat --compat-results FILE``) as Markdown.

    python tests/compat/report.py build/compat-results.json > docs/compatibility.md

Each test runs against Kafka 4.4 and shareq; the table shows both outcomes and, where shareq is marked to
differ, the reason given in the test. The "what it checks" column is the test's docstring.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ("kafka", "shareq")
SHOWN = {
    "passed": "pass",
    "failed": "**FAIL**",
    "error": "**ERROR**",
    "xfailed": "differs (xfail)",
    "xpassed": "**XPASS**",
    "skipped": "skipped",
}


def docstrings(path: Path) -> dict[str, str]:
    """First paragraph of each test function's docstring, on one line."""
    tree = ast.parse(path.read_text())
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            doc = ast.get_docstring(node) or ""
            out[node.name] = " ".join(doc.split("\n\n")[0].split())
    return out


def split(nodeid: str) -> tuple[str, str, str]:
    """``tests/compat/f.py::test_x[kafka-2]`` -> (``tests/compat/f.py::test_x[2]``, ``kafka``, ``test_x``)."""
    path, _, name = nodeid.partition("::")
    match = re.fullmatch(r"(\w+)(?:\[(.*)\])?", name)
    assert match is not None, nodeid
    func, params = match.group(1), (match.group(2).split("-") if match.group(2) else [])
    # a test of a Kafka cluster of its own (failover) runs against Kafka only
    server = next((p for p in params if p in SERVERS), "kafka")
    rest = [p for p in params if p != server]
    base = f"{path}::{func}" + (f"[{'-'.join(rest)}]" if rest else "")
    return base, server, func


def render(results: list[dict[str, str]]) -> str:
    rows: dict[str, dict[str, dict[str, str]]] = {}
    funcs: dict[str, tuple[str, str]] = {}
    for r in results:
        base, server, func = split(r["nodeid"])
        rows.setdefault(base, {})[server] = r
        funcs[base] = (r["nodeid"].partition("::")[0], func)
    docs: dict[str, dict[str, str]] = {}
    counts = {s: Counter(rows[b][s]["outcome"] for b in rows if s in rows[b]) for s in SERVERS}
    lines = [
        "# Compatibility with Apache Kafka 4.4",
        "",
        "Generated from the differential tests in `tests/compat/` — do not edit by hand. Regenerate with",
        "`make compat-report`. Every test runs the same scenario through the same clients",
        "(confluent-kafka/librdkafka, kafka-python, Kafka's Java share consumer, shareq's admin client",
        "for the share admin APIs, raw kio requests for bad ones) against a one-node Kafka 4.4 (KRaft;",
        "three nodes where noted) and against shareq, and asserts the same observation.",
        "Where shareq still differs the test is a strict expected failure on shareq, with its reason.",
        "",
        "| server | " + " | ".join(sorted({o for c in counts.values() for o in c})) + " |",
        "|---|" + "---|" * len({o for c in counts.values() for o in c}),
    ]
    outcomes = sorted({o for c in counts.values() for o in c})
    for s in SERVERS:
        lines.append(f"| {s} | " + " | ".join(str(counts[s].get(o, 0)) for o in outcomes) + " |")
    lines += [
        "",
        "| test | what it checks | Kafka 4.4 | shareq | why shareq differs |",
        "|---|---|---|---|---|",
    ]
    current_file = None
    for base in sorted(rows):
        path, func = funcs[base]
        if path != current_file:
            current_file = path
            lines.append(f"| **{Path(path).name}** | | | | |")
        if path not in docs:
            docs[path] = docstrings(ROOT / path)
        by = rows[base]
        cells = [SHOWN.get(by[s]["outcome"], by[s]["outcome"]) if s in by else "not run" for s in SERVERS]
        reason = by.get("shareq", {}).get("reason", "")
        name = base.partition("::")[2]
        what = docs[path].get(func, "").replace("|", "\\|")
        why = reason.replace("|", "\\|")
        lines.append(f"| `{name}` | {what} | {cells[0]} | {cells[1]} | {why} |")
    reasons = Counter(by["shareq"]["reason"] for by in rows.values() if "reason" in by.get("shareq", {}))
    if reasons:
        lines += ["", "## Where shareq differs today", "", "| reason | tests |", "|---|---|"]
        lines += ["| " + r.replace("|", "\\|") + f" | {n} |" for r, n in sorted(reasons.items())]
    return "\n".join(lines) + "\n"


def main() -> None:
    results = json.loads(Path(sys.argv[1]).read_text())
    sys.stdout.write(render(results))


if __name__ == "__main__":
    main()
