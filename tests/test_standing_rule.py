"""What a model's stored evaluation rests on (orchestration/standing.py): every part of it moves
the model's digests, and what changed is said in the user's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.verdicts.run_gate import Gates
from eval_pipeline.orchestration.standing import ModelInputs, changes, model_inputs
from eval_pipeline.providers.models import load_models
from tests.conftest import REPO, TENANT

LOCATION = {"storage": "/p/storage", "results": "/p/results", "outputs": None}
# Each part of a model's inputs changed, and how `run` says so.
CHANGES: list[tuple[dict[str, Any], str]] = [
    ({"code": "1.8:other"}, "the code changed"),
    ({"kb": "kb-1:other"}, "the KB changed"),
    ({"banks": {"semantic": "s", "state": "other"}}, "test banks changed: state"),
    ({"banks": {"semantic": "s"}}, "test banks changed: state"),  # a bank removed
    ({"history": "other"}, "the expectation history changed"),
    ({"model": {"reranker": {"kind": "hybrid"}}}, "the models file changed for m"),
    ({"gates": {"fail_under": 80.0}}, "the gates changed"),
    ({"location": {**LOCATION, "results": "/q/results"}}, "results/storage location changed"),
    ({"calibration_cost_usd": 0.25}, "a calibration was logged for 2026-11-19"),
    ({"date": "2026-11-18"}, "no stored evaluation for m on 2026-11-19"),
]


def _inputs(**change: Any) -> ModelInputs:
    fields: dict[str, Any] = {
        "code": "1.8:abc",
        "date": "2026-11-19",
        "kb": "kb-1:k1",
        "banks": {"semantic": "s", "state": "t"},
        "history": "h",
        "model": {"reranker": {"kind": "cosine"}},
        "gates": {"fail_under": None},
        "location": LOCATION,
        "calibration_cost_usd": 0.0,
    }
    return ModelInputs(**{**fields, **change})


def test_the_same_inputs_change_nothing() -> None:
    assert changes(_inputs().digests(), _inputs().digests(), "m", "2026-11-19") is None


@pytest.mark.parametrize(("change", "said"), CHANGES, ids=[said for _, said in CHANGES])
def test_each_part_changed_is_said_in_the_users_words(change: dict[str, Any], said: str) -> None:
    assert changes(_inputs().digests(), _inputs(**change).digests(), "m", "2026-11-19") == said


def test_every_part_is_covered_and_several_changes_are_all_said() -> None:
    assert set(ModelInputs.model_fields) == {k for change, _ in CHANGES for k in change}
    both = _inputs(kb="kb-2:k2", banks={"semantic": "other", "state": "other"})
    said = changes(_inputs().digests(), both.digests(), "m", "2026-11-19")
    assert said == "the KB changed; test banks changed: semantic, state"


def test_the_digests_are_canonical() -> None:
    reordered = _inputs(banks={"state": "t", "semantic": "s"}, model={"reranker": {"kind": "cosine"}})
    assert reordered.digests() == _inputs().digests()


@pytest.mark.parametrize(
    ("kb", "banks"), [(REPO / "kb", REPO / "test_banks"), (TENANT / "kb.yaml", TENANT / "banks")]
)
def test_each_model_rests_on_its_own_entry_and_the_banks_by_name(kb: Path, banks: Path) -> None:
    knowledge, loaded = load_validated(kb, banks, [])
    configs = load_models(REPO / "models.yaml")
    two = {k: configs[k] for k in ("local-minilm", "local-hybrid")}
    inputs = model_inputs(knowledge, loaded, two, "2026-11-19", Gates(), 60, LOCATION, 0.0)
    minilm, hybrid = inputs["local-minilm"].digests(), inputs["local-hybrid"].digests()
    assert changes(minilm, hybrid, "local-hybrid", "2026-11-19") == "the models file changed for local-hybrid"
    # The pattern bank and its rules file are one bank to the user; each bank by its mechanism.
    assert set(inputs["local-minilm"].banks) == {"semantic", "state", "pattern", "always"}
