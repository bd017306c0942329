"""How the system compares to expectations: the dated expectation snapshot, scored results per
mechanism, and the aggregate per model and date."""

from collections.abc import Iterator, Sequence

import dagster as dg
import pandas as pd
from pydantic import BaseModel, ConfigDict

from eval_pipeline.core.dates import end_of_day
from eval_pipeline.core.expectations.resolution import (
    ExpectationConflict,
    ResolvedExpectation,
    resolve,
    source_summary,
)
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.core.report.conclusion import ScoredBanks, aggregate_scope
from eval_pipeline.core.report.tables import from_frame, result_columns, to_frame
from eval_pipeline.core.scoring.aggregate import Aggregate
from eval_pipeline.core.scoring.evaluation import (
    MechanismOutput,
    Scope,
    score_always,
    score_pattern,
    score_semantic,
    score_state,
)
from eval_pipeline.core.scoring.implementations import SystemResults, score_system
from eval_pipeline.core.scoring.results import (
    AlwaysResult,
    PatternResult,
    ResultBase,
    SemanticResult,
    StateResult,
)
from eval_pipeline.defs.automation_conditions import EAGER
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


class ResolvedSet(BaseModel):
    """Every semantic test's expectations as of the end of one date, with their sources."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    date: str
    resolved: dict[str, ResolvedExpectation]
    sources: dict[str, int]
    conflicts: list[ExpectationConflict]


@dg.asset(
    group_name=GROUP, partitions_def=date_partitions, io_manager_key=JSON_IO, automation_condition=EAGER
)
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


@dg.asset(
    group_name=GROUP,
    partitions_def=model_date_partitions,
    io_manager_key=PARQUET_IO,
    ins={"resolved_expectations": BY_DATE, "test_banks": BY_DATE},
    automation_condition=EAGER,
)
def semantic_results(
    semantic_retrievals: pd.DataFrame, resolved_expectations: ResolvedSet, test_banks: Banks
) -> dg.Output[pd.DataFrame]:
    """Each retrieval scored against the expectation snapshot of its date."""
    retrievals = from_frame(semantic_retrievals, SemanticRetrieval)
    return _results_output(
        score_semantic(test_banks.semantic_tests, resolved_expectations.resolved, retrievals), plotted=False
    )


def _outputs(frame: pd.DataFrame) -> list[MechanismOutput]:
    return from_frame(frame, MechanismOutput)


@dg.asset(
    group_name=GROUP, partitions_def=date_partitions, io_manager_key=PARQUET_IO, automation_condition=EAGER
)
def state_results(state_activations: pd.DataFrame, test_banks: Banks) -> dg.Output[pd.DataFrame]:
    """The reference state handlers' activations scored against the state bank."""
    tests = test_banks.state_tests
    return _results_output(score_state(tests, _outputs(state_activations)))


@dg.asset(
    group_name=GROUP, partitions_def=date_partitions, io_manager_key=PARQUET_IO, automation_condition=EAGER
)
def pattern_results(pattern_matches: pd.DataFrame, test_banks: Banks) -> dg.Output[pd.DataFrame]:
    """The reference pattern matches scored against the pattern bank, critical failures named."""
    tests = test_banks.pattern_tests
    results = score_pattern(tests, _outputs(pattern_matches))
    out = _results_output(results)
    critical = [r.test_id for r in results if r.critical_failure]
    return out.with_metadata({**out.metadata, "critical_failures": ", ".join(critical) or "none"})


@dg.asset(
    group_name=GROUP,
    partitions_def=date_partitions,
    io_manager_key=PARQUET_IO,
    automation_condition=EAGER,
    check_specs=[
        dg.AssetCheckSpec(
            "always_entities_present",
            asset="always_results",
            partitions_def=date_partitions,  # the UI names the date checked
            description="Every always test loads all its expected entities (ERROR).",
        )
    ],
)
def always_results(
    always_loads: pd.DataFrame, test_banks: Banks
) -> Iterator[dg.Output[pd.DataFrame] | dg.AssetCheckResult]:
    """The reference always-loaded entities scored against the always bank (all or nothing)."""
    tests = test_banks.always_tests
    results = score_always(tests, _outputs(always_loads))
    yield _results_output(results)
    missing = {r.test_id: r.missing for r in results if r.missing}
    yield dg.AssetCheckResult(
        check_name="always_entities_present",
        passed=not missing,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={"missing": dg.MetadataValue.json(missing)},
    )


@dg.asset(
    group_name=GROUP,
    partitions_def=model_date_partitions,
    io_manager_key=JSON_IO,
    ins={"test_banks": BY_DATE},
    automation_condition=EAGER,
)
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
    result = score_system(test_banks, implementations, _outputs(system_outputs))
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
    system: SystemResults,
    state_results: pd.DataFrame,
    pattern_results: pd.DataFrame,
    always_results: pd.DataFrame,
) -> tuple[list[StateResult], list[PatternResult], list[AlwaysResult]]:
    """The results the model is judged on (core's rule), from the date's reference tables."""
    return system.judged(
        from_frame(state_results, StateResult),
        from_frame(pattern_results, PatternResult),
        from_frame(always_results, AlwaysResult),
    )


@dg.asset(
    group_name=GROUP,
    partitions_def=model_date_partitions,
    io_manager_key=JSON_IO,
    ins={name: BY_DATE for name in ("state_results", "pattern_results", "always_results")},
    automation_condition=EAGER,
)
def scored_aggregate(
    scope: RunScopeResource,
    semantic_results: pd.DataFrame,
    system_results: SystemResults,
    state_results: pd.DataFrame,
    pattern_results: pd.DataFrame,
    always_results: pd.DataFrame,
) -> dg.Output[Aggregate]:
    """Bank scores, breakdowns, combined score (weights renormalised over banks run) and health,
    with the implementation that produced each bank."""
    state, pattern, always = bank_results(system_results, state_results, pattern_results, always_results)
    scored = ScoredBanks(from_frame(semantic_results, SemanticResult), state, pattern, always)
    agg = aggregate_scope(scored, Scope(), scope.pass_threshold, system_results.implementations)
    return dg.Output(agg, metadata=readable(aggregate_metadata(agg), plotted=False))
