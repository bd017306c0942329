"""Reruns stand per model: `eval-pipeline run` processes, as a user starts them, on the sample and
on the second domain, with both offline models (A and B).

A model whose stored evaluation of the day stands is not evaluated again (its results file is
left as it was), whichever other models the command names; a model that must be evaluated says
why in the user's words; a result with an errored test never stands."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from eval_pipeline.core.dates import today_utc
from eval_pipeline.defs.graph import ALL_ASSETS
from tests.conftest import REPO, TENANT
from tests.quiet_instance import quiet_home

A, B = "local-minilm", "local-hybrid"
STANDS = "up to date: {model}:"
EVALUATES = "evaluating {model}: {reason}"
# Dagster's words, which a reason never uses.
DAGSTER_WORDS = ("materiali", "asset", "partition", "last made by", "run of other code")


@dataclass(frozen=True)
class Domain:
    name: str
    data: tuple[str, ...]  # --kb and --banks-dir as the project's files are laid out

    def make(self, root: Path) -> None:
        if self.name == "sample":
            shutil.copytree(REPO / "kb", root / "kb")
            shutil.copytree(REPO / "test_banks", root / "test_banks")
        else:
            shutil.copytree(TENANT, root / "tenant")

    def edit_kb(self, root: Path) -> None:
        """One entity's content edited, as a team edits its KB."""
        if self.name == "sample":
            entity = sorted((root / "kb" / "entities").glob("*.yaml"))[0]
            data = yaml.safe_load(entity.read_text())
            data["content"] += "\nOne more sentence."
            entity.write_text(yaml.safe_dump(data, sort_keys=False))
        else:
            kb = root / "tenant" / "kb.yaml"
            data = yaml.safe_load(kb.read_text())
            data["entities"][0]["content"] += "\nOne more sentence."
            kb.write_text(yaml.safe_dump(data, sort_keys=False))


DOMAINS = [
    Domain("sample", ()),
    Domain("tenant", ("--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks")),
]


@dataclass
class Project:
    root: Path
    domain: Domain
    env: dict[str, str]

    def run(self, *models: str, extra: tuple[str, ...] = ()) -> tuple[int, str]:
        argv = ["run", *self.domain.data, *(a for m in models for a in ("--model", m)), *extra]
        cli = Path(sys.executable).with_name("eval-pipeline")
        done = subprocess.run(
            [str(cli), *argv], cwd=self.root, env=self.env, capture_output=True, text=True, timeout=600
        )
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, done.stdout

    def results(self, model: str) -> Path:
        return self.root / "results" / model / today_utc() / "results.json"

    def written(self) -> dict[str, int]:
        """Each model's results file by when it was last written (absent: not there)."""
        return {m: self.results(m).stat().st_mtime_ns for m in (A, B) if self.results(m).exists()}

    def edit_model(self, model: str, description: str) -> None:
        models = yaml.safe_load((self.root / "models.yaml").read_text())
        models["models"][model]["description"] = description
        (self.root / "models.yaml").write_text(yaml.safe_dump(models))


@pytest.fixture(params=DOMAINS, ids=lambda d: d.name)
def project(request: pytest.FixtureRequest, tmp_path: Path, local_embeddings: Path) -> Project:
    domain: Domain = request.param
    domain.make(tmp_path)
    shutil.copy(REPO / "models.yaml", tmp_path / "models.yaml")
    shutil.copytree(local_embeddings, tmp_path / ".cache")  # as a user's cache is after a first run
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY")}
    env["DAGSTER_HOME"] = str(quiet_home(tmp_path / "dagster_home"))
    return Project(tmp_path, domain, env)


def _said(out: str, stands: tuple[str, ...] = (), evaluates: dict[str, str] | None = None) -> None:
    """`out` says exactly that these models stand and these are evaluated, each for its reason."""
    evaluates = evaluates or {}
    for model in stands:
        assert STANDS.format(model=model) in out, out
    for model, reason in evaluates.items():
        assert EVALUATES.format(model=model, reason=reason) in out, out
    assert out.count("up to date:") == len(stands), out
    assert out.count("  evaluating ") == len(evaluates), out
    assert not any(word in out for word in DAGSTER_WORDS), out
    assert not any(f" {asset.key.to_user_string()} " in out for asset in ALL_ASSETS), out


def test_each_model_stands_on_its_own_stored_evaluation(project: Project) -> None:
    day = today_utc()
    none_for = "no stored evaluation for {model} on " + day

    code, out = project.run(A)
    _said(out, evaluates={A: none_for.format(model=A)})
    first = project.written()
    assert list(first) == [A]

    # B is added: A stands, only B is evaluated.
    both, out = project.run(A, B)
    _said(out, stands=(A,), evaluates={B: none_for.format(model=B)})
    written = project.written()
    assert written[A] == first[A] and B in written

    # Both, one, both in the other order: every one stands, with its verdict, nothing is written.
    for models, expected in (((A, B), both), ((A,), code), ((B, A), both)):
        got, out = project.run(*models)
        assert got == expected, out
        _said(out, stands=models)
    assert project.written() == written

    # B's entry in the models file changes: only B is evaluated again.
    project.edit_model(B, "the same stages, described again")
    got, out = project.run(A, B)
    _said(out, stands=(A,), evaluates={B: f"the models file changed for {B}"})
    after = project.written()
    assert (after[A], after[B] != written[B]) == (written[A], True)

    # The KB changes: both are evaluated again.
    project.domain.edit_kb(project.root)
    got, out = project.run(A, B)
    _said(out, evaluates={A: "the KB changed", B: "the KB changed"})
    assert all(project.written()[m] != after[m] for m in (A, B))
    _said(project.run(B, A)[1], stands=(B, A))


def test_a_model_with_an_errored_test_never_stands_while_the_other_does(project: Project) -> None:
    code, _ = project.run(A, B)
    # B must be evaluated (its entry changed) with a response cache that cannot be read: its
    # semantic tests error. A stands: the cache is no input of its verdict.
    broken = project.root / "broken-cache"
    broken.mkdir()
    for name in ("embeddings.sqlite3", "responses.sqlite3"):
        (broken / name).write_text("not a database")
    project.edit_model(B, "described again")
    got, out = project.run(A, B, extra=("--cache-dir", str(broken)))
    assert got == 3, out
    _said(out, stands=(A,), evaluates={B: f"the models file changed for {B}"})
    errored = json.loads(project.results(B).read_text())["aggregate"]["errored_count"]
    assert errored > 0
    # The same command again: B's errored result never answers for it, whatever the cache.
    for _ in range(2):
        got, out = project.run(A, B, extra=("--cache-dir", str(broken)))
        assert got == 3
        _said(out, stands=(A,), evaluates={B: f"{errored} test(s) errored"})
    # Mended, B is evaluated once more, and then both stand.
    got, out = project.run(A, B)
    assert got == code
    _said(out, stands=(A,), evaluates={B: f"{errored} test(s) errored"})
    got, out = project.run(A, B)
    assert got == code
    _said(out, stands=(A, B))
