"""The diff of graded tests (core/diff/graded.py), on two evaluations made through the real
pipeline (`evaluate`: provenance, scoring, aggregation) of an imported graded set: the BEIR
fixture with its awkward ids, and the tenant domain imported as BEIR. The head drops the best
relevant entity of named queries; the diff must name exactly those, in the collection's ids, with
nDCG@10 on each side as ir_measures computes it and the paired statistic as scipy computes it."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ir_measures
import numpy as np
import pytest
from scipy import stats

from eval_pipeline.core.diff.compare import diff_documents
from eval_pipeline.core.diff.comparison import compare_models
from eval_pipeline.core.diff.model import Cause, DeltaKind, RunDiff
from eval_pipeline.core.inputs.banks import Expectations, Mechanism, SemanticTest
from eval_pipeline.core.inputs.beir_project import ImportTargets, import_beir
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.mechanisms.retrieval import Candidate, Selection, SemanticRetrieval
from eval_pipeline.core.report.conclusion import Observed, RunSetup, evaluate
from eval_pipeline.core.report.diff_comment import MAX_LINES, render_diff_comment
from eval_pipeline.core.report.diff_text import detail_lines, render_comparison_markdown, render_diff_text
from eval_pipeline.core.scoring.aggregate import REFERENCE
from eval_pipeline.core.scoring.evaluation import Scope
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.verdicts.regression_gate import diff_gate
from eval_pipeline.core.verdicts.run_gate import Gates
from tests.beir_fixture import tenant_as_beir, write_beir
from tests.run_docs import doc, sem

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "ungraded_diff_golden.json"
SEMANTIC = Scope(banks=frozenset({Mechanism.SEMANTIC}))
NDCG10 = ir_measures.nDCG @ 10


@dataclass(frozen=True)
class Project:
    banks: Banks
    entities: list[str]  # every entity id, sorted
    originals: dict[str, str]  # entity id -> the collection's document id
    root: Path

    @property
    def tests(self) -> list[SemanticTest]:
        return list(self.banks.semantic_tests)


@pytest.fixture(params=["beir", "tenant"])
def project(request: pytest.FixtureRequest, tenant: Path, tmp_path: Path) -> Project:
    src = tmp_path / "src"
    if request.param == "beir":
        write_beir(src)
    else:
        tenant_as_beir(tenant, src)
    root = tmp_path / "proj"
    targets = ImportTargets(root / "kb", root / "test_banks", root / "models.yaml")
    import_beir(src, "test", "fixture", targets, "")
    kb, banks = load_validated(targets.kb_dir, targets.banks_dir, [])
    originals = {e.entity_id: e.source_id or e.entity_id for e in kb.entities}
    return Project(banks, sorted(originals), originals, root)


def _best(test: SemanticTest) -> list[str]:
    top = max(test.relevant.values())
    return [e for e, g in test.relevant.items() if g == top]


def _relevant(test: SemanticTest) -> list[str]:
    """The relevant entities, best first: an ideal selection."""
    return sorted((e for e, g in test.relevant.items() if g > 0), key=lambda e: (-test.relevant[e], e))


Picks = Callable[[SemanticTest], list[str]]


def _ranking(test: SemanticTest, picks: Picks, everything: Sequence[str]) -> list[str]:
    """What the test's final ranking will be: the picks, then every other entity."""
    chosen = picks(test)
    return chosen + [e for e in everything if e not in chosen]


def _retrievals(
    project: Project, picks: Picks, errored: frozenset[str] = frozenset()
) -> list[SemanticRetrieval]:
    out = []
    for t in project.tests:
        if t.test_id in errored:
            out.append(
                SemanticRetrieval(test_id=t.test_id, model="m", status="errored", error="reranker down")
            )
            continue
        ranking = _ranking(t, picks, project.entities)
        chosen = picks(t)
        out.append(
            SemanticRetrieval(
                test_id=t.test_id,
                model="m",
                status="ok",
                # The picks first, the rest after, by falling cosine: the final ranking is `ranking`.
                candidates=[Candidate(entity_id=e, score=0.9 - i / 1000) for i, e in enumerate(ranking)],
                selections=[Selection(entity_id=e, rank=i) for i, e in enumerate(chosen, 1)],
            )
        )
    return out


