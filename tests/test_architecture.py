"""Layering rules: the domain core stays free of Dagster and of network I/O."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "eval_pipeline" / "core"
FORBIDDEN = (
    "dagster",
    "anthropic",
    "voyageai",
    "httpx",
    "eval_pipeline.providers",
    "eval_pipeline.defs",
)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_source_imports_no_dagster_or_network_libraries() -> None:
    offenders = {
        f"{p.name}: {name}"
        for p in CORE.glob("*.py")
        for name in _imports(p)
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
    }
    assert not offenders


def test_importing_all_of_core_loads_no_dagster() -> None:
    modules = [f"eval_pipeline.core.{p.stem}" for p in CORE.glob("*.py") if p.stem != "__init__"]
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules) + "print('dagster' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
