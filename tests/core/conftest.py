"""Fixtures the pure-core tests share."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.inputs.validation import load_validated

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sample", "tenant"])
def sample_or_tenant(
    request: pytest.FixtureRequest, tenant: Path, tmp_path: Path
) -> tuple[KnowledgeBase, Banks]:
    """The sample (a temporary copy) and the second domain, validated."""
    if request.param == "tenant":
        return load_validated(tenant / "kb.yaml", tenant / "banks", [])
    shutil.copytree(REPO / "kb", tmp_path / "kb")
    shutil.copytree(REPO / "test_banks", tmp_path / "test_banks")
    return load_validated(tmp_path / "kb", tmp_path / "test_banks", [])
