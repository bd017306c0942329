"""Verdicts that know what they compare: another project is refused, lost banks and tests fail
`run` and `diff`, a gutted-but-boosted primary fails `diff` as content collapse. Each on the
second-domain fixture (tenant) and the sample, with real runs through the Dagster graph. Each
domain's first evaluation is made once and copied (results, storage, instance) where a test starts
from it: the second evaluation, the one each test is about, is its own."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from eval_pipeline.cli import main
from tests.conftest import TENANT as TENANT_FIXTURE
from tests.embedding_cache import warm
from tests.quiet_instance import quiet_home

REPO = Path(__file__).resolve().parents[2]
D1, D2 = "2026-11-19", "2026-11-20"
TENANT = ("tenant/kb.yaml", "tenant/banks")
SAMPLE = ("sample/kb", "sample/test_banks")


def _run(data: tuple[str, str], date: str, *extra: str, model: str = "local-minilm") -> int:
    kb, banks = data
    return main(["run", "--kb", kb, "--banks-dir", banks, "--date", date, "--model", model, *extra])


def _diff(model: str, *extra: str) -> int:
    return main(["diff", f"{model}@{D1}", f"{model}@{D2}", *extra])


@pytest.fixture(autouse=True)
def _embedded(workdir: Path, local_embeddings: Path) -> None:
    warm(workdir / ".cache", local_embeddings)
    quiet_home(workdir / "dagster_home")


def _project(root: Path, embeddings: Path) -> None:
    """What `workdir` and `sample` make: the models file, both domains' copies, a warm cache."""
    shutil.copy(REPO / "models.yaml", root / "models.yaml")
    shutil.copytree(TENANT_FIXTURE, root / "tenant")
    for name in ("kb", "test_banks"):
        shutil.copytree(REPO / name, root / "sample" / name)
    warm(root / ".cache", embeddings)


class Baseline(NamedTuple):
    root: Path  # a project as `sample` makes it, evaluated on D1: results, storage, instance
    code: int  # that evaluation's exit code


@pytest.fixture(scope="module")
def baselines(
    tmp_path_factory: pytest.TempPathFactory, local_embeddings: Path
) -> dict[tuple[str, str], Baseline]:
    """Each domain's D1 evaluation (local-minilm), made once for the module: most tests start
    from one and change the project after it, so each copies it rather than evaluating it again."""
    made = {}
    with pytest.MonkeyPatch.context() as mp:
        for data in (TENANT, SAMPLE):
            root = tmp_path_factory.mktemp("baseline")
            _project(root, local_embeddings)
            mp.chdir(root)
            mp.setenv("DAGSTER_HOME", str(quiet_home(root / "dagster_home")))
            mp.delenv("ANTHROPIC_API_KEY", raising=False)
            mp.delenv("VOYAGE_API_KEY", raising=False)
            made[data] = Baseline(root, _run(data, D1))
    return made


@pytest.fixture
def evaluated(workdir: Path, baselines: dict[tuple[str, str], Baseline]) -> Callable[[tuple[str, str]], int]:
    """`_run(data, D1)` in the working directory, as a copy of the module's baseline: its exit code."""

    def copy(data: tuple[str, str]) -> int:
        shutil.copytree(baselines[data].root, workdir, dirs_exist_ok=True)
        return baselines[data].code

    return copy


@pytest.fixture
def sample(workdir: Path) -> Path:
    for name in ("kb", "test_banks"):
        shutil.copytree(REPO / name, workdir / "sample" / name)
    return workdir


def _critical(banks: Path) -> list[str]:
    tests = json.loads((banks / "pattern" / "pattern_tests.json").read_text())["tests"]
    return [t["test_id"] for t in tests if t["is_critical"]]


@pytest.mark.parametrize("data", [TENANT, SAMPLE], ids=["tenant", "sample"])
def test_a_deleted_pattern_bank_fails_run_and_diff_naming_the_bank_and_its_critical_tests(
    sample: Path,
    evaluated: Callable[[tuple[str, str]], int],
    capsys: pytest.CaptureFixture[str],
    data: tuple[str, str],
) -> None:
    banks = sample / data[1]
    critical = _critical(banks)
    evaluated(data)  # the sample's own crisis misses make it CRITICAL: the baseline's verdict is its own
    shutil.rmtree(banks / "pattern")
    capsys.readouterr()

    code = _run(data, D2)
    out = capsys.readouterr().out
    assert code == 1
    line = next(x for x in out.splitlines() if "coverage gate failed since 2026-11-19" in x)
    assert f"bank pattern removed with its critical tests {', '.join(critical)}" in line
    assert _run(data, D2, "--allow-removed") in (0, 1)  # the release gate alone decides now
    assert "coverage gate failed" not in capsys.readouterr().out

    assert _diff("local-minilm") == 1
    out = capsys.readouterr().out
    assert f"coverage lost: bank pattern removed with its critical tests {', '.join(critical)}" in out
    assert "bank no longer run: pattern" in out and "critical test, was" in out


