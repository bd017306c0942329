"""How far the calibrator agrees with the clinicians: percent agreement, Cohen's kappa, a CI.

A **judgement** is one human decision about one calibrator proposal for one test: a review
decision (`calibrate --review`: accepted, rejected — the expectations in force stand — or edited),
or a human override set against the latest proposal for that test (from history or a review file);
an override with no proposal is skipped. Every entity either side names gets a role from each side
(primary, secondary, not_expected or absent; rank checks are not compared), and agreement is
measured over these (test, entity) pairs. Kappa corrects for chance agreement at the same role
frequencies (1 perfect, 0 chance level); numpy computes it (no library in the lock offers it;
scikit-learn's `cohen_kappa_score` is the same formula). Pairs of one test are not independent, so
the CI is a seeded percentile bootstrap over tests.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal, get_args

import numpy as np
from pydantic import Field

from eval_pipeline.core.calibration.review import ReviewFile, read_reviews
from eval_pipeline.core.expectations.resolution import ordered
from eval_pipeline.core.inputs.banks import Expectations, SemanticTest
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.history_file import LoadedHistory
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.markdown_text import table, text

# Per-topic figures need enough tests to mean anything: a kappa over two or three tests swings
# from -1 to 1 on a single decision. Topics with fewer judged tests are listed, not scored.
MIN_TOPIC_TESTS = 5
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0

Role = Literal["primary", "secondary", "not_expected", "absent"]
ROLES: tuple[Role, ...] = ("primary", "secondary", "not_expected", "absent")
Kind = Literal["accepted", "rejected", "edited", "override"]


class Judgement(FrozenModel):
    test_id: str
    topics: list[str] = Field(default_factory=list)
    kind: Kind
    calibrator: Expectations
    calibrator_reasoning: str
    human: Expectations
    human_reasoning: str | None = None
    by: str | None = None
    source: str = Field(description="The review id or override date the human decision comes from")


def role(e: Expectations, entity_id: str) -> Role:
    named: dict[Role, list[str]] = {
        "primary": e.expected_primary,
        "secondary": e.expected_secondary,
        "not_expected": e.not_expected,
    }
    return next((r for r, ids in named.items() if entity_id in ids), "absent")


def _named(e: Expectations) -> set[str]:
    return {*e.expected_primary, *e.expected_secondary, *e.not_expected}


def role_pairs(j: Judgement) -> list[tuple[str, Role, Role]]:
    """(entity, calibrator's role, human's role) for every entity either side names."""
    return [
        (e, role(j.calibrator, e), role(j.human, e)) for e in sorted(_named(j.calibrator) | _named(j.human))
    ]


# --- statistics ----------------------------------------------------------------------------------------


def confusion(pairs: Iterable[tuple[Role, Role]]) -> np.ndarray:
    """Rows: the calibrator's role; columns: the human's; in ROLES order."""
    matrix = np.zeros((len(ROLES), len(ROLES)), dtype=np.int64)
    for a, b in pairs:
        matrix[ROLES.index(a), ROLES.index(b)] += 1
    return matrix


def kappa(matrix: np.ndarray) -> float | None:
    """Cohen's kappa of a confusion matrix; None when undefined (no pairs, or one role only)."""
    n = matrix.sum()
    if n == 0:
        return None
    observed = np.trace(matrix) / n
    chance = float((matrix.sum(axis=1) @ matrix.sum(axis=0)) / n**2)
    if math.isclose(chance, 1.0):
        return None
    return float((observed - chance) / (1 - chance))


