"""UI metadata: per-test tables and score summaries shown on each materialisation.

Numbers go through `readable`: rounded to what a reader needs, and text on a model x date asset,
whose plot across partitions would zig-zag between models. The plotted series are on the
date-partitioned `model_comparison`, one key per model (`per_model_metadata`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import dagster as dg

from eval_pipeline.core.rounding import shown_score
from eval_pipeline.core.scoring.aggregate import Aggregate
from eval_pipeline.core.scoring.results import ResultBase
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.providers.prompt_cache import PromptCacheStatus

MAX_ROWS = 200
RERANK_MODE = "rerank_mode"
PROMPT_CACHE = "prompt_cache"
# Metadata is stored in the event log and sent to each UI page: a 10,000-test report belongs in its file.
MAX_MARKDOWN_CHARS = 64_000


def rounded(key: str, value: float) -> float:
    """A score as every report shows it (`shown_score`), a cost (key names `cost`) to 4 decimals,
    a percentage to 1 (as `calibrate` prints it), any other fraction (a rate, a kappa, a latency)
    to 3 significant figures."""
    if "score" in key:
        return shown_score(value)
    if "cost" in key:
        return round(value, 4)
    if "percent" in key:
        return round(value, 1)
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, 2 - math.floor(math.log10(abs(value))))


def readable(
    metadata: Mapping[str, dg.RawMetadataValue], *, plotted: bool = True
) -> dict[str, dg.RawMetadataValue]:
    """`metadata` with every float rounded (`rounded`); with `plotted=False` (model x date
    assets) every number becomes text, shown on the materialisation but not plotted."""
    out: dict[str, dg.RawMetadataValue] = {}
    for key, value in metadata.items():
        if isinstance(value, dg.FloatMetadataValue | dg.IntMetadataValue):
            value = value.value
        if isinstance(value, float):
            value = rounded(key, value)
        if not plotted and isinstance(value, int | float) and not isinstance(value, bool):
            value = dg.MetadataValue.text(str(value))
        out[key] = value
    return out


def markdown_metadata(markdown: str, full: str) -> dg.MarkdownMetadataValue:
    """`markdown` for the UI, cut at a line boundary when long, saying where the whole of it is."""
    if len(markdown) <= MAX_MARKDOWN_CHARS:
        return dg.MetadataValue.md(markdown)
    head = markdown[:MAX_MARKDOWN_CHARS].rsplit("\n", 1)[0]
    return dg.MetadataValue.md(f"{head}\n\n*… cut at {MAX_MARKDOWN_CHARS:,} characters: the whole is {full}*")


def results_table(results: Sequence[ResultBase]) -> dg.TableMetadataValue:
    columns = {"test_id": "string", "status": "string", "score": "int", "label": "string", "detail": "string"}
    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, kind in columns.items()])
    records = [
        dg.TableRecord(
            {
                "test_id": r.test_id,
                "status": r.status.value,
                "score": r.score if r.score is not None else -1,
                "label": r.outcome.label if r.outcome else "errored",
                "detail": _detail(r),
            }
        )
        for r in results[:MAX_ROWS]
    ]
    return dg.MetadataValue.table(records=records, schema=schema)


def _detail(r: ResultBase) -> str:
    if r.outcome is None:
        return r.error or ""
    if r.outcome.hard_fail:
        return r.outcome.hard_fail_text
    return "; ".join(p.text for p in r.outcome.penalties)


def bank_metadata(results: Sequence[ResultBase]) -> dict[str, dg.RawMetadataValue]:
    scores = [r.score for r in results if r.score is not None]
    return {
        "tests": len(results),
        "scored": len(scores),
        "errored": len(results) - len(scores),
        "average_score": sum(scores) / len(scores) if scores else None,
        "hard_fails": sum(r.hard_fail for r in results),
        "results": results_table(results),
    }


def aggregate_metadata(agg: Aggregate) -> dict[str, dg.RawMetadataValue]:
    return {
        "health": agg.health.value,
        "combined_score": agg.combined_score,
        "hard_fails": agg.hard_fail_count,
        "errored": agg.errored_count,
        "critical_failures": len(agg.critical_failures),
        "cost_usd": agg.cost_usd,
        **{f"score_{m.value}": b.average for m, b in agg.banks.items()},
        "expectation_sources": dg.MetadataValue.json(agg.expectation_sources),
    }


def per_model_metadata(docs: Sequence[RunDocument]) -> dict[str, dg.RawMetadataValue]:
    """One numeric key per model on a date-partitioned asset: the UI plots a line per model."""
    out: dict[str, dg.RawMetadataValue] = {}
    for doc in docs:
        model, agg = doc.provenance.model, doc.aggregate
        if agg.combined_score is not None:
            out[f"score/{model}"] = agg.combined_score
        out.update(
            {f"score_{m.value}/{model}": b.average for m, b in agg.banks.items() if b.average is not None}
        )
        out[f"hard_fails/{model}"] = agg.hard_fail_count
        out[f"critical_failures/{model}"] = len(agg.critical_failures)
        out[f"errored/{model}"] = agg.errored_count
        out[f"cost_usd/{model}"] = agg.cost_usd
    return readable(out)


def prompt_cache_metadata(status: PromptCacheStatus | None, mode: str) -> dict[str, str | int]:
    """How the reranker was called and whether its stable prefix could be cached (a prefix below
    the model's minimum is billed as plain input on every call; the note says so). `run_report`
    copies `rerank_mode` and `prompt_cache` into the run's provenance."""
    meta: dict[str, str | int] = {RERANK_MODE: mode}
    if status is not None:
        meta[PROMPT_CACHE] = status.note
        if status.prefix_tokens is not None:
            meta["prompt_cache_prefix_tokens"] = status.prefix_tokens
        if status.minimum is not None:
            meta["prompt_cache_minimum_tokens"] = status.minimum
    return meta
