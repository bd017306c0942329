"""One error base class: every error the package raises on purpose derives from it, and the CLI
turns each into the exit code its class carries, in one place."""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import eval_pipeline
from eval_pipeline import cli
from eval_pipeline.core.errors import BadInput, CouldNotEvaluate, EvalPipelineError

PACKAGE = Path(eval_pipeline.__file__).parent


def _package_errors() -> dict[str, type[BaseException]]:
    """Every public exception class defined in the package, by name."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages([str(PACKAGE)], "eval_pipeline."):
        if info.name.endswith("__main__"):  # running it is its import
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and not name.startswith("_")  # a module's own control flow, caught where raised
            ):
                found[name] = value
    return found


def _caught_by_cli() -> set[str]:
    """The class names in every `except` clause of the CLI's modules."""
    names: set[str] = set()
    for path in (PACKAGE / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                caught = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
                names.update(ast.unparse(c).rsplit(".", 1)[-1] for c in caught)
    return names


def _not_derived(classes: list[type[BaseException]]) -> list[str]:
    return sorted(c.__name__ for c in classes if not issubclass(c, EvalPipelineError))


@pytest.mark.slow
def test_every_error_the_cli_catches_derives_from_the_one_base() -> None:
    errors = _package_errors()
    caught = [errors[name] for name in _caught_by_cli() if name in errors]
    assert {"EvalPipelineError", "InputError", "DocumentError", "ProviderError"} <= {
        c.__name__ for c in caught
    }
    assert _not_derived(caught) == []


@pytest.mark.slow
def test_every_public_error_of_the_package_derives_from_the_one_base() -> None:
    errors = list(_package_errors().values())
    assert len(errors) >= 17
    assert _not_derived(errors) == []
    # Each says its exit code through one of the two kinds, never the base alone.
    assert [c.__name__ for c in errors if not issubclass(c, BadInput | CouldNotEvaluate)] == [
        "EvalPipelineError"
    ]


def test_the_check_finds_an_error_outside_the_base() -> None:
    class Stray(Exception):
        pass

    assert _not_derived([Stray, BadInput]) == ["Stray"]


@pytest.mark.parametrize("kind", [BadInput, CouldNotEvaluate])
def test_the_cli_reports_an_error_in_one_line_with_its_class_exit_code(
    kind: type[EvalPipelineError], capsys: pytest.CaptureFixture[str]
) -> None:
    def command(_: argparse.Namespace) -> int:
        raise kind("models.yaml: model 'm': field 'x': not a number")

    code = cli._run(command, argparse.Namespace(debug=False))
    assert code == kind.exit_code == {BadInput: 2, CouldNotEvaluate: 3}[kind]
    assert capsys.readouterr().err == "error: models.yaml: model 'm': field 'x': not a number\n"
