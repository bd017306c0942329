"""Input assets: the KB, banks and history as observed on disk, then loaded and validated."""

from collections.abc import Iterator

import dagster as dg
from pydantic import BaseModel, ConfigDict

from eval_pipeline.core.expectations.resolution import LoadedHistory
from eval_pipeline.core.inputs.kb import KnowledgeBase, LoadMode
from eval_pipeline.core.inputs.loading import Banks, InputError, history_hash
from eval_pipeline.core.inputs.validation import cross_check
from eval_pipeline.defs.resources import InputsResource

GROUP = "inputs"
JSON_IO = "json_io"


class HistorySet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    files: list[LoadedHistory]
    content_hash: str


def _failure(exc: InputError) -> dg.Failure:
    lines = [str(p) for p in exc.problems]
    return dg.Failure(description="\n".join(lines), metadata={"problems": len(lines)})


@dg.observable_source_asset(group_name=GROUP, description="KB files on disk (version = hash)")
def kb_source(inputs: InputsResource) -> dg.DataVersion:
    return dg.DataVersion(inputs.kb_hash())


@dg.observable_source_asset(group_name=GROUP, description="Bank and rules files on disk")
def test_bank_files(inputs: InputsResource) -> dg.DataVersion:
    return dg.DataVersion(inputs.banks_hash())


@dg.observable_source_asset(group_name=GROUP, description="Expectation history files on disk")
def history_files(inputs: InputsResource) -> dg.DataVersion:
    return dg.DataVersion(inputs.history_hash())


@dg.asset(group_name=GROUP, deps=[kb_source], io_manager_key=JSON_IO)
def knowledge_base(inputs: InputsResource) -> dg.Output[KnowledgeBase]:
    """The parsed KB. Its data version is the content hash every result carries."""
    try:
        kb = inputs.load_kb()
    except InputError as exc:
        raise _failure(exc) from None
    modes = {m.value: len(kb.with_mode(m)) for m in LoadMode}
    return dg.Output(
        kb,
        data_version=dg.DataVersion(kb.content_hash),
        metadata={
            "kb_version": kb.kb_version,
            "kb_hash": kb.content_hash,
            "entities": len(kb.entities),
            **modes,
        },
    )


@dg.asset(
    group_name=GROUP,
    deps=[test_bank_files],
    io_manager_key=JSON_IO,
    check_specs=[dg.AssetCheckSpec("banks_reference_known_entities", asset="test_banks", blocking=True)],
)
def test_banks(
    inputs: InputsResource, knowledge_base: KnowledgeBase
) -> Iterator[dg.Output[Banks] | dg.AssetCheckResult]:
    """The four banks and the pattern rules, cross-checked against the KB (blocking)."""
    banks, problems = inputs.load_banks()
    problems += cross_check(knowledge_base, inputs.kb, banks)
    counts = {m.value: n for m, n in banks.counts().items()}
    yield dg.Output(banks, metadata={**counts, "bank_hashes": dg.MetadataValue.json(banks.file_hashes)})
    yield dg.AssetCheckResult(
        check_name="banks_reference_known_entities",
        passed=not problems,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={"problems": dg.MetadataValue.md("\n".join(f"- {p}" for p in problems) or "none")},
    )


@dg.asset(group_name=GROUP, deps=[history_files], io_manager_key=JSON_IO)
def expectation_history(inputs: InputsResource) -> dg.Output[HistorySet]:
    """Every calibration and human override, in the order they were written."""
    try:
        files = inputs.load_history()
    except InputError as exc:
        raise _failure(exc) from None
    content = history_hash(files)
    return dg.Output(
        HistorySet(files=files, content_hash=content),
        data_version=dg.DataVersion(content),
        metadata={"files": len(files), "history_hash": content},
    )
