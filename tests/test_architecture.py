"""Layering rules: the domain core stays free of Dagster and of network I/O, its sub-packages
import only those below them (docs/architecture.md), and no module of the package imports itself
back through another (an import cycle)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from functools import cache
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
# The references the IR metrics are checked against: in the dev extra only, so a user's install
# has neither and no module of the package may import them.
TEST_ONLY = ("ir_measures", "pytrec_eval", "cmarkgfm")
# The core's sub-packages, lowest first: each may import only those before it. Top-level core
# modules (fileio, dates, code_version) sit below all of them.
CORE_ORDER = [
    "inputs",
    "expectations",
    "mechanisms",
    "scoring",
    "calibration",
    "diff",
    "verdicts",
    "report",
]


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at any depth (a function-level import still binds the
    two modules), except under `if TYPE_CHECKING:`."""
    names: set[str] = set()
    # One pass that never enters a TYPE_CHECKING block: the graph is parsed from ~200 modules.
    todo: list[ast.AST] = [ast.parse(path.read_text())]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            continue
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        todo.extend(ast.iter_child_nodes(node))
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


def test_no_module_of_the_package_imports_a_test_only_reference() -> None:
    offenders = {
        f"{_module(p)}: {name}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for name in _imports(p)
        if any(name == f or name.startswith(f + ".") for f in TEST_ONLY)
    }
    assert not offenders


def test_importing_all_of_core_loads_no_dagster() -> None:
    modules = [_module(p) for p in _core_modules()]
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules) + "print('dagster' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@cache
def _package_graph() -> dict[str, frozenset[str]]:
    paths = {_module(p): p for p in PACKAGE.rglob("*.py") if "vendor" not in p.parts}
    return {
        name: frozenset(m for m in _imports(path) if m in paths and m != name) for name, path in paths.items()
    }


def _import_graph() -> dict[str, set[str]]:
    """The package's modules and the package modules each imports: parsed once for the file's
    tests (the sources do not change under them), a fresh copy for each to change."""
    return {name: set(imported) for name, imported in _package_graph().items()}


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


def _layer(module: str) -> int | None:
    """The rank of a core module's sub-package in CORE_ORDER; -1 for a top-level core module
    (below every sub-package); None outside the core."""
    parts = module.split(".")
    if parts[:2] != ["eval_pipeline", "core"] or len(parts) < 3:
        return None
    if parts[2] in CORE_ORDER:
        return CORE_ORDER.index(parts[2])
    return -1


def _upward_edges(graph: dict[str, set[str]]) -> list[str]:
    """Imports between core modules that do not point downward: into a later sub-package, or
    from a top-level core module into any sub-package (imports within one sub-package are fine)."""
    edges = []
    for src, targets in graph.items():
        here = _layer(src)
        if here is None:
            continue
        for dst in targets:
            there = _layer(dst)
            if there is None or (there == here and here != -1):
                continue
            if there > here or (here == -1 and there != -1):
                edges.append(f"{src} -> {dst}")
    return sorted(edges)


def test_every_core_sub_package_exists_in_the_order() -> None:
    packages = {p.name for p in CORE.iterdir() if (p / "__init__.py").is_file()}
    assert packages <= set(CORE_ORDER), f"add {sorted(packages - set(CORE_ORDER))} to CORE_ORDER"


def test_core_sub_packages_import_only_downward() -> None:
    assert _upward_edges(_import_graph()) == []


def test_the_layering_check_reports_an_upward_import() -> None:
    graph = {
        "eval_pipeline.core.inputs.kb": {"eval_pipeline.core.scoring.points"},
        "eval_pipeline.core.scoring.points": {"eval_pipeline.core.inputs.kb", "eval_pipeline.core.fileio"},
        "eval_pipeline.core.scoring.aggregate": {"eval_pipeline.core.scoring.points"},
        "eval_pipeline.core.fileio": {"eval_pipeline.core.dates"},
        "eval_pipeline.core.dates": {"eval_pipeline.core.report.markdown"},
        "eval_pipeline.cli.run": {"eval_pipeline.core.report.markdown"},
    }
    assert _upward_edges(graph) == [
        "eval_pipeline.core.dates -> eval_pipeline.core.report.markdown",
        "eval_pipeline.core.inputs.kb -> eval_pipeline.core.scoring.points",
    ]


