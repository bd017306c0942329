"""Everything that reads or writes expectations understands any-of and graded relevance:
overrides (command and history file), resolution, calibration's scope, the diff's explanation;
and the team's system is asked for the model's candidate depth."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from eval_pipeline import cli
from eval_pipeline.core.calibration.scope import JUDGED_NOT_CALIBRATED, scoped_tests
from eval_pipeline.core.diff.compare import diff_documents
from eval_pipeline.core.diff.comparison import compare_models
from eval_pipeline.core.expectations.resolution import ResolvedExpectation, resolve, same_expectations
from eval_pipeline.core.inputs.banks import Expectations
from eval_pipeline.core.inputs.contract import SystemAnswer, SystemRequest
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.report.diff_text import render_comparison_markdown
from eval_pipeline.core.report.failures import failing_tests
from eval_pipeline.providers.ratelimit import REAL_CLOCK, Clock
from eval_pipeline.providers.system_target import SystemPipeline
from tests.run_docs import doc, sem

DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks"]
WHO = ["--by", "Dr Who", "--reason", "judged by passage"]


def test_an_override_can_state_any_of_and_graded_relevance(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stated = ["--any", "rent_arrears", "eviction_notice", "--relevant", "lease_renewal=2", "deposit_return=0"]
    code = cli.main(["override", "T-RENT-001", *stated, *WHO, *DATA])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert (
        "any of        rent_arrears, eviction_notice" in out
        and "relevant      lease_renewal=2, deposit_return=0" in out
    )
    _, banks = load_validated(Path("tenant/kb.yaml"), Path("tenant/banks"))
    assert banks.semantic is not None
    now = resolve(banks.semantic.tests, banks.history)["T-RENT-001"]
    assert now.source.startswith("human_override_")
    assert now.expectations.expected_any == ["rent_arrears", "eviction_notice"]
    assert now.expectations.relevant == {"lease_renewal": 2, "deposit_return": 0}
    written = json.loads(next(Path("tenant/banks/semantic/history").glob("expectations_*")).read_text())
    assert written["changes"][0]["human_override"]["relevant"] == {"lease_renewal": 2, "deposit_return": 0}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--relevant", "lease_renewal=1.5"], "--relevant: 'lease_renewal=1.5' is not ENTITY=GAIN"),
        (["--relevant", "lease_renewal=-1"], "--relevant: 'lease_renewal=-1' is not ENTITY=GAIN"),
        (
            ["--relevant", "lease_renewal=0"],
            "an override needs --primary, --any or a --relevant gain above 0",
        ),
        (["--any", "no_such"], "expected_any: unknown entity 'no_such'"),
    ],
)
def test_a_bad_override_is_one_line_and_writes_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    history = Path("tenant/banks/semantic/history")
    before = sorted(history.glob("*"))
    assert cli.main(["override", "T-RENT-001", *flags, *WHO, *DATA]) == 2
    _, err = capsys.readouterr()
    assert message in err and "Traceback" not in err
    assert sorted(history.glob("*")) == before


def test_a_gain_change_is_an_expectation_change() -> None:
    a = Expectations(relevant={"x": 2, "y": 1})
    assert same_expectations(a, Expectations(relevant={"y": 1, "x": 2}))
    assert not same_expectations(a, Expectations(relevant={"x": 2, "y": 2}))
    assert not same_expectations(Expectations(expected_any=["x"]), Expectations(expected_primary=["x"]))


def test_calibration_leaves_any_of_and_graded_tests_as_judged(tenant: Path) -> None:
    kb, banks = load_validated(tenant / "kb.yaml", tenant / "banks")
    assert banks.semantic is not None
    tests = banks.semantic.tests
    graded = tests[0].model_copy(
        update={"test_id": "G-1", "expected_primary": [], "relevant": {"rent_arrears": 3}}
    )
    any_of = tests[0].model_copy(
        update={"test_id": "A-1", "expected_primary": [], "expected_any": ["rent_arrears"]}
    )
    every = [*tests, graded, any_of]
    resolved = {
        t.test_id: ResolvedExpectation(
            test_id=t.test_id, expectations=t.original_expectations(), source="original"
        )
        for t in every
    }
    chosen, why = scoped_tests("full", every, kb, resolved)
    assert [t.test_id for t in chosen] == [t.test_id for t in tests]
    assert why == {"G-1": [JUDGED_NOT_CALIBRATED], "A-1": [JUDGED_NOT_CALIBRATED]}
    chosen, _ = scoped_tests("single", every, kb, resolved, test_ids=["G-1"])
    assert chosen == []


def test_the_diff_explains_a_graded_test() -> None:
    exp = Expectations(relevant={"a": 3, "b": 2, "c": 1})
    before = doc([sem("G", ["a", "b"], exp=exp, candidates=["a", "b", "c"])], date="2026-11-19")
    after = doc([sem("G", ["x", "y"], exp=exp, candidates=["x", "y", "a"])], date="2026-11-20")
    delta = next(d for d in diff_documents(before, after).deltas if d.test_id == "G")
    assert delta.kind.value == "regressed"
    assert [a.text for a in delta.head_stages] == [
        "reranker: no relevant entity selected (best gain 3 at candidate #3)"
    ]
    edited = doc([sem("G", ["a", "b"], exp=Expectations(relevant={"a": 3, "b": 1}))], date="2026-11-20")
    changed = next(d for d in diff_documents(before, edited).deltas if d.test_id == "G")
    assert any(line.startswith("relevant:") for line in changed.expectation_changes)


class _Recording:
    """A team system that records what it is asked and offers every candidate it may."""

    def __init__(self) -> None:
        self.clock: Clock = REAL_CLOCK
        self.asked: list[SystemRequest] = []

    async def ask(self, request: SystemRequest) -> SystemAnswer:
        self.asked.append(request)
        ids = [f"e{i}" for i in range(request.top_k_candidates)]
        return SystemAnswer.model_validate(
            {
                "candidates": [{"entity_id": e, "score": 1.0} for e in ids],
                "selections": [{"entity_id": ids[0]}],
            }
        )

    async def aclose(self) -> None:
        return None


def test_the_team_system_is_asked_for_the_models_candidate_depth() -> None:
    target = _Recording()
    result = asyncio.run(SystemPipeline("m", target, 1, candidate_depth=100).retrieve("T", "q"))
    assert [r.top_k_candidates for r in target.asked] == [100] and len(result.candidates) == 100
    asyncio.run(SystemPipeline("m", target, 1).retrieve("T", "q"))
    assert target.asked[-1].top_k_candidates == 15


def test_failures_and_the_model_comparison_speak_of_the_new_kinds() -> None:
    any_of = sem("A", ["x", "y"], exp=Expectations(expected_any=["a", "b"]))
    graded = sem("G", ["x"], exp=Expectations(relevant={"a": 2}))
    run = doc([any_of, graded], model="m1")
    found = {f.test_id: (f.rule, f.reason) for f in failing_tests(run)}
    assert found == {
        "A": ("any-of missing", "none of any-of [a, b] selected; selected x, y"),
        "G": ("no relevant entity selected", "-75 no relevant entity selected: nDCG@10 0.00; selected x"),
    }
    other = doc(
        [sem("A", ["a"], exp=any_of.expectations), sem("G", ["a"], exp=graded.expectations)], model="m2"
    )
    table = render_comparison_markdown(compare_models("2026-11-19", [run, other]))
    standard = other.standard_metrics()
    assert standard is not None and "| ndcg@10 | recall@100 | mrr@10 |" in table
    assert f"| {standard['ndcg@10']:.3f} | {standard['recall@100']:.3f} | {standard['mrr@10']:.3f} |" in table
