"""Warm runs of the sample against their floors, all in one interpreter (imports paid once).

- A narrowed run, `run --test ID` (both offline models), against a plain parse of the same KB and
  bank files with PyYAML (libyaml) and json: the least any check of them could cost. Target ≤ 10×.
- A full run of both offline models (`run`, the Dagster graph on the project's SQLite instance)
  against the same work called directly through the core: each model's retrieval, scoring, run
  document, results.json and report.md, then the date's comparison of the two. Target ≤ 1.5×
  for the rerun people make, nothing changed since the last one (today's stored evaluation
  stands: `orchestration/standing.py`); `run --force`, which evaluates again through Dagster,
  is reported beside it without a target.

Warm means the embedding cache holds every vector (one untimed run first); each side is the best
of three, so a neighbour's burst of CPU does not decide a ratio.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml

from benchmarks.table import Row
from eval_pipeline.cli import main
from eval_pipeline.core.dates import today_utc

# In `make bench`'s quick pass (benchmarks/__main__.py).
QUICK = True

REPO = Path(__file__).resolve().parent.parent
MODELS = ["local-minilm", "local-hybrid"]
DATE = today_utc()  # a stored evaluation stands only for today: a past date re-reads that day's inputs
PASSES = 3
NARROW_TARGET, FULL_TARGET = 10.0, 1.5


@contextlib.contextmanager
def sample_copy() -> Iterator[Path]:
    """A temporary copy of the sample, its own Dagster home, as the working directory."""
    old_cwd, old_home = Path.cwd(), os.environ.get("DAGSTER_HOME")
    with tempfile.TemporaryDirectory(prefix="eval-run-paths-") as tmp:
        root = Path(tmp)
        for name in ("kb", "test_banks", "calibration"):
            shutil.copytree(REPO / name, root / name)
        shutil.copy(REPO / "models.yaml", root / "models.yaml")
        os.environ["DAGSTER_HOME"] = str(root / ".dagster_home")
        os.chdir(root)
        try:
            yield root
        finally:
            os.chdir(old_cwd)
            if old_home is None:
                os.environ.pop("DAGSTER_HOME", None)
            else:
                os.environ["DAGSTER_HOME"] = old_home


def _best(run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(PASSES):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def quiet_cli(*argv: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(argv))
    if code not in (0, 1):
        raise RuntimeError(f"eval-pipeline {' '.join(argv)} exited {code}")


def _plain_parse(root: Path) -> None:
    for file in sorted((root / "kb").rglob("*.yaml")):
        yaml.load(file.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    for file in sorted((root / "test_banks").rglob("*.json")):
        json.loads(file.read_text(encoding="utf-8"))


def _core_full_run(root: Path) -> None:
    """Both models' full evaluation and their comparison, through the core and providers only."""
    from eval_pipeline.core.dates import now_utc
    from eval_pipeline.core.diff.comparison import compare_models
    from eval_pipeline.core.fileio import atomic_write_text
    from eval_pipeline.core.inputs.banks import Mechanism
    from eval_pipeline.core.inputs.validation import load_validated
    from eval_pipeline.core.report.conclusion import Observed, RunSetup, evaluate
    from eval_pipeline.core.report.markdown import render_markdown
    from eval_pipeline.core.scoring.evaluation import Scope
    from eval_pipeline.core.scoring.points import DEFAULT_PASS_THRESHOLD
    from eval_pipeline.core.verdicts.run_gate import Gates
    from eval_pipeline.providers.factory import run_semantic
    from eval_pipeline.providers.models import load_models
    from eval_pipeline.providers.target import retrieval_items

    kb, banks = load_validated(root / "kb", root / "test_banks", [])
    configs = load_models(root / "models.yaml")
    boosts = banks.rules.boosts_by_entity() if banks.rules else {}
    docs = []
    for model in MODELS:
        cfg = configs[model]
        items = retrieval_items(Scope().select(Mechanism.SEMANTIC, banks.semantic_tests), cfg.trials)
        retrievals = run_semantic(cfg, kb.entities, items, boosts, root / ".cache")
        setup = RunSetup(
            kb=kb,
            banks=banks,
            date=DATE,
            model=model,
            system_config=cfg.model_dump(mode="json"),
            implementations=cfg.implementations,
            pass_threshold=DEFAULT_PASS_THRESHOLD,
            generated_at=now_utc(),
        )
        doc = evaluate(setup, Observed(retrievals), Scope(), Gates()).document
        out = root / "core_results" / model / DATE
        atomic_write_text(out / "results.json", doc.model_dump_json(indent=2))
        atomic_write_text(out / "report.md", render_markdown(doc))
        docs.append(doc)
    comparison = compare_models(DATE, docs)
    atomic_write_text(root / "core_results" / "comparison.json", comparison.model_dump_json(indent=2))


def rows() -> list[Row]:
    with sample_copy() as root:
        test_id = json.loads((root / "test_banks/semantic/parent_test_bank.json").read_text())["tests"][0]
        narrowed = ["run", "--test", test_id["test_id"], "--date", DATE] + [
            a for m in MODELS for a in ("--model", m)
        ]
        # One model after the other, as the core path does them (models at once: parallel_models).
        full = ["run", "--date", DATE, "--parallel", "1"] + [a for m in MODELS for a in ("--model", m)]
        quiet_cli(*full)  # warms the embedding cache and the Dagster instance
        parse = _best(lambda: _plain_parse(root))
        narrow = _best(lambda: quiet_cli(*narrowed))
        core = _best(lambda: _core_full_run(root))
        forced = _best(lambda: quiet_cli(*full, "--force"))
        rerun = _best(lambda: quiet_cli(*full))
    print(
        f"run paths: parse {parse:.3f} s, run --test {narrow:.3f} s, core {core:.2f} s, "
        f"rerun {rerun:.2f} s, --force {forced:.2f} s"
    )
    return [
        Row(
            "run_paths",
            "warm `run --test ID`, 2 offline models, vs a plain parse of the KB and bank files",
            f"{narrow / parse:.1f}× the parse",
            f"≤ {NARROW_TARGET:g}×",
            narrow / parse <= NARROW_TARGET,
            f"run --test {narrow:.3f} s; parse {parse:.3f} s (PyYAML libyaml + json, same interpreter)",
        ),
        Row(
            "run_paths",
            "warm full sample `run`, 2 offline models, nothing changed, vs the same work through the core",
            f"{rerun / core:.1f}× the core path",
            f"≤ {FULL_TARGET:g}×",
            rerun / core <= FULL_TARGET,
            f"rerun {rerun:.2f} s (today's stored evaluation stands: no Dagster run); core {core:.2f} s",
        ),
        Row(
            "run_paths",
            "warm full sample `run --force`, 2 offline models, the Dagster graph vs the core path",
            f"{forced / core:.1f}× the core path",
            detail=f"--force {forced:.2f} s (4 in-process runs, a model at a time, on the project "
            f"instance); core {core:.2f} s",
        ),
    ]