def test_the_layering_check_reads_a_planted_file(tmp_path: Path) -> None:
    """An upward import written into a real core module's source is found by the same parser."""
    planted = tmp_path / "validation.py"
    source = (CORE / "inputs" / "validation.py").read_text()
    planted.write_text(source + "\nfrom eval_pipeline.core.report.markdown import render_markdown\n")
    graph = _import_graph()
    src = "eval_pipeline.core.inputs.validation"
    before = set(_upward_edges(graph))
    graph[src] = graph[src] | {m for m in _imports(planted) if m in graph}
    assert set(_upward_edges(graph)) - before == {f"{src} -> eval_pipeline.core.report.markdown"}


# The package's layers, highest first: a layer imports only the layers after it.
LAYERS = ("cli", "orchestration", "defs", "runtime", "providers", "core")


def _package_layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "eval_pipeline" and parts[1] in LAYERS else None


def _upward_imports(graph: dict[str, set[str]]) -> set[str]:
    out = set()
    for module, imported in graph.items():
        if (here := _package_layer(module)) is None:
            continue
        for name in imported:
            there = _package_layer(name)
            if there is not None and LAYERS.index(there) < LAYERS.index(here):
                out.add(f"{module} -> {name}")
    return out


def test_each_layer_imports_only_the_layers_below_it() -> None:
    # Among them: defs/ imports nothing from orchestration/ or cli/, orchestration/ nothing from
    # cli/, and what runs under Dagster (runtime/) nothing from the definitions.
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


# The one module that imports Dagster's private modules (`dagster._…`): an upgrade that moves
# one of them is fixed there.
DAGSTER_PRIVATE_ADAPTER = PACKAGE / "runtime" / "dagster_private.py"
_PRIVATE_DAGSTER = re.compile(r"\bdagster\._\w")


def _private_dagster_users() -> list[str]:
    """Every package file whose text names a private Dagster module: an import of any form,
    `importlib.import_module("dagster._…")` or a string a storage config names included."""
    return sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if _PRIVATE_DAGSTER.search(p.read_text(encoding="utf-8"))
    )


def test_only_the_adapter_names_dagsters_private_modules() -> None:
    assert _private_dagster_users() == [str(DAGSTER_PRIVATE_ADAPTER.relative_to(PACKAGE))]


def test_the_private_dagster_check_finds_an_import() -> None:
    assert _PRIVATE_DAGSTER.search("from dagster._core.instance import DagsterInstance")
    assert _PRIVATE_DAGSTER.search('importlib.import_module("dagster._serdes")')
    assert not _PRIVATE_DAGSTER.search("import dagster as dg\ndg.AssetKey('x')")


# Command lines parse their arguments in cli/ (and the emulator's own `__main__`): below it,
# parameters travel as typed data, never as an argparse namespace.
_OWN_COMMAND_LINES = {Path("testing") / "emulator" / "__main__.py"}


def _argument_parsers_below_the_cli(root: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root)
        if where.parts[0] == "cli" or where in _OWN_COMMAND_LINES:
            continue
        if any(name == "argparse" or name.startswith("eval_pipeline.cli") for name in _imports(path)):
            found.append(str(where))
    return found


def test_nothing_below_the_cli_parses_arguments_or_imports_the_cli() -> None:
    assert _argument_parsers_below_the_cli() == []


def test_the_argument_check_finds_argparse_below_the_cli(tmp_path: Path) -> None:
    (tmp_path / "cli").mkdir()
    (tmp_path / "orchestration").mkdir()
    (tmp_path / "cli" / "run.py").write_text("import argparse\n", encoding="utf-8")
    (tmp_path / "orchestration" / "route.py").write_text("import argparse\n", encoding="utf-8")
    (tmp_path / "orchestration" / "late.py").write_text(
        "def f():\n    from eval_pipeline.cli.run import cmd_run\n", encoding="utf-8"
    )
    assert _argument_parsers_below_the_cli(tmp_path) == ["orchestration/late.py", "orchestration/route.py"]


