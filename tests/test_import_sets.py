"""Commands import only what they use (docs/performance.md, "Start-up"): each case runs the
command in a fresh interpreter and reads `sys.modules` after it, so an import added at the top of
a module on the way shows here, not as a slower start a user notices later.

- `--help`, every command's `--help`: no numpy, onnxruntime, pandas, Dagster, nor pydantic;
- a narrowed run (`run --test ID`): no Dagster (no instance made either), no pandas, no provider
  SDK; once its texts are in the embedding cache, no onnxruntime and no tokenizer either (they
  load with the model, for a text to embed), nor what only other paths use (an object store's
  fsspec, a terminal's progress bar, the HTML report's templates, the locks of calibration
  writes, the retries of remote calls, the diff models of a comparison, the records of a
  calibration log the project does not have, the crisis patterns' regex engine with no pattern
  test in scope, the JUnit writer without `--junit`, other commands' modules, the contract's
  models with no team's system to ask, the records a re-evaluation keeps, a caching reranker's
  prompt-cache status, the BLAS thread limiter for score products BLAS runs on one thread by itself);
- an unchanged rerun, today's or an explicit past date's: no Dagster, no pandas, no onnxruntime
  (decided from the recorded evaluation, orchestration/standing.py): probed in
  tests/test_cli_rerun.py, from the evaluations its other tests begin with.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from eval_pipeline.cli import build_parser
from tests.conftest import offline_tenant_project

DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--model", "local-minilm"]
PARSING = {"numpy", "onnxruntime", "pandas", "dagster", "pydantic"}
NARROWED = {"dagster", "pandas"}
MODEL_RUNTIME = {"onnxruntime", "tokenizers"}
# A narrowed run is never compared (no diff models), a project that never calibrated has no
# calibration log to read (no calibration records), a run without pattern tests matches no crisis
# pattern (no regex) and one without --junit writes no JUnit file. `run` parses with its own
# parser (no other command's module), and a model without the team's system sends it no
# request (no contract models); nor does it cache a reranker's prompt. Its one query's score
# product is small enough for numpy's OpenBLAS to run on one thread by itself (no threadpoolctl).
NOT_ASKED = {
    "eval_pipeline.core.diff.model",
    "eval_pipeline.core.calibration.records",
    "regex",
    "eval_pipeline.core.report.junit",
    "eval_pipeline.cli.backfill",
    "eval_pipeline.cli.calibrate",
    "eval_pipeline.core.inputs.contract",
    "eval_pipeline.providers.prompt_cache",
    "threadpoolctl",
}
WARM_NARROWED = (
    NARROWED | MODEL_RUNTIME | NOT_ASKED | {"upath", "fsspec", "rich", "jinja2", "filelock", "tenacity"}
)
RERUN = {"dagster", "pandas", "onnxruntime"}
NARROWED_RUN = ("run", *DATA, "--test", "T-RENT-001")

# The command's exit code, what it printed, and which of the watched modules it imported.
_PROBE = """
import contextlib, io, json, sys
from eval_pipeline.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
watched = {"numpy", "onnxruntime", "tokenizers", "pandas", "dagster", "pydantic", "upath", "fsspec",
           "rich", "jinja2", "filelock", "tenacity", "eval_pipeline.core.diff.model",
           "eval_pipeline.core.calibration.records", "regex", "eval_pipeline.core.report.junit",
           "eval_pipeline.cli.backfill", "eval_pipeline.cli.calibrate",
           "eval_pipeline.core.inputs.contract", "eval_pipeline.providers.prompt_cache", "threadpoolctl",
           "anthropic", "voyageai"}
print(json.dumps({"code": code, "out": out.getvalue(), "imported": sorted(watched & set(sys.modules))}))
"""


def probe_run(cwd: Path, *argv: str) -> tuple[int, str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    return report["code"], report["out"], set(report["imported"])


def _commands() -> list[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert isinstance(sub.choices, dict)
    return sorted(sub.choices)


def test_help_and_parsing_import_no_models_numpy_or_dagster(tmp_path: Path) -> None:
    commands = _commands()
    assert {"run", "diff", "calibrate", "backfill"} <= set(commands)
    for argv in [["--help"], *([c, "--help"] for c in commands)]:
        code, out, imported = probe_run(tmp_path, *argv)
        assert (code, imported & PARSING) == (0, set()), argv
        assert "usage: eval-pipeline" in out, argv


@dataclass(frozen=True)
class ColdNarrowedRun:
    project: Path  # the tenant copy beside the models file, its embedding cache now filled
    code: int
    out: str
    imported: set[str]


@pytest.fixture(scope="module")
def cold_narrowed(tmp_path_factory: pytest.TempPathFactory) -> ColdNarrowedRun:
    """A narrowed run with an empty cache, probed once for the tests of what it imports."""
    project = tmp_path_factory.mktemp("narrowed")
    with offline_tenant_project(project):
        return ColdNarrowedRun(project, *probe_run(project, *NARROWED_RUN))


def test_a_narrowed_run_imports_no_dagster_and_warm_no_model_runtime(cold_narrowed: ColdNarrowedRun) -> None:
    code, cold_out, imported = cold_narrowed.code, cold_narrowed.out, cold_narrowed.imported
    assert code in (0, 1) and "narrowed run" in cold_out, cold_out
    assert imported & NARROWED == set(), imported
    assert imported >= MODEL_RUNTIME  # an empty cache: it loaded the model and embedded
    warm_code, warm_out, warm_imported = probe_run(cold_narrowed.project, *NARROWED_RUN)
    assert (warm_code, warm_out) == (code, cold_out)  # the same verdict, from cached vectors
    assert warm_imported & WARM_NARROWED == set(), warm_imported
    assert "numpy" in warm_imported  # it did evaluate: the probe sees what the command imports


def test_a_narrowed_run_needs_no_dagster(cold_narrowed: ColdNarrowedRun) -> None:
    # Nor the provider SDKs: a second and a half of imports only API models and calibration use.
    assert cold_narrowed.imported & {"anthropic", "voyageai", "dagster"} == set()
    assert not (cold_narrowed.project / "dagster_home").exists()  # no Dagster instance was made