def bootstrap_kappa(
    units: Sequence[np.ndarray], resamples: int, seed: int, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile CI of kappa, resampling whole tests (each unit is one test's confusion matrix)."""
    if len(units) < 2:
        return None
    rng = np.random.default_rng(seed)
    stack = np.stack(units)
    draws = rng.integers(0, len(units), size=(resamples, len(units)))
    values = [k for row in draws if (k := kappa(stack[row].sum(axis=0))) is not None]
    if not values:
        return None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


class AgreementStats(FrozenModel):
    tests: int
    pairs: int
    percent_agreement: float | None
    kappa: float | None
    kappa_ci: tuple[float, float] | None = Field(description="95% percentile bootstrap over tests")
    confusion: list[list[int]] = Field(description="Rows: calibrator role; columns: human role (ROLES)")


def stats(judgements: Sequence[Judgement], resamples: int, seed: int) -> AgreementStats:
    units = [confusion((a, b) for _, a, b in role_pairs(j)) for j in judgements]
    total = sum(units, np.zeros((len(ROLES), len(ROLES)), dtype=np.int64))
    n = int(total.sum())
    return AgreementStats(
        tests=len(judgements),
        pairs=n,
        percent_agreement=float(np.trace(total) / n * 100) if n else None,
        kappa=kappa(total),
        kappa_ci=bootstrap_kappa(units, resamples, seed),
        confusion=total.tolist(),
    )


class Disagreement(FrozenModel):
    test_id: str
    entity_id: str
    calibrator_role: Role
    human_role: Role
    kind: Kind
    calibrator_reasoning: str
    human_reasoning: str | None
    by: str | None
    source: str


class AgreementReport(FrozenModel):
    judgements: int
    by_kind: dict[str, int]
    overall: AgreementStats
    by_topic: dict[str, AgreementStats]
    thin_topics: dict[str, int] = Field(description="Topics under the minimum: judged tests per topic")
    min_topic_tests: int
    resamples: int
    seed: int
    disagreements: list[Disagreement]


def agreement(
    judgements: Sequence[Judgement],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    min_topic_tests: int = MIN_TOPIC_TESTS,
) -> AgreementReport:
    topics = sorted({t for j in judgements for t in j.topics})
    per_topic = {t: [j for j in judgements if t in j.topics] for t in topics}
    shared = Disagreement.model_fields.keys() & Judgement.model_fields.keys()  # what it repeats
    disagreements = [
        Disagreement(**j.model_dump(include=shared), entity_id=entity, calibrator_role=a, human_role=b)
        for j in judgements
        for entity, a, b in role_pairs(j)
        if a != b
    ]
    return AgreementReport(
        judgements=len(judgements),
        by_kind={k: sum(j.kind == k for j in judgements) for k in get_args(Kind)},
        overall=stats(judgements, resamples, seed),
        by_topic={t: stats(js, resamples, seed) for t, js in per_topic.items() if len(js) >= min_topic_tests},
        thin_topics={t: len(js) for t, js in per_topic.items() if len(js) < min_topic_tests},
        min_topic_tests=min_topic_tests,
        resamples=resamples,
        seed=seed,
        disagreements=disagreements,
    )


# --- where judgements come from --------------------------------------------------------------------


def judgements_from(
    reviews: Sequence[ReviewFile], history: Sequence[LoadedHistory], tests: Sequence[SemanticTest]
) -> list[Judgement]:
    """Every decided review item, then every override against the latest proposal before or after it."""
    topics = {t.test_id: t.topics for t in tests}
    out: list[Judgement] = []
    proposals: defaultdict[str, list[tuple[datetime, Expectations, str]]] = defaultdict(list)
    for review in reviews:
        for item in review.items:
            proposals[item.test_id].append((review.created_at, item.diff.proposed, item.diff.reasoning))
            if item.decision == "pending" or not item.reviewable:
                continue
            # What is applied for an acceptance or an edit; a rejection keeps what was in force.
            human = item.diff.previous if item.decision == "rejected" else item.applied_expectations
            out.append(
                Judgement(
                    test_id=item.test_id,
                    topics=topics.get(item.test_id, item.topics),
                    kind=item.decision,
                    calibrator=item.diff.proposed,
                    calibrator_reasoning=item.diff.reasoning,
                    human=human,
                    human_reasoning=item.note,
                    by=item.decided_by or (review.applied.by if review.applied else None),
                    source=f"review {review.review_id}",
                )
            )
    overrides = []
    for loaded in ordered(history):
        for change in loaded.entry.changes:
            if change.human_override is None and change.updated is not None:
                proposal = (loaded.entry.version, change.updated, change.opus_reasoning or "")
                proposals[change.test_id].append(proposal)
            elif change.human_override is not None and not change.human_override.withdraw:
                overrides.append((change.test_id, change.human_override))
    for test_id, override in overrides:
        if test_id not in proposals or test_id not in topics:
            continue
        _, proposed, reasoning = max(proposals[test_id], key=lambda p: p[0])
        out.append(
            Judgement(
                test_id=test_id,
                topics=topics[test_id],
                kind="override",
                calibrator=proposed,
                calibrator_reasoning=reasoning,
                human=override.expectations(),
                human_reasoning=override.reason,
                by=override.by,
                source=f"human_override_{override.override_date}",
            )
        )
    return out


def agreement_from_files(
    calibration_dir: Path,
    banks: Banks,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    min_topic_tests: int = MIN_TOPIC_TESTS,
) -> tuple[AgreementReport, list[str]]:
    """The report from the review files and the banks' history, and the unreadable review files."""
    reviews, unreadable = read_reviews(calibration_dir)
    judgements = judgements_from(reviews, banks.history, banks.semantic_tests)
    report = agreement(judgements, resamples=resamples, seed=seed, min_topic_tests=min_topic_tests)
    return report, unreadable


# --- markdown ------------------------------------------------------------------------------------------


def _kappa_text(s: AgreementStats) -> str:
    if s.kappa is None:
        return "undefined"
    ci = f" (95% CI {s.kappa_ci[0]:.2f} to {s.kappa_ci[1]:.2f})" if s.kappa_ci else ""
    return f"{s.kappa:.2f}{ci}"


def _percent(s: AgreementStats) -> str:
    return "-" if s.percent_agreement is None else f"{s.percent_agreement:.1f}%"


def summary_line(report: AgreementReport) -> str:
    o = report.overall
    kinds = ", ".join(f"{n} {k}" for k, n in report.by_kind.items())
    return (
        f"agreement over {report.judgements} human decisions ({kinds}), {o.pairs} test x entity pairs: "
        f"{_percent(o)} agree, Cohen's kappa {_kappa_text(o)}"
    )


def markdown(report: AgreementReport) -> str:
    o = report.overall
    lines = [
        "# Calibrator vs clinicians: agreement",
        "",
        summary_line(report) + ".",
        "",
        "Kappa corrects the agreement for chance (1 perfect, 0 chance level, < 0 worse than chance); "
        f"the CI resamples tests ({report.resamples} bootstrap resamples, seed {report.seed}).",
        "",
        "## Confusion (rows: calibrator, columns: human)",
        "",
        *table(
            ("calibrator \\ human", *ROLES), [(r, *row) for r, row in zip(ROLES, o.confusion, strict=True)]
        ),
        f"## Per topic (at least {report.min_topic_tests} judged tests)",
        "",
    ]
    if report.by_topic:
        by_topic = report.by_topic.items()
        topics = [(text(t), s.tests, s.pairs, _percent(s), _kappa_text(s)) for t, s in by_topic]
        lines += table(("topic", "tests", "pairs", "agree", "kappa"), topics)[:-1]
    else:
        lines.append("No topic has enough judged tests yet.")
    if report.thin_topics:
        thin = ", ".join(f"{text(t)} ({n})" for t, n in report.thin_topics.items())
        lines += ["", f"Too few to score: {thin}."]
    lines += ["", "## Disagreements", ""]
    if report.disagreements:
        header: tuple[str, ...] = ("test", "entity", "calibrator", "human", "decision")
        header += ("calibrator's reasoning", "human's reasoning")
        rows = [
            (
                text(d.test_id),
                text(d.entity_id),
                d.calibrator_role,
                d.human_role,
                f"{d.kind} ({text(d.by or '-')})",
                text(d.calibrator_reasoning or "-"),
                text(d.human_reasoning or "-"),
            )
            for d in report.disagreements
        ]
        lines += table(header, rows)[:-1]
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"
