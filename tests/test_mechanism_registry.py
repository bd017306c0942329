"""The four mechanisms are declared once (core/scoring/registry.py): the combined score's weights,
the bank and document fields, and the Dagster graph's per-mechanism assets all come from it, and
the route, the aggregate and the assets name no bank one by one."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import get_args

import dagster as dg

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.scoring.aggregate import aggregate
from eval_pipeline.core.scoring.implementations import SystemResults
from eval_pipeline.core.scoring.registry import DETERMINISTIC, MECHANISMS
from eval_pipeline.core.scoring.results import AnyResult
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.defs.graph import MATERIALIZABLE
from tests.run_docs import always, pattern, sem, state

PACKAGE = Path(__file__).resolve().parents[1] / "eval_pipeline"
# Modules that handle every bank: they loop over the registry instead of naming banks.
BANK_LOOPS = (
    "core/report/conclusion.py",
    "core/scoring/aggregate.py",
    "core/scoring/implementations.py",
    "core/scoring/reevaluate.py",
    "core/scoring/run_document.py",
    "defs/scoring.py",
    "defs/system_outputs.py",
    "defs/graph.py",
)
NAMED_BANK = re.compile(
    r"Mechanism\.(STATE|PATTERN|ALWAYS)|\b(state|pattern|always)_(tests|outputs|results)\b"
)


def test_every_mechanism_is_declared_with_its_specification_weight() -> None:
    assert list(MECHANISMS) == list(Mechanism)
    weights = {m: d.weight for m, d in MECHANISMS.items()}
    assert weights == {
        Mechanism.SEMANTIC: 0.60,
        Mechanism.STATE: 0.15,
        Mechanism.PATTERN: 0.15,
        Mechanism.ALWAYS: 0.10,
    }
    assert [d.mechanism for d in DETERMINISTIC] == [m for m in Mechanism if m is not Mechanism.SEMANTIC]


def test_the_combined_score_weighs_banks_by_the_registry_renormalised_over_banks_run() -> None:
    every: dict[Mechanism, Sequence[AnyResult]] = {
        Mechanism.SEMANTIC: [sem("S", ["a"])],
        Mechanism.STATE: [state("ST", ["h1"]), state("ST-2", [])],
        Mechanism.PATTERN: [pattern("P", matched=True)],
        Mechanism.ALWAYS: [always("A", [])],
    }
    for ran in (list(Mechanism), [Mechanism.STATE, Mechanism.ALWAYS]):
        agg = aggregate({m: every[m] for m in ran})
        total = sum(MECHANISMS[m].weight for m in ran)
        assert agg.weights == {m: round(MECHANISMS[m].weight / total, 4) for m in ran}
        averages = {m: agg.banks[m].average or 0.0 for m in ran}
        assert len(set(averages.values())) > 1  # the weights matter
        expected = sum(averages[m] * MECHANISMS[m].weight / total for m in ran)
        assert agg.combined_score is not None and abs(agg.combined_score - expected) < 1e-9


def test_banks_the_results_document_and_the_systems_results_hold_one_field_per_mechanism() -> None:
    for m, d in MECHANISMS.items():
        assert m.value in Banks.model_fields
        assert get_args(RunDocument.model_fields[m.value].annotation) == (d.result,)
    for d in DETERMINISTIC:  # the stored `system_results` asset
        (rows, _) = get_args(SystemResults.model_fields[d.mechanism.value].annotation)
        assert get_args(rows) == (d.result,)


def test_the_graph_has_each_deterministic_mechanism_s_reference_assets_from_the_registry() -> None:
    specs = {s.key: s for a in MATERIALIZABLE for s in a.specs}
    aggregate_deps = {dep.asset_key for dep in specs[dg.AssetKey("scored_aggregate")].deps}
    for d in DETERMINISTIC:
        outputs, results = dg.AssetKey(d.outputs_name), dg.AssetKey(f"{d.mechanism.value}_results")
        assert specs[outputs].description == d.outputs_doc
        kb = {dg.AssetKey("knowledge_base")} if d.reads_kb else set()
        assert {dep.asset_key for dep in specs[outputs].deps} == {dg.AssetKey("test_banks"), *kb}
        assert {dep.asset_key for dep in specs[results].deps} == {outputs, dg.AssetKey("test_banks")}
        assert results in aggregate_deps


def test_the_route_the_aggregate_and_the_assets_name_no_bank_one_by_one() -> None:
    named = {
        f"{module}:{n}": line.strip()
        for module in BANK_LOOPS
        for n, line in enumerate((PACKAGE / module).read_text().splitlines(), 1)
        if NAMED_BANK.search(line)
    }
    assert named == {}
