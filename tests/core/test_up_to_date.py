"""When a stored evaluation may stand for a new one: exactly its inputs, and nothing unknown in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.core.code_version import code_version, dependency_versions, version_of
from eval_pipeline.core.report.conclusion import scope_record
from eval_pipeline.core.report.rerun_rule import EvaluationInputs, stale_reason
from eval_pipeline.core.scoring.evaluation import Scope
from eval_pipeline.core.scoring.results import RESULT_SCHEMA_VERSION
from eval_pipeline.core.scoring.run_document import RunDocument
from tests.run_docs import doc, sem, state

MODEL_CONFIG: dict[str, Any] = {"reranker": {"kind": "cosine"}}


def _inputs(**change: Any) -> EvaluationInputs:
    fields: dict[str, Any] = {
        "code_version": code_version(),
        "date": "2026-11-19",
        "kb_version": "kb-1",
        "kb_hash": "k1" * 32,
        "bank_hashes": {"semantic/parent_test_bank.json": "b1", "state/state_handler_tests.json": "s1"},
        "history_hash": "h",
        "models": {"m": MODEL_CONFIG},
        "settings": {"fail_under": None},
    }
    return EvaluationInputs(**{**fields, **change})


def _stored(*semantic_errors: str | None) -> RunDocument:
    semantic = [sem(f"S{i}", ["a", "b"], error=e) for i, e in enumerate(semantic_errors or (None,))]
    stored = doc(semantic, [state("ST1", ["h1"])], schema_version=RESULT_SCHEMA_VERSION)
    provenance = stored.provenance.model_copy(
        update={"code_version": code_version(), "scope": scope_record(Scope())}
    )
    return stored.model_copy(update={"provenance": provenance})


def test_the_same_inputs_let_a_complete_result_stand() -> None:
    assert stale_reason(_stored(), _inputs()) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"code_version": "0" * 64}, "written by other code"),
        ({"date": "2026-11-20"}, "for 2026-11-19, not 2026-11-20"),
        ({"kb_hash": "k2" * 32}, "the KB changed"),
        ({"kb_version": "kb-2"}, "the KB changed"),
        ({"bank_hashes": {"semantic/parent_test_bank.json": "b2"}}, "the test banks changed"),
        ({"history_hash": "h2"}, "the expectation history changed"),
        ({"models": {"m": {"reranker": {"kind": "hybrid"}}}}, "the model's configuration changed"),
        ({"models": {"other": MODEL_CONFIG}}, "the model's configuration changed"),
    ],
)
def test_any_changed_input_makes_it_stale(change: dict[str, Any], reason: str) -> None:
    assert stale_reason(_stored(), _inputs(**change)) == f"m: {reason}"


def test_a_result_with_an_errored_test_never_stands() -> None:
    # An outage or a corrupt cache: the rerun may well answer, so it must be made.
    assert stale_reason(_stored(None, "APIConnectionError"), _inputs()) == "m: 1 test(s) errored"


def test_an_unjudged_result_never_stands() -> None:
    unknown = _stored("timeout")  # the only semantic test errored: the bank cannot be judged
    assert unknown.aggregate.health.value == "UNKNOWN"
    assert stale_reason(unknown, _inputs()) is not None


def test_a_result_from_other_code_or_schema_never_stands() -> None:
    older = _stored()
    older = older.model_copy(
        update={
            "provenance": older.provenance.model_copy(update={"code_version": None, "schema_version": "1.4"})
        }
    )
    assert stale_reason(older, _inputs()) == "m: written by schema 1.4"


def test_a_narrowed_result_never_stands_for_a_full_one() -> None:
    narrowed = _stored()
    scope = scope_record(Scope(test_ids=frozenset({"S0"})))
    narrowed = narrowed.model_copy(
        update={"provenance": narrowed.provenance.model_copy(update={"scope": scope})}
    )
    assert stale_reason(narrowed, _inputs()) == "m: a narrowed run"


def test_the_fingerprint_is_canonical_and_sensitive_to_every_field() -> None:
    base = _inputs()
    reordered = _inputs(bank_hashes=dict(reversed(list(base.bank_hashes.items()))))
    assert reordered.fingerprint() == base.fingerprint() and len(base.fingerprint()) == 32
    changes: list[dict[str, Any]] = [
        {"code_version": "x"},
        {"date": "2026-11-20"},
        {"kb_version": "kb-2"},
        {"kb_hash": "k2"},
        {"bank_hashes": {}},
        {"history_hash": "h2"},
        {"models": {}},
        {"settings": {"fail_under": 80.0}},
        {"schema_version": "9.9"},
    ]
    assert len({_inputs(**c).fingerprint() for c in changes} | {base.fingerprint()}) == len(changes) + 1
    assert set(EvaluationInputs.model_fields) == {k for c in changes for k in c}  # none left untested


def test_the_code_version_changes_with_one_source_line_or_one_dependency(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "mod.py").write_text("X = 1\n")
    (package / "data.json").write_text("{}")
    deps = ["dagster==1.13.27", "numpy==2.4.6"]
    before = version_of(package, deps)
    (package / "data.json").write_text('{"not": "source"}')
    assert version_of(package, deps) == before
    assert version_of(package, ["dagster==1.13.28", "numpy==2.4.6"]) != before
    (package / "sub" / "mod.py").write_text("X = 2\n")
    assert version_of(package, deps) != before
    (package / "sub" / "mod.py").write_text("X = 1\n")
    (package / "sub" / "mod.py").rename(package / "mod.py")  # the same code elsewhere is other code
    assert version_of(package, deps) != before


def test_the_installed_code_version_names_the_runtime_dependencies_only() -> None:
    names = {line.split("==")[0] for line in dependency_versions()}
    assert {"dagster", "onnxruntime", "anthropic", "voyageai", "pydantic"} <= names
    assert not names & {"pytest", "ruff", "mypy"}  # dev tools change no result
    assert len(code_version()) == 64
