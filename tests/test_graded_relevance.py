"""Any-of and graded tests, the standard cutoffs and the candidate depth, end to end: the real
`run` (Dagster, the bundled embedder) on copies of the sample and of the tenant domain, with a few
any-of and graded tests added to the copy's semantic bank."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from eval_pipeline import cli
from eval_pipeline.core.inputs.banks import Expectations
from eval_pipeline.core.mechanisms.retrieval import final_ranking
from eval_pipeline.core.scoring.results import RESULT_SCHEMA_VERSION
from eval_pipeline.core.scoring.run_document import RunDocument, read_document
from tests.core.test_graded_scoring import _independent
from tests.embedding_cache import warm

REPO = Path(__file__).resolve().parents[1]
DATE = "2026-11-20"
DEEP = "local-deep"  # local-minilm keeping 40 candidates
# (domain, kb, banks dir, semantic bank, tests kept as they are, tests to derive new kinds from)
DOMAINS = {
    "sample": ("kb", "test_banks", "semantic/parent_test_bank.json", 4, 3),
    "tenant": ("tenant/kb.yaml", "tenant/banks", "semantic/tenant_questions.json", 3, 2),
}


def _derived(tests: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """For the first `count` tests: one any-of twin (its primary or another test's) and one graded
    twin (primary 3, secondaries 2, another test's primary 1, a not-expected entity judged 0)."""
    out = []
    for i, t in enumerate(tests[:count]):
        other = tests[(i + 1) % len(tests)]["expected_primary"][0]
        base = {
            k: v for k, v in t.items() if k not in ("expected_primary", "expected_secondary", "rank_check")
        }
        base["not_expected"] = [e for e in t["not_expected"] if e != other]
        gains = {**{e: 2 for e in t["expected_secondary"]}, other: 1, t["expected_primary"][0]: 3}
        gains |= {e: 0 for e in base["not_expected"][:1]}
        base["not_expected"] = base["not_expected"][1:]
        out.append(
            {**base, "test_id": f"{t['test_id']}-ANY", "expected_any": [t["expected_primary"][0], other]}
        )
        out.append({**base, "test_id": f"{t['test_id']}-GRADED", "relevant": gains})
    return out


@pytest.fixture(scope="module", params=sorted(DOMAINS))
def evaluated(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, local_embeddings: Path
) -> Iterator[dict[str, Any]]:
    domain = request.param
    kb, banks, bank, kept, derive = DOMAINS[domain]
    root = tmp_path_factory.mktemp(f"graded_{domain}")
    if domain == "sample":
        shutil.copytree(REPO / "kb", root / "kb")
        shutil.copytree(REPO / "test_banks", root / "test_banks")
    else:
        shutil.copytree(REPO / "tests/fixtures/tenant_domain", root / "tenant")
    models = yaml.safe_load((REPO / "models.yaml").read_text())
    models["models"][DEEP] = {**models["models"]["local-minilm"], "candidate_depth": 40}
    (root / "models.yaml").write_text(yaml.safe_dump(models))
    path = root / banks / bank
    data = json.loads(path.read_text())
    old = data["tests"][:kept]
    new = _derived(data["tests"], derive)
    data["tests"] += new
    path.write_text(json.dumps(data))
    ids = [t["test_id"] for t in old + new]
    # The KB and prompts embedded as a first run leaves them (the new tests reuse old prompts):
    # what is checked here is scoring and depth, not the embedder (tests/test_cli.py runs it cold).
    warm(root / ".cache", local_embeddings)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        argv = ["run", "--kb", kb, "--banks-dir", banks, "--banks", "semantic", "--date", DATE]
        argv += [a for i in ids for a in ("--test", i)]
        code = cli.main([*argv, "--model", "local-minilm", "--model", DEEP])
        assert code in (0, 1)  # ran; a gate may fail on the sample's real misses
    docs = {
        m: read_document(next((root / "results").rglob(f"{m}/{DATE}/results.json")))
        for m in ("local-minilm", DEEP)
    }
    yield {"root": root, "docs": docs, "old": {t["test_id"] for t in old}, "new": new}


def _old_rule(selected: list[str], exp: Expectations) -> int:
    """The specification's rule, written out: a missing primary is 0, else 100 minus penalties."""
    if any(e not in selected for e in exp.expected_primary):
        return 0
    lost = 10 * sum(e not in selected for e in exp.expected_secondary)
    lost += 20 * sum(e in selected for e in exp.not_expected)
    lost += 10 * sum(
        rc.higher in selected
        and rc.lower in selected
        and selected.index(rc.higher) > selected.index(rc.lower)
        for rc in exp.rank_check
    )
    return max(0, 100 - lost)


def _ndcg10(ranking: list[str], gains: dict[str, int]) -> float:
    dcg = sum(gains.get(e, 0) / math.log2(i + 2) for i, e in enumerate(ranking[:10]))
    ideal = sorted((g for g in gains.values() if g > 0), reverse=True)[:10]
    return dcg / sum(g / math.log2(i + 2) for i, g in enumerate(ideal))


def _selected(r: Any) -> list[str]:
    return [s.entity_id for s in sorted(r.selections, key=lambda s: s.rank)]


def test_old_tests_score_by_the_old_rule_and_new_ones_by_theirs(evaluated: dict[str, Any]) -> None:
    doc: RunDocument = evaluated["docs"]["local-minilm"]
    seen = {r.test_id for r in doc.semantic}
    assert seen == evaluated["old"] | {t["test_id"] for t in evaluated["new"]}
    for r in doc.semantic:
        selected = _selected(r)
        exp = r.expectations
        if r.test_id in evaluated["old"]:
            assert r.score == _old_rule(selected, exp), r.test_id
        elif exp.expected_any:
            hit = any(e in selected for e in exp.expected_any)
            assert r.hard_fail is not hit and (r.score == 0) is not hit, r.test_id
        else:  # graded: ceil(25 + 75 × nDCG@10 of the final ranking), never a hard fail
            ndcg = _ndcg10(final_ranking(r.selections, r.candidates), exp.relevant)
            expected = math.ceil(25 + 75 * ndcg - 1e-9) - 20 * sum(e in selected for e in exp.not_expected)
            assert r.score == max(0, expected) and not r.hard_fail, r.test_id
            assert r.no_relevant_selected is not any(exp.relevant.get(e, 0) > 0 for e in selected), r.test_id
            assert r.evaluation is not None and r.evaluation.graded_ndcg == pytest.approx(ndcg, abs=1e-12)


def test_ir_metrics_equal_ir_measures_on_the_stored_rankings(evaluated: dict[str, Any]) -> None:
    for doc in evaluated["docs"].values():
        assert doc.provenance.schema_version == RESULT_SCHEMA_VERSION
        assert doc.ir_metrics is not None
        (recall,) = [name for name in doc.ir_metrics if name.startswith("recall@")]
        depth = int(recall.split("@")[1])
        assert depth in (100, doc.candidate_depth), recall  # never named deeper than it was cut
        for name, value in _independent(list(doc.semantic), depth).items():
            assert abs(doc.ir_metrics[name] - value) < 1e-9, name


def test_reports_show_the_standard_cutoffs(evaluated: dict[str, Any]) -> None:
    doc: RunDocument = evaluated["docs"]["local-minilm"]
    report = next(evaluated["root"].rglob(f"local-minilm/{DATE}/report.md")).read_text()
    assert doc.ir_metrics is not None
    assert f"ndcg@10 {doc.ir_metrics['ndcg@10']:.3f}" in report and "Standard cutoffs over" in report


def test_the_candidate_depth_is_the_models_and_part_of_its_identity(evaluated: dict[str, Any]) -> None:
    shallow, deep = evaluated["docs"]["local-minilm"], evaluated["docs"][DEEP]
    assert "candidate_depth" not in shallow.provenance.system_config  # unchanged identity at 15
    assert deep.provenance.system_config["candidate_depth"] == 40
    assert deep.candidate_depth == 40 and shallow.candidate_depth == 15
    for s, d in zip(shallow.semantic, deep.semantic, strict=True):
        assert len(s.candidates) <= 15 and len(d.candidates) <= 40
        assert [c.entity_id for c in d.candidates[: len(s.candidates)]] == [c.entity_id for c in s.candidates]
    assert any(len(d.candidates) > 15 for d in deep.semantic) or all(
        len(d.candidates) < 15 for d in deep.semantic
    )
