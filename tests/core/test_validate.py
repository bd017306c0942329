from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from eval_pipeline.cli import main
from tests.kb_folder import kb_as_folder

REPO = Path(__file__).resolve().parents[2]

MISTAKES = [
    ("tenant_questions.json", "T-REP-001", "test_id", "duplicate test id"),
    ("tenant_questions.json", "T-RENT-001", "expected_primary", "unknown entity 'rent_areers'"),
    ("tenant_questions.json", "T-REP-001", "rank_check", "unknown entity 'nope'"),
    ("tenant_questions.json", "T-DEP-001", "not_expected", "is both expected and not expected"),
    ("tenant_questions.json", "T-NOISE-001", "category", "String should match pattern"),
    ("pattern_rules.json", "crisis pattern /(kill|hurt myself/", "pattern", "regex does not compile"),
    ("pattern_rules.json", "keyword_boosts[1]", "entity", "unknown entity 'deposit_refund'"),
    ("kb.yaml", "handler_returning_user", "state_conditions.days_since_last.gt", "Input should be"),
    (
        "always_tenant.json",
        "T-ALWAYS-001",
        "expected_always",
        "is SEMANTIC, this field needs ALWAYS",
    ),
    (
        "tenant_states.json",
        "T-STATE-001",
        "expected_handlers",
        "is PATTERN, this field needs STATE",
    ),
    (
        "expectations_2026-11-01.json",
        "T-GHOST-001",
        "test_id",
        "history names a test the semantic bank lacks",
    ),
    ("pattern_tests.json", "T-PAT-KW-001", "prompt", "Field required"),
    (
        "pattern_tests.json",
        "T-PAT-NEG-001",
        "not_expected_matches",
        "a negative test needs entities",
    ),
]


def _edit_json(path: Path, fn: Any) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data, indent=2))


def _break_everything(root: Path) -> None:
    banks = root / "banks"

    def semantic(d: dict[str, Any]) -> None:
        tests = {t["test_id"]: t for t in d["tests"]}
        tests["T-RENT-001"]["expected_primary"] = ["rent_areers"]
        tests["T-REP-001"]["rank_check"].append({"higher": "nope", "lower": "repair_requests"})
        tests["T-DEP-001"]["not_expected"] = ["deposit_return"]
        tests["T-NOISE-001"]["category"] = "  shouting"  # a label never has surrounding spaces
        d["tests"].append(dict(tests["T-REP-001"]))

    _edit_json(banks / "semantic/tenant_questions.json", semantic)

    def rules(d: dict[str, Any]) -> None:
        d["crisis_patterns"][0]["pattern"] = "(kill|hurt myself"
        d["keyword_boosts"][1]["entity"] = "deposit_refund"

    _edit_json(banks / "pattern/pattern_rules.json", rules)

    def pattern(d: dict[str, Any]) -> None:
        tests = {t["test_id"]: t for t in d["tests"]}
        del tests["T-PAT-KW-001"]["prompt"]
        tests["T-PAT-NEG-001"]["not_expected_matches"] = []

    _edit_json(banks / "pattern/pattern_tests.json", pattern)
    _edit_json(
        banks / "always/always_tenant.json",
        lambda d: d["tests"][0]["expected_always"].append("rent_arrears"),
    )
    _edit_json(
        banks / "state/tenant_states.json",
        lambda d: d["tests"][0]["expected_handlers"].append("handler_crisis"),
    )

    kb = yaml.safe_load((root / "kb.yaml").read_text())
    handler = next(e for e in kb["entities"] if e["entity_id"] == "handler_returning_user")
    handler["state_conditions"]["days_since_last"] = {"gt": 7}
    (root / "kb.yaml").write_text(yaml.safe_dump(kb))

    (banks / "semantic/history/expectations_2026-11-01.json").write_text(
        json.dumps(
            {
                "version": "2026-11-01T10:00:00Z",
                "calibration_trigger": "manual",
                "changes": [{"test_id": "T-GHOST-001", "updated": {"expected_primary": ["rent_arrears"]}}],
            }
        )
    )