def test_removed_ordinary_tests_fail_unless_allowed(
    workdir: Path, evaluated: Callable[[tuple[str, str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert evaluated(TENANT) == 0
    bank = workdir / "tenant/banks/semantic/tenant_questions.json"
    data = json.loads(bank.read_text())
    data["tests"] = [t for t in data["tests"] if t["test_id"] != "T-RENT-001"]
    bank.write_text(json.dumps(data))
    capsys.readouterr()
    assert _run(TENANT, D2) == 1
    assert "coverage lost: 1 test(s) removed: T-RENT-001 (semantic)" in capsys.readouterr().out
    assert _run(TENANT, D2, "--allow-removed") == 0
    assert _diff("local-minilm") == 1
    assert "  - coverage lost: 1 test(s) removed: T-RENT-001 (semantic)" in capsys.readouterr().out
    assert _diff("local-minilm", "--allow-removed") == 0
    assert "accepted by --allow-removed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("first", "second", "held", "running"),
    [
        (SAMPLE, TENANT, "'Co-parenting", "unnamed KB tenant-fixture-1"),
        (TENANT, SAMPLE, "unnamed KB tenant-fixture-1", "'Co-parenting"),
    ],
    ids=["tenant-into-sample", "sample-into-tenant"],
)
def test_another_projects_evaluation_into_this_location_is_refused(
    sample: Path,
    evaluated: Callable[[tuple[str, str]], int],
    capsys: pytest.CaptureFixture[str],
    first: tuple[str, str],
    second: tuple[str, str],
    held: str,
    running: str,
) -> None:
    evaluated(first)
    before = sorted(p.relative_to(sample) for p in (sample / "results").rglob("*"))
    capsys.readouterr()
    assert _run(second, D2) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert f"holds evaluations of project {held}" in err[0] and f"--kb is project {running}" in err[0]
    assert "--results-dir" in err[0] and "eval-pipeline init DIR" in err[0]
    assert sorted(p.relative_to(sample) for p in (sample / "results").rglob("*")) == before
    # Its own location is the way out, and two such evaluations are incomparable, never a pass.
    own = ["--results-dir", "other/results", "--storage-dir", "other/storage"]
    assert _run(second, D2, *own) in (0, 1)
    base = sample / f"results/local-minilm/{D1}/results.json"
    assert main(["diff", str(base), str(sample / f"other/results/local-minilm/{D2}")]) == 1
    assert "  - incomparable: different projects: base is " in capsys.readouterr().out


def test_a_kb_edit_is_the_same_project_and_summarised(
    workdir: Path, evaluated: Callable[[tuple[str, str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert evaluated(TENANT) == 0
    kb = workdir / "tenant/kb.yaml"
    data = yaml.safe_load(kb.read_text())
    for e in data["entities"]:
        if e["entity_id"] == "lease_renewal":
            e["content"] = "Ask for the renewal terms in writing."
    kb.write_text(yaml.safe_dump(data))
    capsys.readouterr()
    assert _run(TENANT, D2) in (0, 1)
    _diff("local-minilm")
    assert "KB change: entities content changed (1): lease_renewal" in capsys.readouterr().out


def test_a_gutted_but_boosted_primary_fails_diff_as_content_collapse(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bank = workdir / "tenant/banks/semantic/tenant_questions.json"
    data = json.loads(bank.read_text())
    deposit = next(t for t in data["tests"] if t["test_id"] == "T-DEP-001")
    assert "deposit" in deposit["prompt"].lower()  # the keyword boost fires on it
    kb = workdir / "tenant/kb.yaml"
    assert _run(TENANT, D1, model="local-hybrid") == 0
    entities = yaml.safe_load(kb.read_text())
    for e in entities["entities"]:
        if e["entity_id"] == "deposit_return":
            e.update(title="Untitled", summary="Placeholder.", content="Lorem ipsum dolor sit amet.")
    kb.write_text(yaml.safe_dump(entities))
    capsys.readouterr()
    _run(TENANT, D2, model="local-hybrid")
    # The why reaches every surface of the run, as diff prints it: the since block, report.md
    # and report.html name the entity, its cosines and the KB change.
    since = capsys.readouterr().out.split("  since ", 1)[1]
    why = [line.strip() for line in since.splitlines() if line.strip().startswith("why: ")]
    assert any("similarity collapse: primary deposit_return still selected, cosine" in w for w in why), since
    assert "    KB change: entities content changed (1): deposit_return" in since, since
    run_dir = workdir / "results" / "local-hybrid" / D2
    report = (run_dir / "report.md").read_text()
    assert "- content collapse: T-DEP-001 [semantic]" in report
    assert "  - why: ALERT similarity collapse: primary deposit_return still selected" in report
    assert "- KB change: entities content changed (1): deposit_return" in report
    html = (run_dir / "report.html").read_text()
    assert "similarity collapse: primary deposit_return still selected, cosine" in html
    assert "KB change: entities content changed (1): deposit_return" in html
    assert _diff("local-hybrid") == 1
    assert _diff("local-hybrid", "--strict") == 1
    out = capsys.readouterr().out
    gate = out.split("gate: FAILED\n", 1)[1].splitlines()
    assert gate[0] == "  - content collapse in 1 test(s): T-DEP-001"
    assert "== content collapse (1) ==\nT-DEP-001 [semantic]" in out
    assert "ALERT similarity collapse: primary deposit_return still selected" in out
