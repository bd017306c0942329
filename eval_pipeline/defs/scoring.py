"""How the system compares to expectations: the dated expectation snapshot, scored results per
mechanism, and the aggregate per model and date."""

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import dagster as dg
import pandas as pd

from eval_pipeline.core.dates import end_of_day
from eval_pipeline.core.expectations.resolution import (
    ExpectationConflict,
    ResolvedExpectation,
    resolve,
    source_summary,
)
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.core.report.conclusion import ScoredBanks, aggregate_scope
from eval_pipeline.core.report.tables import from_frame, result_columns, to_frame
from eval_pipeline.core.scoring.aggregate import Aggregate
from eval_pipeline.core.scoring.evaluation import MechanismOutput, Scope, score_semantic
from eval_pipeline.core.scoring.implementations import SystemResults, score_system
from eval_pipeline.core.scoring.registry import ALWAYS, DETERMINISTIC, PATTERN, BankResults, Deterministic
from eval_pipeline.core.scoring.results import ResultBase, SemanticResult
from eval_pipeline.defs.automation_conditions import evaluation_asset
from eval_pipeline.defs.inputs import JSON_IO, HistorySet
from eval_pipeline.defs.metadata import aggregate_metadata, bank_metadata, readable
from eval_pipeline.defs.partitions import (
    DATE_OF_MODEL_DATE,
    date_partitions,
    model_date_partitions,
    split_key,
)
from eval_pipeline.defs.resources import ProvidersResource, RunScopeResource

GROUP = "scoring"
PARQUET_IO = "parquet_io"
BY_DATE = dg.AssetIn(partition_mapping=DATE_OF_MODEL_DATE)


class ResolvedSet(FrozenModel):
    """Every semantic test's expectations as of the end of one date, with their sources."""

    date: str
    resolved: dict[str, ResolvedExpectation]
    sources: dict[str, int]
    conflicts: list[ExpectationConflict]


@evaluation_asset(GROUP, date_partitions, JSON_IO)
def resolved_expectations(
    context: dg.AssetExecutionContext, test_banks: Banks, expectation_history: HistorySet
) -> dg.Output[ResolvedSet]:
    """Human override > latest calibration > bank, using only history written by the date's end."""
    date = context.partition_key
    tests = test_banks.semantic_tests
    resolved = resolve(tests, expectation_history.files, as_of=end_of_day(date))
    sources = source_summary(r.source for r in resolved.values())
    conflicts = [r.conflict for r in resolved.values() if r.conflict is not None]
    return dg.Output(
        ResolvedSet(date=date, resolved=resolved, sources=sources, conflicts=conflicts),
        metadata=readable({**sources, "conflicts": len(conflicts)}),
    )


def _results_output(results: Sequence[ResultBase], *, plotted: bool = True) -> dg.Output[pd.DataFrame]:
    return dg.Output(
        to_frame(results, result_columns), metadata=readable(bank_metadata(results), plotted=plotted)
    )


@evaluation_asset(
    GROUP, model_date_partitions, PARQUET_IO, ins={"resolved_expectations": BY_DATE, "test_banks": BY_DATE}
)
def semantic_results(
    semantic_retrievals: pd.DataFrame, resolved_expectations: ResolvedSet, test_banks: Banks
) -> dg.Output[pd.DataFrame]:
    """Each retrieval scored against the expectation snapshot of its date."""
    retrievals = from_frame(semantic_retrievals, SemanticRetrieval)
    return _results_output(
        score_semantic(test_banks.semantic_tests, resolved_expectations.resolved, retrievals), plotted=False
    )


def results_name(d: Deterministic[Any, Any]) -> str:
    return f"{d.mechanism.value}_results"


ALWAYS_CHECK = "always_entities_present"


def _reference_results(d: Deterministic[Any, Any]) -> dg.AssetsDefinition:
    """The reference outputs of the date scored against the bank; pattern names its critical
    failures, and always checks that every expected entity loaded (ERROR)."""
    always_check = dg.AssetCheckSpec(
        ALWAYS_CHECK,
        asset=results_name(d),
        partitions_def=date_partitions,  # the UI names the date checked
        description="Every always test loads all its expected entities (ERROR).",
    )

    @evaluation_asset(
        GROUP,
        date_partitions,
        PARQUET_IO,
        name=results_name(d),
        description=f"The reference {d.outputs_name} scored against the {d.mechanism.value} bank.",
        ins={d.outputs_name: dg.AssetIn(), "test_banks": dg.AssetIn()},
        check_specs=[always_check] if d is ALWAYS else None,
    )
    def results(
        test_banks: Banks, **outputs: pd.DataFrame
    ) -> Iterator[dg.Output[pd.DataFrame] | dg.AssetCheckResult]:
        rows = d.score(d.tests(test_banks), from_frame(outputs[d.outputs_name], MechanismOutput))
        out = _results_output(rows)
        if d is PATTERN:
            critical = [r.test_id for r in rows if r.critical_failure]
            out = out.with_metadata({**out.metadata, "critical_failures": ", ".join(critical) or "none"})
        yield out
        if d is ALWAYS:
            missing = {r.test_id: r.missing for r in rows if r.missing}
            yield dg.AssetCheckResult(
                check_name=ALWAYS_CHECK,
                passed=not missing,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata={"missing": dg.MetadataValue.json(missing)},
            )

    return results


REFERENCE_RESULTS = [_reference_results(d) for d in DETERMINISTIC]
REFERENCE_TABLES = [results_name(d) for d in DETERMINISTIC]


@evaluation_asset(GROUP, model_date_partitions, JSON_IO, ins={"test_banks": BY_DATE})
def system_results(
    context: dg.AssetExecutionContext,
    providers: ProvidersResource,
    system_outputs: pd.DataFrame,
    test_banks: Banks,
) -> dg.Output[SystemResults]:
    """The model's implementation per bank, and its own system's state, pattern and always
    outputs scored (the banks it leaves to the reference are scored once per date)."""
    model, _ = split_key(context)
    implementations = providers.model(model).implementations
    result = score_system(test_banks, implementations, from_frame(system_outputs, MechanismOutput))
    return dg.Output(
        result,
        metadata=readable(
            {
                **{f"implementation_{m.value}": impl for m, impl in implementations.items()},
                "errored": result.errored,
            },
            plotted=False,
        ),
    )


def bank_results(
    system: SystemResults, semantic: pd.DataFrame, reference: Mapping[str, pd.DataFrame]
) -> BankResults:
    """The results the model is judged on, from its semantic results and the date's reference tables."""
    tables = {d.mechanism: from_frame(reference[results_name(d)], d.result) for d in DETERMINISTIC}
    return system.judged({Mechanism.SEMANTIC: from_frame(semantic, SemanticResult), **tables})


@evaluation_asset(GROUP, model_date_partitions, JSON_IO, ins=dict.fromkeys(REFERENCE_TABLES, BY_DATE))
def scored_aggregate(
    scope: RunScopeResource,
    semantic_results: pd.DataFrame,
    system_results: SystemResults,
    **reference: pd.DataFrame,
) -> dg.Output[Aggregate]:
    """Bank scores, breakdowns, combined score (weights renormalised over banks run) and health,
    with the implementation that produced each bank."""
    scored = ScoredBanks(bank_results(system_results, semantic_results, reference))
    agg = aggregate_scope(scored, Scope(), scope.pass_threshold, system_results.implementations)
    return dg.Output(agg, metadata=readable(aggregate_metadata(agg), plotted=False))
