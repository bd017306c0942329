"""`eval-pipeline report --html FILE`: the stored evaluations of a results folder, narrowed by
model and dates, written atomically; a bad date or no results is one line, exit 2, no file."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline import cli
from eval_pipeline.core.diff.baseline import against_baseline
from eval_pipeline.core.scoring.run_document import REGRESSION_DIFF_FILE, RESULTS_FILE, read_document
from tests.report_history import DATES, MODELS, seed_history


@pytest.fixture
def results(tenant: Path, tmp_path: Path) -> Path:
    root = tmp_path / "results"
    seed_history(tenant / "kb.yaml", tenant / "banks", root)
    return root


def test_writes_every_model_and_date_by_default(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "site" / "report.html"
    assert cli.main(["report", "--html", str(out), "--results-dir", str(results)]) == 0
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and f"{DATES[0]} to {DATES[-1]}" in html
    assert all(f'data-model="{m}" data-bank="combined"' in html for m in MODELS)
    assert capsys.readouterr().out.strip().endswith(f"({len(MODELS) * len(DATES)} evaluations)")
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # no temp file left behind


def test_models_and_dates_narrow_it(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    args = ["report", "--html", str(out), "--results-dir", str(results), "--model", MODELS[1]]
    assert cli.main([*args, "--from", DATES[2], "--to", DATES[4]]) == 0
    html = out.read_text()
    assert f"— {MODELS[1]} — {DATES[2]} to {DATES[4]}</title>" in html
    assert f'data-model="{MODELS[0]}"' not in html and f'data-date="{DATES[5]}"' not in html


def test_the_stored_regression_diff_is_the_since_section(results: Path, tmp_path: Path) -> None:
    # What `run` printed for the latest date stands, even against a baseline the range leaves out.
    model_dir = results / MODELS[0]
    head = read_document(model_dir / DATES[-1] / RESULTS_FILE)
    first = read_document(model_dir / DATES[0] / RESULTS_FILE)
    (model_dir / DATES[-1] / REGRESSION_DIFF_FILE).write_text(against_baseline(head, first).model_dump_json())
    out = tmp_path / "r.html"
    args = ["report", "--html", str(out), "--results-dir", str(results), "--model", MODELS[0]]
    assert cli.main([*args, "--from", DATES[-2]]) == 0
    assert f"<h3>{MODELS[0]}: {DATES[0]} → {DATES[-1]}</h3>" in out.read_text()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--from", "2026-11-31"], "error: --from: '2026-11-31' is not YYYY-MM-DD"),
        (["--from", DATES[3], "--to", DATES[1]], f"error: --from {DATES[3]} is after --to {DATES[1]}"),
        (["--model", "absent"], "no results for absent; run `eval-pipeline run` first"),
        (["--from", "2027-01-01"], "no results for any model from 2027-01-01; run"),
    ],
)
def test_bad_dates_or_no_results_exit_2_with_one_line_and_write_nothing(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    out = tmp_path / "r.html"
    assert cli.main(["report", "--html", str(out), "--results-dir", str(results), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not out.exists()


def test_a_folder_as_the_html_file_is_refused(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["report", "--html", str(tmp_path), "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --html file {tmp_path}: a folder is in the way (a file is needed)\n"


def test_an_unreadable_results_file_is_named(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = results / MODELS[0] / DATES[3] / RESULTS_FILE
    broken.write_text("{}")
    out = tmp_path / "r.html"
    assert cli.main(["report", "--html", str(out), "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err
    assert str(broken) in err and err.count("\n") == 1 and not out.exists()
