"""A models file in the older `kind: http` form loads as the system: form, with a notice that
names which mechanisms the team's service answers and which use the reference rules."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.scoring.aggregate import REFERENCE, describe_implementations
from eval_pipeline.providers.models import load_models


def test_the_older_http_form_is_migrated_with_a_notice(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(
        "schema_version: 1\nmodels:\n  team:\n    embedder: {kind: http}\n    reranker: {kind: http}\n"
        '    http: {url: "http://127.0.0.1:9000/retrieve"}\n'
        "  local:\n    embedder: {kind: local}\n    reranker: {kind: cosine}\n"
    )
    notices: list[str] = []
    cfg = load_models(path, notices=notices)["team"]
    (line,) = notices
    assert f"{path}: model 'team'" in line and "mechanisms: [semantic]" in line
    assert "state, pattern, always use eval_pipeline's reference rules" in line
    assert cfg.implementations[Mechanism.SEMANTIC] == "http"
    assert all(cfg.implementations[m] == REFERENCE for m in Mechanism if m is not Mechanism.SEMANTIC)
    assert describe_implementations(cfg.implementations).startswith("semantic http")
