from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import yaml

from eval_pipeline.core.inputs.json_schemas import json_schemas

REPO = Path(__file__).resolve().parents[2]
TENANT = REPO / "tests" / "fixtures" / "tenant_domain"


def test_committed_schemas_are_current() -> None:
    for name, schema in json_schemas().items():
        committed = json.loads((REPO / "schemas" / f"{name}.schema.json").read_text())
        assert committed == schema, f"schemas/{name}.schema.json is stale: run `eval-pipeline schemas`"


def test_schemas_accept_real_files_and_reject_a_bad_one() -> None:
    schemas = json_schemas()
    kb = yaml.safe_load((TENANT / "kb.yaml").read_text())
    jsonschema.validate(kb, schemas["kb_single_file"])
    bank = json.loads((TENANT / "banks/semantic/tenant_questions.json").read_text())
    jsonschema.validate(bank, schemas["semantic_bank"])
    bank["tests"][0]["category"] = "urgent"  # a domain's own category: only its shape is checked
    jsonschema.validate(bank, schemas["semantic_bank"])
    bank["tests"][0]["category"] = " padded\n"
    validator = jsonschema.Draft202012Validator(schemas["semantic_bank"])
    assert any("padded" in e.message for e in validator.iter_errors(bank))
