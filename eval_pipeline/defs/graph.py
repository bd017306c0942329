"""The asset graph: every asset, and the stages the command line runs it in."""

from __future__ import annotations

import dagster as dg

from eval_pipeline.defs.diffs import DIFF_ASSETS, model_comparison
from eval_pipeline.defs.inputs import (
    expectation_history,
    history_files,
    input_files,
    input_snapshot,
    knowledge_base,
    test_banks,
)
from eval_pipeline.defs.partitions import date_partitions, model_date_partitions
from eval_pipeline.defs.reports import release_gate, run_report
from eval_pipeline.defs.scoring import (
    REFERENCE_RESULTS,
    resolved_expectations,
    scored_aggregate,
    semantic_results,
    system_results,
)
from eval_pipeline.defs.system_outputs import REFERENCE_OUTPUTS, semantic_retrievals, system_outputs

SOURCES = [input_files, history_files]
MATERIALIZABLE: list[dg.AssetsDefinition] = [
    input_snapshot,
    knowledge_base,
    test_banks,
    expectation_history,
    resolved_expectations,
    semantic_retrievals,
    *REFERENCE_OUTPUTS,
    system_outputs,
    semantic_results,
    *REFERENCE_RESULTS,
    system_results,
    scored_aggregate,
    run_report,
    release_gate,
    *DIFF_ASSETS,
]
ALL_ASSETS: list[dg.AssetsDefinition | dg.SourceAsset] = [*SOURCES, *MATERIALIZABLE]
# A run holds one partitions definition, so the command line runs three stages in order: the
# date's inputs and deterministic mechanisms, each model, then the comparison of the date's models.
COMPARISON = frozenset({model_comparison.key})
DATE_STAGE = frozenset(a.key for a in MATERIALIZABLE if a.partitions_def == date_partitions) - COMPARISON
PER_MODEL = frozenset(a.key for a in MATERIALIZABLE if a.partitions_def == model_date_partitions)
EVALUATION = dg.AssetSelection.assets(*(a.key for a in ALL_ASSETS))
