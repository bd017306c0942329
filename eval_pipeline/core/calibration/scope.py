"""Which semantic tests a calibration covers: all, those a KB change may affect, or named ones."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from eval_pipeline.core.calibration.proposals import Scope
from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.expectations.resolution import ResolvedExpectation
from eval_pipeline.core.inputs.banks import SemanticTest
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.scoring.run_document import RunDocument


def retrieved_entities(documents: Iterable[RunDocument]) -> dict[str, set[str]]:
    """Per test id: every entity any of these runs had among its candidates or selections."""
    out: dict[str, set[str]] = {}
    for doc in documents:
        for result in doc.semantic:
            ids = {c.entity_id for c in result.candidates} | {s.entity_id for s in result.selections}
            out.setdefault(result.test_id, set()).update(ids)
    return out


def affected_tests(
    tests: Sequence[SemanticTest],
    resolved: Mapping[str, ResolvedExpectation],
    kb: KnowledgeBase,
    entity_ids: Iterable[str],
    retrieved: Mapping[str, set[str]],
) -> dict[str, list[str]]:
    """The tests an added or changed entity may affect (its expectations or latest retrieval name
    one, or it shares a topic with one), each with why (docs/calibration.md)."""
    wanted = set(entity_ids)
    topics = {t for eid in wanted if eid in kb.by_id for t in kb.by_id[eid].topics}
    out: dict[str, list[str]] = {}
    for test in tests:
        reasons = []
        named = sorted(wanted & resolved[test.test_id].expectations.entity_ids())
        if named:
            reasons.append(f"expectations name {', '.join(named)}")
        seen = sorted(wanted & retrieved.get(test.test_id, set()))
        if seen:
            reasons.append(f"last retrieval had {', '.join(seen)}")
        shared = sorted(topics & set(test.topics))
        if shared:
            reasons.append(f"topic {', '.join(shared)}")
        if reasons:
            out[test.test_id] = reasons
    return out


class ScopeError(BadInput, ValueError):
    """The requested scope names unknown tests or entities, or lacks what it needs (one line)."""


def scoped_tests(
    scope: Scope,
    tests: Sequence[SemanticTest],
    kb: KnowledgeBase,
    resolved: Mapping[str, ResolvedExpectation],
    test_ids: Sequence[str] = (),
    added_entities: Sequence[str] = (),
    retrieved: Mapping[str, set[str]] | None = None,
) -> tuple[list[SemanticTest], dict[str, list[str]]]:
    """The tests a calibration covers, in bank order, and for `affected` why each is included.
    Tests stating any-of primaries or graded judgments are left as judged (`why` says so): a
    proposal of exact primaries would coarsen them back into the one-primary model."""
    if test_ids and scope != "single":
        raise ScopeError("test ids go with the single scope")
    if added_entities and scope != "affected":
        raise ScopeError("added entities go with the affected scope")
    why: dict[str, list[str]] = {}
    if scope == "single":
        unknown = sorted(set(test_ids) - {t.test_id for t in tests})
        if not test_ids or unknown:
            raise ScopeError(f"the single scope needs known test ids (unknown: {', '.join(unknown) or '-'})")
        chosen = [t for t in tests if t.test_id in set(test_ids)]
    elif scope == "affected":
        unknown = sorted(set(added_entities) - set(kb.by_id))
        if not added_entities or unknown:
            raise ScopeError(f"the affected scope needs KB entity ids (unknown: {', '.join(unknown) or '-'})")
        why = affected_tests(tests, resolved, kb, added_entities, retrieved or {})
        chosen = [t for t in tests if t.test_id in why]
    else:
        chosen = list(tests)
    in_force = {t.test_id: resolved[t.test_id].expectations for t in chosen}
    judged = [test_id for test_id, e in in_force.items() if e.expected_any or e.relevant]
    for test_id in judged:
        why[test_id] = [JUDGED_NOT_CALIBRATED]
    return [t for t in chosen if t.test_id not in judged], why


JUDGED_NOT_CALIBRATED = "not calibrated: its any-of or graded relevance is kept as judged"
