"""The asset graph: every asset, and the selections automation and the CLI work with."""

from __future__ import annotations

import dagster as dg

from eval_pipeline.defs.diffs import DIFF_ASSETS
from eval_pipeline.defs.inputs import (
    expectation_history,
    history_files,
    kb_source,
    knowledge_base,
    test_bank_files,
    test_banks,
)
from eval_pipeline.defs.partitions import model_date_partitions
from eval_pipeline.defs.reports import release_gate, run_report
from eval_pipeline.defs.retrieval import always_loads, pattern_matches, semantic_retrievals, state_activations
from eval_pipeline.defs.scoring import (
    always_results,
    pattern_results,
    resolved_expectations,
    scored_aggregate,
    semantic_results,
    state_results,
)

SOURCES = [kb_source, test_bank_files, history_files]
MATERIALIZABLE: list[dg.AssetsDefinition] = [
    knowledge_base,
    test_banks,
    expectation_history,
    resolved_expectations,
    semantic_retrievals,
    state_activations,
    pattern_matches,
    always_loads,
    semantic_results,
    state_results,
    pattern_results,
    always_results,
    scored_aggregate,
    run_report,
    release_gate,
    *DIFF_ASSETS,
]
ALL_ASSETS: list[dg.AssetsDefinition | dg.SourceAsset] = [*SOURCES, *MATERIALIZABLE]
# Three stages, each its own runs: a run cannot mix date and model x date partitions, and the
# diffs read every model's finished report, so they come after the model runs.
DIFFS = frozenset(a.key for a in DIFF_ASSETS)
PER_MODEL = frozenset(a.key for a in MATERIALIZABLE if a.partitions_def == model_date_partitions) - DIFFS
DATE_STAGE = frozenset(a.key for a in MATERIALIZABLE) - PER_MODEL - DIFFS
UNPARTITIONED = frozenset(a.key for a in MATERIALIZABLE if a.partitions_def is None)


def downstream_of(*roots: dg.AssetsDefinition) -> set[dg.AssetKey]:
    """The roots and everything materializable below them."""
    selection = dg.AssetSelection.assets(*roots).downstream()
    return set(selection.resolve(ALL_ASSETS))


def everything() -> set[dg.AssetKey]:
    return {a.key for a in MATERIALIZABLE}
