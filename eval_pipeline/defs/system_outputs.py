"""What the system did: semantic retrievals per model, the built-in deterministic mechanisms'
outputs per date, and per model the team's own system's outputs for the banks it answers.

These are kept apart from scoring so a recalibration re-scores without a single retrieval call.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import dagster as dg
import pandas as pd

from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.report.tables import retrieval_columns, to_frame
from eval_pipeline.core.scoring.evaluation import MechanismOutput, Scope
from eval_pipeline.core.scoring.registry import DETERMINISTIC, Deterministic
from eval_pipeline.defs.automation_conditions import AUTOMATION_RUN_TAG, evaluation_asset
from eval_pipeline.defs.metadata import prompt_cache_metadata, readable
from eval_pipeline.defs.partitions import date_partitions, model_date_partitions, split_key
from eval_pipeline.defs.pools import provider_slots
from eval_pipeline.defs.resources import ProvidersResource, RunScopeResource
from eval_pipeline.providers.factory import rerank_mode, run_semantic
from eval_pipeline.providers.factory import system_outputs as team_outputs
from eval_pipeline.providers.models import ModelConfig
from eval_pipeline.providers.target import PrepareReport, retrieval_items, semantic_bar

GROUP = "retrieval"
PARQUET_IO = "parquet_io"


def _model_to_evaluate(context: dg.AssetExecutionContext, providers: ProvidersResource) -> ModelConfig | None:
    """The partition's model, or None when this is an automatic run that may not evaluate it."""
    model, _ = split_key(context)
    cfg = providers.model(model)
    if context.run.tags.get(AUTOMATION_RUN_TAG) == "true" and not cfg.automated:
        context.log.info(f"{model}: not evaluated by automation (disabled, or paid without automate: true)")
        return None
    return cfg


@evaluation_asset(
    GROUP,
    model_date_partitions,
    PARQUET_IO,
    output_required=False,  # nothing when automation may not evaluate this model (see below)
)
def semantic_retrievals(
    context: dg.AssetExecutionContext,
    providers: ProvidersResource,
    scope: RunScopeResource,
    knowledge_base: KnowledgeBase,
    test_banks: Banks,
) -> Iterator[dg.Output[pd.DataFrame]]:
    """Each semantic test's prompt through the model: top-15 candidates, final 6, usage, errors.

    Automation evaluates a model only when its models-file entry is enabled and, for a paid
    model, says `automate: true`: an automatic run must never start spending on its own. The
    skipped partition materialises nothing, so nothing downstream of it runs either.
    An API model's run first takes a slot of each provider's pool (defs/pools.py).
    """
    cfg = _model_to_evaluate(context, providers)
    if cfg is None:
        return
    prepared: list[PrepareReport] = []
    items = retrieval_items(test_banks.semantic_tests, cfg.trials)
    boosts = test_banks.rules.boosts_by_entity() if test_banks.rules else {}
    with provider_slots(context, cfg), semantic_bar(scope.progress_fd, cfg.key, len(items)) as on_done:
        rows = run_semantic(
            cfg,
            knowledge_base.entities,
            items,
            boosts,
            Path(providers.cache_dir),
            providers.mode(),
            providers.environ(cfg),
            on_done,
            batch=providers.rerank_batch,
            on_prepared=prepared.append,
        )
    errored = sum(r.status == "errored" for r in rows)
    cache_status = prepared[0].prompt_cache if prepared else None
    if cache_status is not None:
        context.log.info(f"{cfg.key}: {cache_status.note}")
    yield dg.Output(
        to_frame(rows, retrieval_columns),
        metadata=readable(
            {
                "retrievals": len(rows),
                "errored": errored,
                "api_calls": sum(r.api_calls for r in rows),
                "cache_hits": sum(r.cache_hits for r in rows),
                "cost_usd": sum(r.cost_usd for r in rows),
                "mean_latency_ms": sum(r.latency_ms for r in rows) / len(rows) if rows else 0.0,
                **prompt_cache_metadata(cache_status, rerank_mode(cfg, providers.rerank_batch)),
            },
            plotted=False,
        ),
    )


def _outputs_frame(outputs: list[MechanismOutput], *, plotted: bool = True) -> dg.Output[pd.DataFrame]:
    frame = to_frame(
        outputs,
        lambda o: {
            "test_id": o.test_id,
            "mechanism": o.mechanism.value if o.mechanism else None,
            "entities": ", ".join(o.entities),
            "error": o.error,
        },
    )
    counts = {"tests": len(outputs), "errored": sum(o.error is not None for o in outputs)}
    return dg.Output(frame, metadata=readable(counts, plotted=plotted))


@evaluation_asset(
    GROUP,
    model_date_partitions,
    PARQUET_IO,
    output_required=False,  # skipped with the model's semantic retrievals (see there)
)
def system_outputs(
    context: dg.AssetExecutionContext,
    providers: ProvidersResource,
    test_banks: Banks,
) -> Iterator[dg.Output[pd.DataFrame]]:
    """The team's own system's answers (over HTTP or a Python entry point) for the state,
    pattern and always tests of the banks the model assigns to it: one call per test. Empty for
    a model that uses the built-in reference for all three."""
    cfg = _model_to_evaluate(context, providers)
    if cfg is None:
        return
    out = _outputs_frame(team_outputs(cfg, test_banks, Scope()), plotted=False)
    yield out.with_metadata(
        {**out.metadata, **{f"implementation_{m.value}": impl for m, impl in cfg.implementations.items()}}
    )


def _reference_outputs(d: Deterministic[Any, Any]) -> dg.AssetsDefinition:
    """The built-in mechanism's outputs for every test of its bank, per date."""
    reads = {"knowledge_base": dg.AssetIn(dagster_type=KnowledgeBase)} if d.reads_kb else {}

    @evaluation_asset(
        GROUP,
        date_partitions,
        PARQUET_IO,
        name=d.outputs_name,
        description=d.outputs_doc,
        ins={"test_banks": dg.AssetIn(), **reads},
    )
    def outputs(test_banks: Banks, **kb: KnowledgeBase) -> dg.Output[pd.DataFrame]:
        # Absent only for a reference that reads no KB (`reads_kb`): its table does not depend on it.
        knowledge_base = cast(KnowledgeBase, kb.get("knowledge_base"))
        return _outputs_frame(d.reference(knowledge_base, test_banks, d.tests(test_banks)))

    return outputs


REFERENCE_OUTPUTS = [_reference_outputs(d) for d in DETERMINISTIC]