# What makes an evaluation: cli/ reaches it only through the route's one entry point
# (orchestration/evaluation_route.py::evaluate), with one request built from the flags.
_EVALUATING = (
    "eval_pipeline.core.report.conclusion",
    "eval_pipeline.orchestration.execution.run_all",
    "eval_pipeline.orchestration.reevaluation_runs",
    "eval_pipeline.orchestration.stages.run_stage",
    "eval_pipeline.orchestration.parallel",
    "eval_pipeline.providers.factory",
    "eval_pipeline.providers.evaluation_files",
    "eval_pipeline.defs",
)
ENTRY_POINT = "eval_pipeline.orchestration.evaluation_route.evaluate"


def _evaluating_imports_in_the_cli(root: Path = PACKAGE) -> list[str]:
    return sorted(
        f"{path.relative_to(root)}: {name}"
        for path in (root / "cli").rglob("*.py")
        for name in _imports(path)
        if any(name == e or name.startswith(e + ".") for e in _EVALUATING)
    )


def test_the_cli_reaches_evaluations_through_one_entry_point() -> None:
    assert _evaluating_imports_in_the_cli() == []
    callers = [p.name for p in (PACKAGE / "cli").rglob("*.py") if ENTRY_POINT in _imports(p)]
    assert callers == ["run.py"]


def test_the_entry_point_check_finds_a_step_of_the_route_in_the_cli(tmp_path: Path) -> None:
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "run.py").write_text(
        "def f():\n    from eval_pipeline.orchestration.execution import run_all\n", encoding="utf-8"
    )
    assert _evaluating_imports_in_the_cli(tmp_path) == [
        "cli/run.py: eval_pipeline.orchestration.execution.run_all"
    ]


CONCLUSION = "eval_pipeline.core.report.conclusion"


def _called_names(tree: ast.AST) -> set[str]:
    return {
        node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
    }


def _reaching_conclude() -> set[str]:
    """`conclude`, and the conclusion module's functions that call it."""
    tree = ast.parse((CORE / "report" / "conclusion.py").read_text(encoding="utf-8"))
    return {"conclude"} | {
        f.name for f in tree.body if isinstance(f, ast.FunctionDef) and "conclude" in _called_names(f)
    }


def _concludes(path: Path, function: str | None = None) -> bool:
    """Whether `path` (its `function`, when named) calls the conclusion module's `conclude`,
    directly or through the module's functions that call it, under any local name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    reaching = _reaching_conclude()
    local = {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == CONCLUSION
        for a in node.names
        if a.name in reaching
    }
    scope: ast.AST = tree
    if function is not None:
        scope = next(f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == function)
    return bool(local & _called_names(scope))


def test_the_narrowed_route_the_assets_and_the_retry_conclude_alike() -> None:
    from eval_pipeline.defs.automation import reevaluation_job

    assert _concludes(PACKAGE / "orchestration" / "evaluation_route.py", "_narrowed_model")
    assert _concludes(PACKAGE / "defs" / "reports.py", "run_report")
    # A retry of errored tests and a noise re-trial keep what they observed beside the run and
    # rebuild the model's report through the asset: `run_report` concludes with them merged in.
    retry = PACKAGE / "orchestration" / "reevaluation_runs.py"
    assert "eval_pipeline.defs.automation.reevaluation_job" in _imports(retry)
    assert "run_report" in str(reevaluation_job.selection)


def test_the_conclusion_check_sees_an_alias_and_misses_a_route_that_does_not_conclude(tmp_path: Path) -> None:
    route = tmp_path / "route.py"
    route.write_text(
        f"from {CONCLUSION} import evaluate as judged, verdict\n"
        "def a():\n    return judged(1, 2, 3, 4)\n"
        "def b():\n    return verdict(1, 2, 3)\n",
        encoding="utf-8",
    )
    assert _concludes(route, "a")
    assert not _concludes(route, "b")