def _run(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["validate", "--kb", str(root / "kb.yaml"), "--banks-dir", str(root / "banks")])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_clean_fixture_passes(tenant: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(tenant, capsys)
    assert code == 0, err
    assert "semantic 8, state 3, pattern 4, always 2" in out
    assert "tenant-fixture-1" in out


def test_every_deliberate_mistake_is_reported_on_one_line(
    tenant: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _break_everything(tenant)
    code, _, err = _run(tenant, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert "Traceback" not in err
    for file, item, field, message in MISTAKES:
        hits = [ln for ln in lines if file in ln and f": {item}: {field}: " in ln and message in ln]
        assert hits, f"not reported: {file} {item} {field} {message}\n{err}"
    assert lines[-1] == f"{len(lines) - 1} problem(s) found"


def test_malformed_json_and_yaml_report_the_line(tenant: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bank = tenant / "banks/always/always_tenant.json"
    bank.write_text(bank.read_text().replace('"user_type": "TENANT",', '"user_type": "TENANT"', 1))
    (tenant / "kb.yaml").write_text("kb_version: x\nentities:\n  - entity_id: a\n    title: [unclosed\n")
    code, _, err = _run(tenant, capsys)
    assert code == 2
    assert "always_tenant.json:5: invalid JSON" in err
    assert "kb.yaml:" in err and "invalid YAML" in err


def test_missing_directories_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", "--kb", str(tmp_path / "nokb"), "--banks-dir", str(tmp_path / "nobanks")])
    err = capsys.readouterr().err
    assert code == 2 and "knowledge base not found" in err and "banks directory not found" in err


BREAKAGES: dict[str, Callable[[str], str]] = {
    "python-tag": lambda text: "!!python/object/apply:os.system ['true']\n",
    "two-documents": lambda text: text + "---\nentity_id: another\n",
    "integer-id": lambda text: re.sub(r"(?m)^entity_id: .*$", "entity_id: 12345", text),
    "too-deep": lambda text: text + "extra:\n" + "- " * 100_000 + "x\n",
}


@pytest.mark.parametrize("breakage", BREAKAGES)
@pytest.mark.parametrize("domain", ["sample", "tenant"])
def test_a_broken_entity_file_is_named_first_and_what_it_causes_is_counted(
    domain: str, breakage: str, tenant: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if domain == "sample":
        shutil.copytree(REPO / "kb", tmp_path / "kb")
        shutil.copytree(REPO / "test_banks", tmp_path / "test_banks")
        kb, banks, broken = tmp_path / "kb", tmp_path / "test_banks", "biff_response"
    else:
        kb, banks, broken = kb_as_folder(tenant), tenant / "banks", "handler_crisis"
    file = kb / "entities" / f"{broken}.yaml"
    file.write_text(BREAKAGES[breakage](file.read_text()))
    references = sum(p.read_text().count(f'"{broken}"') for p in banks.rglob("*.json"))
    assert main(["validate", "--kb", str(kb), "--banks-dir", str(banks)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"{file}"), lines
    assert not [line for line in lines if f"unknown entity '{broken}'" in line]
    folded = f"{references} reference(s) to entities of the KB files above not checked: fix those first"
    assert f"{banks}: {folded}" in lines
    assert lines[-1] == f"{len(lines) - 1} problem(s) found"


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        ({"test_id": "T-1", "prompt": "hi"}, ": T-1: category: Field required"),
        ({"prompt": "hi"}, ": tests[0]: test_id: Field required"),
        ({"test_id": 5, "prompt": "hi"}, ": tests[0]: test_id: Input should be a valid string"),
        (None, ": tests[0]: Input should be a valid dictionary"),
    ],
    ids=["by-id", "missing-id", "number-id", "null"],
)
def test_a_bad_test_is_named_by_its_id_else_by_its_place(
    tmp_path: Path, test: Any, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(REPO / "kb", tmp_path / "kb")
    shutil.copytree(REPO / "test_banks", tmp_path / "banks")
    bank = tmp_path / "banks/semantic/parent_test_bank.json"
    _edit_json(bank, lambda d: d["tests"].insert(0, test))
    assert main(["validate", "--kb", str(tmp_path / "kb"), "--banks-dir", str(tmp_path / "banks")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert [line for line in lines if line.startswith(f"{bank}{expected}")], lines