def _evaluation(
    banks: Banks, project: Project, date: str, retrievals: list[SemanticRetrieval]
) -> RunDocument:
    kb, _ = load_validated(project.root / "kb", project.root / "test_banks", [])
    setup = RunSetup(
        kb=kb,
        banks=banks,
        date=date,
        model="m",
        system_config={},
        implementations={m: REFERENCE for m in Mechanism},
        pass_threshold=60,
        generated_at=datetime(2026, 11, 21, 12, tzinfo=UTC),
    )
    return evaluate(setup, Observed(retrievals=retrievals), SEMANTIC, Gates()).document


def _named(project: Project) -> set[str]:
    return {t.test_id for t in project.tests[::2]}


def _head_picks(project: Project) -> Picks:
    """Named tests lose their best relevant entities; the others keep them, reversed."""
    named = _named(project)

    def picks(t: SemanticTest) -> list[str]:
        ideal = _relevant(t)
        return [e for e in ideal if e not in _best(t)] if t.test_id in named else ideal[::-1]

    return picks


def _two_evaluations(
    project: Project, errored: frozenset[str] = frozenset()
) -> tuple[RunDocument, RunDocument]:
    base = _evaluation(project.banks, project, "2026-11-20", _retrievals(project, _relevant))
    head = _evaluation(
        project.banks, project, "2026-11-21", _retrievals(project, _head_picks(project), errored)
    )
    return base, head


def _ndcg(test: SemanticTest, ranking: list[str]) -> float:
    qrels = [ir_measures.Qrel("q", e, g) for e, g in test.relevant.items()]
    run = [ir_measures.ScoredDoc("q", e, float(len(ranking) - i)) for i, e in enumerate(ranking)]
    return float(ir_measures.calc_aggregate([NDCG10], qrels, run)[NDCG10])


def test_the_diff_names_exactly_the_queries_whose_best_relevant_entity_dropped(project: Project) -> None:
    base, head = _two_evaluations(project)
    diff = diff_documents(base, head)
    sources = {t.test_id: t.source_id or t.test_id for t in project.tests}
    named = _named(project)
    dropped = diff.best_dropped()
    assert {d.test_id for d in dropped} == named
    # In the collection's own ids: the query's and the entity's.
    by_test = {t.test_id: t for t in project.tests}
    for d in dropped:
        assert d.best_dropped is not None
        assert d.best_dropped.query_id == sources[d.test_id]
        test = by_test[d.test_id]
        expected = [
            (project.originals[e], test.relevant[e], i)
            for i, e in enumerate(_relevant(test), 1)
            if e in _best(test)
        ]
        assert [(e.original_id, e.gain, e.base_rank) for e in d.best_dropped.entities] == expected
    assert any(sources[t] != t for t in named) or any(
        project.originals[e] != e for t in named for e in _best(by_test[t])
    )
    # Listed beside the regressions, in the text, the PR comment and the JSON.
    text = render_diff_text(diff)
    comment = render_diff_comment(diff, diff_gate(diff))
    assert f"== best relevant dropped ({len(named)}) ==" in text
    assert f"<details><summary>Best relevant dropped ({len(named)})</summary>" in comment
    assert len(comment.splitlines()) <= MAX_LINES
    for d in dropped:
        assert d.best_dropped is not None
        for e in d.best_dropped.entities:
            assert f"{e.original_id} (gain {e.gain}, was #{e.base_rank})" in text
            assert e.original_id in comment
    # Read back as the regression_diff asset's readers do: nothing lost, nothing refused.
    assert RunDiff.model_validate_json(diff.model_dump_json()) == diff
    dumped = json.loads(diff.model_dump_json())
    in_json = {d["best_dropped"]["query_id"] for d in dumped["deltas"] if "best_dropped" in d}
    assert in_json == {sources[t] for t in named}


