"""Layering rules: the domain core stays free of Dagster and of network I/O, and no module of
the package imports itself back through another (an import cycle)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "eval_pipeline"
CORE = PACKAGE / "core"
FORBIDDEN = (
    "dagster",
    "anthropic",
    "voyageai",
    "httpx",
    "eval_pipeline.providers",
    "eval_pipeline.defs",
)


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at any depth (a function-level import still binds the
    two modules), except under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for n in ast.walk(node)
    }
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def test_core_source_imports_no_dagster_or_network_libraries() -> None:
    offenders = {
        f"{_module(p)}: {name}"
        for p in _core_modules()
        for name in _imports(p)
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
    }
    assert not offenders


def test_importing_all_of_core_loads_no_dagster() -> None:
    modules = [_module(p) for p in _core_modules()]
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules) + "print('dagster' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _import_graph() -> dict[str, set[str]]:
    paths = {_module(p): p for p in PACKAGE.rglob("*.py") if "vendor" not in p.parts}
    return {name: {m for m in _imports(path) if m in paths and m != name} for name, path in paths.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle, as the modules along it, or [] when there is none."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def test_no_import_cycle_in_the_package() -> None:
    assert _cycle(_import_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []


# The package's layers, highest first: a layer imports only the layers after it.
LAYERS = ("cli", "orchestration", "defs", "providers", "core")


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "eval_pipeline" and parts[1] in LAYERS else None


def _upward_imports(graph: dict[str, set[str]]) -> set[str]:
    out = set()
    for module, imported in graph.items():
        if (here := _layer(module)) is None:
            continue
        for name in imported:
            there = _layer(name)
            if there is not None and LAYERS.index(there) < LAYERS.index(here):
                out.add(f"{module} -> {name}")
    return out


def test_each_layer_imports_only_the_layers_below_it() -> None:
    # Among them: defs/ imports nothing from orchestration/ or cli/, orchestration/ nothing from cli/.
    assert _upward_imports(_import_graph()) == set()


def test_the_layer_check_finds_an_upward_import() -> None:
    graph = {
        "eval_pipeline.defs.assets": {"eval_pipeline.orchestration.stages"},
        "eval_pipeline.orchestration.stages": {"eval_pipeline.cli.run", "eval_pipeline.defs.graph"},
        "eval_pipeline.cli.run": {"eval_pipeline.orchestration.stages"},
    }
    assert _upward_imports(graph) == {
        "eval_pipeline.defs.assets -> eval_pipeline.orchestration.stages",
        "eval_pipeline.orchestration.stages -> eval_pipeline.cli.run",
    }
