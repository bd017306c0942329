"""When an earlier evaluation may answer for a new one.

A warm rerun with nothing changed would redo work whose answer is already known. It may be
skipped only when the answer cannot differ: the same code, inputs, models and settings
(`EvaluationInputs`, compared by fingerprint), models that are reproducible (no remote service,
no team code outside this package), and a stored result that is complete. A result with an
errored test, or a bank that could not be judged, is never reused: the outage may be over.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from eval_pipeline.core.report.conclusion import scope_record
from eval_pipeline.core.scoring.aggregate import Health
from eval_pipeline.core.scoring.evaluation import Scope
from eval_pipeline.core.scoring.results import RESULT_SCHEMA_VERSION
from eval_pipeline.core.scoring.run_document import RunDocument

FINGERPRINT_CHARS = 32  # 128 bits: fits a run tag, and no two inputs meet by chance


class EvaluationInputs(BaseModel):
    """Everything a full evaluation of one date's models depends on."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    schema_version: str = RESULT_SCHEMA_VERSION
    code_version: str
    date: str
    kb_version: str
    kb_hash: str
    bank_hashes: dict[str, str]
    history_hash: str
    models: dict[str, dict[str, Any]]  # key -> the models-file entry, as JSON
    settings: dict[str, Any]  # where values and reports go, thresholds and gates

    def fingerprint(self) -> str:
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:FINGERPRINT_CHARS]


def stale_reason(doc: RunDocument, inputs: EvaluationInputs) -> str | None:
    """Why `doc` cannot stand for a new evaluation with `inputs`, or None when it can."""
    p = doc.provenance
    model_config = inputs.models.get(p.model)
    checks = [
        (p.schema_version != inputs.schema_version, f"written by schema {p.schema_version}"),
        (p.code_version != inputs.code_version, "written by other code"),
        (p.date != inputs.date, f"for {p.date}, not {inputs.date}"),
        (model_config is None or p.system_config != model_config, "the model's configuration changed"),
        (p.kb_hash != inputs.kb_hash or p.kb_version != inputs.kb_version, "the KB changed"),
        (p.bank_hashes != inputs.bank_hashes, "the test banks changed"),
        (p.history_hash != inputs.history_hash, "the expectation history changed"),
        (p.scope != scope_record(Scope()), "a narrowed run"),
        (doc.aggregate.errored_count > 0, f"{doc.aggregate.errored_count} test(s) errored"),
        (doc.aggregate.health is Health.UNKNOWN, "health was UNKNOWN"),
    ]
    return next((f"{p.model}: {why}" for failed, why in checks if failed), None)
