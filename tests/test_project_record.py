"""`claim_project` writes a location's project record only when it would change: every run of a
project records it, and the record lists every entity id."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from upath import UPath

from eval_pipeline.cli.exit_status import UsageError
from eval_pipeline.cli.project import PROJECT_FILE, claim_project
from eval_pipeline.core.inputs.loading import load_kb


def test_an_unchanged_record_is_left_alone_and_a_changed_one_rewritten(tenant: Path, tmp_path: Path) -> None:
    kb = load_kb(tenant / "kb.yaml", [])
    assert kb is not None
    locations = [("results", UPath(str(tmp_path / "results"))), ("storage", UPath(str(tmp_path / "storage")))]
    claim_project(kb, locations)
    records = [tmp_path / where / PROJECT_FILE for where in ("results", "storage")]
    first = [os.stat(r) for r in records]
    claim_project(kb, locations)
    assert [(s.st_ino, s.st_mtime_ns) for s in map(os.stat, records)] == [
        (s.st_ino, s.st_mtime_ns) for s in first
    ]

    smaller = kb.model_copy(update={"entities": kb.entities[1:]})
    claim_project(smaller, locations)  # the same project, one entity fewer: written again
    for record in records:
        assert json.loads(record.read_text(encoding="utf-8"))["entity_ids"] == sorted(
            e.entity_id for e in smaller.entities
        )


def test_a_damaged_record_is_refused_before_any_is_written(tenant: Path, tmp_path: Path) -> None:
    kb = load_kb(tenant / "kb.yaml", [])
    assert kb is not None
    results, storage = tmp_path / "results", tmp_path / "storage"
    results.mkdir()
    (results / PROJECT_FILE).write_text("{}", encoding="utf-8")
    with pytest.raises(UsageError, match="not a readable project record"):
        claim_project(kb, [("results", UPath(str(results))), ("storage", UPath(str(storage)))])
    assert not (storage / PROJECT_FILE).exists()