def test_per_query_ndcg_deltas_equal_ir_measures_on_each_side(project: Project) -> None:
    base, head = _two_evaluations(project)
    diff = diff_documents(base, head)
    graded = {d.test_id: d.ndcg for d in diff.deltas if d.ndcg is not None}
    assert set(graded) == {t.test_id for t in project.tests}
    head_picks = _head_picks(project)
    for t in project.tests:
        change = graded[t.test_id]
        assert change is not None
        before = _ndcg(t, _ranking(t, _relevant, project.entities))
        after = _ndcg(t, _ranking(t, head_picks, project.entities))
        assert abs(change.before - before) < 1e-9 and abs(change.after - after) < 1e-9
        assert abs(change.delta - (after - before)) < 1e-9
    assert any(c is not None and c.delta < 0 for c in graded.values())


def _with_stored_ndcg(document: RunDocument, value: float, schema: str) -> RunDocument:
    rows = [
        r.model_copy(update={"evaluation": r.evaluation.model_copy(update={"graded_ndcg": value})})
        if r.evaluation
        else r
        for r in document.semantic
    ]
    provenance = document.provenance.model_copy(update={"schema_version": schema})
    return document.model_copy(update={"semantic": rows, "provenance": provenance})


def test_stored_ndcg10_is_read_from_1_10_on_and_measured_again_before(project: Project) -> None:
    base, head = _two_evaluations(project)
    measured = {d.test_id: d.ndcg for d in diff_documents(base, head).deltas}
    # 1.10+ stores nDCG@10 of the final ranking: read as stored (a planted value shows through).
    planted = diff_documents(_with_stored_ndcg(base, 0.123, "1.10"), head)
    assert {d.ndcg.before for d in planted.deltas if d.ndcg} == {0.123}
    # Before 1.10 the stored value was nDCG@6 of the selection: the ranking is measured again.
    old = diff_documents(_with_stored_ndcg(base, 0.123, "1.9"), head)
    assert {d.test_id: d.ndcg for d in old.deltas} == measured


def test_the_paired_ndcg_statistic_equals_scipys_on_the_same_pairs(project: Project) -> None:
    base, head = _two_evaluations(project)
    diff = diff_documents(base, head)
    pairs = [d.ndcg for d in diff.deltas if d.ndcg is not None]
    differences = np.array([100 * (c.after - c.before) for c in pairs])
    s = diff.graded_statistics
    assert s is not None and s.tests == len(pairs) == len(project.tests)
    reference = stats.permutation_test(
        (differences,),
        lambda x, axis: np.mean(x, axis=axis),
        permutation_type="samples",  # one sample: every sign pattern, as the sign-flip test
        n_resamples=np.inf,
        alternative="two-sided",
        vectorized=True,
    )
    assert s.p_value == round(float(reference.pvalue), 4)
    assert s.mean_difference == round(float(differences.mean()), 2)
    assert (s.wins, s.ties, s.losses) == (
        int((differences > 0).sum()),
        int((differences == 0).sum()),
        int((differences < 0).sum()),
    )
    assert s.unit == "nDCG@10 points" and "nDCG@10 points per test" in s.verdict
    assert f"statistics (graded nDCG@10): {s.verdict}" in render_diff_text(diff)
    # A model comparison adjusts the nDCG@10 comparisons across its pairs, as the score ones.
    comparison = compare_models("2026-11-21", [base, head])
    assert comparison.pairs[0].graded_statistics == s
    markdown = render_comparison_markdown(comparison)
    assert "Statistics (graded tests, nDCG@10 × 100)" in markdown
    assert f"### Best relevant dropped ({len(_named(project))})" in markdown


def _exact_primary(banks_dir: Path, test: SemanticTest) -> None:
    """The test's graded judgments replaced by its best entity as an exact primary."""
    bank = banks_dir / "semantic" / "parent_test_bank.json"
    data: dict[str, Any] = json.loads(bank.read_text(encoding="utf-8"))
    for t in data["tests"]:
        if t["test_id"] == test.test_id:
            del t["relevant"]
            t["expected_primary"] = _best(test)[:1]
    bank.write_text(json.dumps(data), encoding="utf-8")


