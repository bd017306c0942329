"""A seeded history for the HTML report's tests: 7 dates × 2 models of real evaluations of a
project's KB and banks, made by the one core route in-process (running the pipeline 14 times
would take minutes).

What each model selects varies by date in a fixed pattern (a secondary dropped here, a forbidden
entity there), so the trend lines move. On the last date one model loses the primary of one
semantic test — the planted regression "since last run" must name — and one test of the other
model errors.
"""

from __future__ import annotations

import zlib
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from eval_pipeline.core.inputs.banks import Mechanism, SemanticTest
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.mechanisms.retrieval import Candidate, Selection, SemanticRetrieval
from eval_pipeline.core.report.conclusion import Observed, RunSetup, evaluate
from eval_pipeline.core.scoring.aggregate import REFERENCE
from eval_pipeline.core.scoring.evaluation import Scope
from eval_pipeline.core.scoring.run_document import RESULTS_FILE, RunDocument
from eval_pipeline.core.verdicts.run_gate import Gates

MODELS = ("local-minilm", "local-hybrid")
FIRST = date(2026, 11, 10)
DATES = [(FIRST + timedelta(days=i)).isoformat() for i in range(7)]
REGRESSING_MODEL, ERRORING_MODEL = MODELS[1], MODELS[0]
ERROR = "reranker timed out after 3 attempts"


def _wobble(model: str, day: str, test_id: str) -> int:
    """0-9, fixed for a model, date and test: what goes wrong with the selection that day."""
    return zlib.crc32(f"{model}|{day}|{test_id}".encode()) % 6


def _retrieval(
    test: SemanticTest, kb: KnowledgeBase, model: str, day: str, planted: str, errors: str
) -> SemanticRetrieval:
    if model == ERRORING_MODEL and day == DATES[-1] and test.test_id == errors:
        return SemanticRetrieval(test_id=test.test_id, model=model, status="errored", error=ERROR)
    wobble = _wobble(model, day, test.test_id)
    primary = list(test.expected_primary or test.expected_any[:1])
    chosen = primary + list(test.expected_secondary)
    if wobble in (1, 2) and test.expected_secondary:
        chosen = chosen[:-1]  # a secondary missed
    if wobble == 3 and test.not_expected:
        chosen.append(test.not_expected[0])  # a forbidden entity selected
    if wobble == 4 and len(chosen) > 1:
        chosen[0], chosen[1] = chosen[1], chosen[0]  # ranked the wrong way round
    if model == REGRESSING_MODEL and test.test_id == planted:
        # The planted regression: perfect every day, its primary lost on the last.
        chosen = [*primary, *test.expected_secondary] if day != DATES[-1] else list(test.expected_secondary)
    others = [e.entity_id for e in kb.entities if e.entity_id not in chosen][:6]
    pool = [*chosen, *others]
    return SemanticRetrieval(
        test_id=test.test_id,
        model=model,
        status="ok",
        candidates=[Candidate(entity_id=e, score=round(0.82 - i / 40, 3)) for i, e in enumerate(pool)],
        selections=[
            Selection(entity_id=e, rank=i, reason=f"covers it ({e})") for i, e in enumerate(chosen, 1)
        ],
    )


def planted_test(banks: Banks) -> str:
    """The semantic test the regression is planted in: the first with a secondary (so its
    primary can go missing while something is still selected)."""
    return next(t.test_id for t in banks.semantic_tests if t.expected_secondary)


def errored_test(banks: Banks) -> str:
    """The semantic test that errors on the last date: the bank's last."""
    return banks.semantic_tests[-1].test_id


def evaluation(kb: KnowledgeBase, banks: Banks, model: str, day: str) -> RunDocument:
    setup = RunSetup(
        kb=kb,
        banks=banks,
        date=day,
        model=model,
        system_config={"embedder": {"kind": "local"}},
        implementations={m: REFERENCE for m in Mechanism},
        pass_threshold=60,
        generated_at=datetime.fromisoformat(day).replace(hour=6, tzinfo=UTC),
    )
    planted, errors = planted_test(banks), errored_test(banks)
    observed = Observed([_retrieval(t, kb, model, day, planted, errors) for t in banks.semantic_tests])
    return evaluate(setup, observed, Scope(), Gates()).document


def seed_history(kb_path: Path, banks_dir: Path, results: Path) -> list[RunDocument]:
    """Every model's evaluation of every date, written as results/<model>/<date>/results.json."""
    kb, banks = load_validated(kb_path, banks_dir, [])
    docs = []
    for model in MODELS:
        for day in DATES:
            doc = evaluation(kb, banks, model, day)
            path = results / model / day / RESULTS_FILE
            path.parent.mkdir(parents=True)
            path.write_text(doc.model_dump_json())
            docs.append(doc)
    return docs