def test_a_test_graded_on_one_side_only_is_changed_expectations_not_an_ndcg_delta(project: Project) -> None:
    base = _evaluation(project.banks, project, "2026-11-20", _retrievals(project, _relevant))
    changed = project.tests[0]  # a named test: its best entity is dropped in the head
    _exact_primary(project.root / "test_banks", changed)
    _, banks = load_validated(project.root / "kb", project.root / "test_banks", [])
    head = _evaluation(banks, project, "2026-11-21", _retrievals(project, _head_picks(project)))
    for a, b in ((base, head), (head, base)):
        diff = diff_documents(a, b)
        delta = next(d for d in diff.deltas if d.test_id == changed.test_id)
        assert Cause.EXPECTATION in delta.causes
        assert delta.ndcg is None and delta.best_dropped is None
        assert changed.test_id not in {d.test_id for d in diff.best_dropped()}
        assert diff.graded_statistics is not None and diff.graded_statistics.tests == len(project.tests) - 1
        assert not any(line.startswith("nDCG@10") for line in detail_lines(delta))


def test_an_errored_side_is_errored_not_a_delta(project: Project) -> None:
    errored = project.tests[0].test_id  # a named test, which would otherwise be named
    base, head = _two_evaluations(project, errored=frozenset({errored}))
    for diff in (diff_documents(base, head), diff_documents(head, base)):
        delta = next(d for d in diff.deltas if d.test_id == errored)
        assert delta.ndcg is None and delta.best_dropped is None
        side = delta.head if diff.head.date == "2026-11-21" else delta.base
        assert side is not None and side.label == "errored" and side.score is None
        assert errored not in {d.test_id for d in diff.best_dropped()}
        assert diff.graded_statistics is not None and diff.graded_statistics.tests == len(project.tests) - 1
    assert diff_documents(base, head).of_kind(DeltaKind.REGRESSED)  # errored after passing: no pass


def test_the_best_dropped_rule_does_not_fail_the_gate_by_itself(project: Project) -> None:
    """A named test that still passes is listed, kind `changed`, and the gate does not count it."""
    base, head = _two_evaluations(project)
    diff = diff_documents(base, head)
    gate = diff_gate(diff)
    regressed = {d.test_id for d in diff.of_kind(DeltaKind.REGRESSED)}
    for d in diff.best_dropped():
        assert d.kind in (DeltaKind.REGRESSED, DeltaKind.CHANGED)
        assert (d.test_id in " ".join(gate.reasons)) == (d.test_id in regressed)


def _ungraded_outputs() -> dict[str, str]:
    """The diff outputs of the ungraded documents of tests/core/test_diff.py."""
    from tests.core.test_diff import _base, _head

    base, head = _base(), _head()
    diff: RunDiff = diff_documents(base, head)
    gate = diff_gate(diff)
    dumped = {"gate": gate.model_dump(mode="json"), "diff": diff.model_dump(mode="json")}
    return {
        "text": render_diff_text(diff, gate),
        "markdown": render_diff_comment(diff, gate),
        "json": json.dumps(dumped, indent=2),
        "comparison": render_comparison_markdown(
            compare_models("2026-11-20", [base, head, _head(model="n")])
        ),
    }


def test_ungraded_diff_outputs_are_byte_identical_to_before_graded_diffs() -> None:
    """The golden file was rendered by the code before graded diffs existed (main at 88dea33)."""
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert _ungraded_outputs() == golden


def test_hundreds_of_dropped_best_entities_keep_the_pr_comment_within_its_budget() -> None:
    graded = Expectations(relevant={"a": 3, "b": 1})
    base = doc([sem(f"G-{i:03}", ["a", "b"], exp=graded, candidates=["a", "b", "c"]) for i in range(300)])
    head = doc(
        [sem(f"G-{i:03}", ["c", "b"], exp=graded, candidates=["c", "b", "a"]) for i in range(300)],
        date="2026-11-20",
    )
    diff = diff_documents(base, head)
    assert len(diff.best_dropped()) == 300
    comment = render_diff_comment(diff, diff_gate(diff))
    lines = comment.splitlines()
    assert len(lines) <= MAX_LINES
    assert "<details><summary>Best relevant dropped (300)</summary>" in comment
    assert any(line.startswith("- … ") and "more" in line for line in lines)
    # 300 equal nDCG@10 drops have no spread: no effect size, not one of 10^13 deviations.
    assert diff.graded_statistics is not None and diff.graded_statistics.effect_size is None
