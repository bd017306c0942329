"""A corpus of bad inputs: each is one clear line (file, id, field), the right exit code, no traceback.

Every case mutates a fresh copy of the tenant fixture (or passes bad flags) and runs the real
command line. Warnings are cases too: legal input that probably is a mistake prints and exits 0.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from eval_pipeline import cli

REPO = Path(__file__).resolve().parents[1]
Mutation = Callable[[Path], list[str]]  # edits the copy under the given root, returns the argv


def _validate(root: Path, kb: str = "kb.yaml", banks: str = "banks") -> list[str]:
    return ["validate", "--kb", str(root / kb), "--banks-dir", str(root / banks)]


def _kb(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((root / "kb.yaml").read_text())
    return data


def _entity(data: dict[str, Any], entity_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(e for e in data["entities"] if e["entity_id"] == entity_id)
    return found


def _edit_kb(edit: Callable[[dict[str, Any]], None]) -> Mutation:
    def mutate(root: Path) -> list[str]:
        data = _kb(root)
        edit(data)
        (root / "kb.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        return _validate(root)

    return mutate


def _bank(root: Path, rel: str) -> Path:
    return root / "banks" / rel


def _edit_json(rel: str, edit: Callable[[Any], Any]) -> Mutation:
    def mutate(root: Path) -> list[str]:
        path = _bank(root, rel)
        data = json.loads(path.read_text())
        path.write_text(json.dumps(edit(data) or data))
        return _validate(root)

    return mutate


def _test(data: dict[str, Any], test_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(t for t in data["tests"] if t["test_id"] == test_id)
    return found


def _write(rel: str, content: bytes | str, kb: bool = False) -> Mutation:
    def mutate(root: Path) -> list[str]:
        path = root / rel if kb else _bank(root, rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return _validate(root)

    return mutate


def _replace_with(rel: str, make: Callable[[Path], object]) -> Mutation:
    def mutate(root: Path) -> list[str]:
        path = root / rel
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
        make(path)
        return _validate(root)

    return mutate


def _kb_dir(edit: Callable[[Path], object]) -> Mutation:
    """A directory KB (manifest + one file per entity) built from the fixture, then edited."""

    def mutate(root: Path) -> list[str]:
        data = _kb(root)
        kb = root / "kbdir"
        (kb / "entities").mkdir(parents=True)
        (kb / "manifest.yaml").write_text(yaml.safe_dump({"kb_version": data["kb_version"]}))
        for entity in data["entities"]:
            (kb / "entities" / f"{entity['entity_id']}.yaml").write_text(yaml.safe_dump(entity))
        edit(kb)
        return _validate(root, kb="kbdir")

    return mutate


def _flags(*argv: str) -> Mutation:
    def mutate(root: Path) -> list[str]:
        base = ["--kb", str(root / "kb.yaml"), "--banks-dir", str(root / "banks"), "--date", "2026-11-20"]
        return ["run", *base, *argv]

    return mutate


def _corrupt_results(command: str) -> Mutation:
    def mutate(root: Path) -> list[str]:
        path = root / "results/m/2026-11-20/results.json"
        path.parent.mkdir(parents=True)
        path.write_text('{"provenance": []}')
        if command == "show":
            return ["show", "--results-dir", str(root / "results")]
        return ["diff", str(path), str(path)]

    return mutate


def _models(text: str | bytes) -> Mutation:
    def mutate(root: Path) -> list[str]:
        path = root / "models.yaml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return ["models", "--models-file", str(path)]

    return mutate


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(12)
)
SEMANTIC = "semantic/tenant_questions.json"
RULES = "pattern/pattern_rules.json"
HISTORY = "semantic/history/expectations_2026-11-01.json"
STATE = "state/tenant_states.json"
PATTERN = "pattern/pattern_tests.json"
LOCAL = "{embedder: {kind: local}, reranker: {kind: cosine}}"


def _rank(checks: list[dict[str, str]], not_expected: list[str] | None = None) -> Mutation:
    def edit(data: Any) -> None:
        test = _test(data, "T-REP-001")
        test["rank_check"] = checks
        if not_expected is not None:
            test["not_expected"] = not_expected

    return _edit_json(SEMANTIC, edit)


def _conditions(**cond: Any) -> Mutation:
    return _edit_kb(
        lambda d: _entity(d, "handler_returning_user")["state_conditions"].update(days_since_last=cond)
    )


def _history(entry: dict[str, Any], rel: str = HISTORY) -> Mutation:
    base = {"calibration_trigger": "manual", "changes": []}
    return _write(rel, json.dumps({**base, **entry}))


def _raw(rel: str, old: str, new: str) -> Mutation:
    """Edit a bank's text where JSON cannot say it (NaN, 1e400)."""

    def mutate(root: Path) -> list[str]:
        path = _bank(root, rel)
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new))
        return _validate(root)

    return mutate


def _fifo(rel: str, argv: Callable[[Path], list[str]] = _validate) -> Mutation:
    """The file replaced by a named pipe: reading it would block until a writer came."""

    def mutate(root: Path) -> list[str]:
        path = root / rel
        path.unlink()
        os.mkfifo(path)
        return argv(root)

    return mutate


def _calibrate(*flags: str) -> Mutation:
    def mutate(root: Path) -> list[str]:
        data = ["--kb", str(root / "kb.yaml"), "--banks-dir", str(root / "banks")]
        return ["calibrate", "--scope", "full", "--dry-run", *data, *flags]

    return mutate


BLANK_REASON = {
    "test_id": "T-RENT-001",
    "human_override": {
        "expected_primary": ["rent_arrears"],
        "override_date": "2026-11-01",
        "by": "a",
        "reason": "\t",
    },
}
CHANGE = {"test_id": "T-GHOST-9", "opus_reasoning": "r", "updated": {"expected_primary": ["rent_arrears"]}}

# (case id, mutation, exit code, fragment of the one line that names file, id and field)
CASES: list[tuple[str, Mutation, int, str]] = [
    ("kb-binary", _write("kb.yaml", b"\xff\xfe\x00\x01binary", kb=True), 2, "kb.yaml: not UTF-8 text"),
    ("kb-latin1", _write("kb.yaml", "kb_version: café\n".encode("latin-1"), kb=True), 2, "not UTF-8 text"),
    ("kb-empty", _write("kb.yaml", "", kb=True), 2, "kb.yaml: file is empty (or null)"),
    ("kb-null", _write("kb.yaml", "null\n", kb=True), 2, "kb.yaml: file is empty (or null)"),
    (
        "kb-list",
        _write("kb.yaml", "- a\n- b\n", kb=True),
        2,
        "kb.yaml: Input should be a valid dictionary",
    ),
    (
        "kb-dup-key",
        _write("kb.yaml", "kb_version: a\nkb_version: b\nentities: []\n", kb=True),
        2,
        "duplicate key",
    ),
    ("kb-alias-bomb", _write("kb.yaml", BOMB, kb=True), 2, "expands to more than"),
    ("kb-bad-yaml", _write("kb.yaml", "kb_version: [\n", kb=True), 2, "invalid YAML"),
    (
        "kb-dir-no-manifest",
        _kb_dir(lambda kb: (kb / "manifest.yaml").unlink()),
        2,
        "manifest.yaml: cannot read",
    ),
    (
        "kb-dangling-link",
        _replace_with("kb.yaml", lambda p: p.symlink_to(p.parent / "gone.yaml")),
        2,
        "cannot read",
    ),
    ("kb-looping-link", _replace_with("kb.yaml", lambda p: p.symlink_to(p)), 2, "kb.yaml: cannot read"),
    (
        "entity-id-shape",
        _edit_kb(lambda d: _entity(d, "rent_arrears").update(entity_id="Rent-Arrears")),
        2,
        "Rent-Arrears: entity_id: String should match pattern",
    ),
    (
        "entity-load-mode",
        _edit_kb(lambda d: _entity(d, "rent_arrears").update(load_mode="SOMETIMES")),
        2,
        "rent_arrears: load_mode: Input should be",
    ),
    (
        "conditions-impossible",
        _conditions(gte=10, lte=3),
        2,
        "days_since_last: no value is both >= 10 and <= 3",
    ),
    ("conditions-eq-outside", _conditions(eq=1, gte=7), 2, "eq 1 is outside the gte/lte range"),
    ("conditions-empty-in", _conditions(**{"in": []}), 2, "'in' an empty list matches nothing"),
    (
        "entity-duplicate",
        _edit_kb(lambda d: d["entities"].append(dict(_entity(d, "rent_arrears")))),
        2,
        "rent_arrears: entity_id: duplicate entity id",
    ),
    (
        "vocabulary-user-type",
        _edit_kb(lambda d: d["vocabulary"].update(user_types=["TENANT"])),
        2,
        "T-ALWAYS-002: user_type: 'CASEWORKER' is not in the KB's declared vocabulary (TENANT)",
    ),
    (
        "vocabulary-category",
        _edit_kb(lambda d: d["vocabulary"].update(categories=["brief"])),
        2,
        "T-DEP-001: category: 'daily' is not in the KB's declared vocabulary (brief)",
    ),
    (
        "topic-control-chars",
        _edit_kb(lambda d: _entity(d, "rent_arrears").update(topics=["money\n"])),
        2,
        "rent_arrears: topics.0: String should match pattern",
    ),
    (
        "kbdir-empty-manifest",
        _kb_dir(lambda kb: (kb / "manifest.yaml").write_text("")),
        2,
        "manifest.yaml: file is empty",
    ),
    (
        "kbdir-empty-entity",
        _kb_dir(lambda kb: (kb / "entities/rent_arrears.yaml").write_text("")),
        2,
        "rent_arrears.yaml: file is empty (or null)",
    ),
    (
        "kbdir-null-entity",
        _kb_dir(lambda kb: (kb / "entities/lease_renewal.yaml").write_text("null")),
        2,
        "lease_renewal.yaml: file is empty (or null)",
    ),
    (
        "kbdir-no-entities",
        _kb_dir(lambda kb: shutil.rmtree(kb / "entities")),
        2,
        "entities: no entity files found",
    ),
    (
        "banks-is-a-file",
        _replace_with("banks", lambda p: p.write_text("x")),
        2,
        "banks: banks directory is not a directory",
    ),
    ("banks-missing", _replace_with("banks", lambda p: None), 2, "banks: banks directory not found"),
    (
        "bank-is-a-dir",
        _replace_with("banks/" + SEMANTIC, lambda p: p.mkdir()),
        2,
        "tenant_questions.json: cannot read",
    ),
    (
        "bank-dangling-link",
        _replace_with("banks/" + SEMANTIC, lambda p: p.symlink_to(p.parent / "gone")),
        2,
        "cannot read",
    ),
    (
        "bank-dup-key",
        _write(SEMANTIC, '{"bank_type": "SEMANTIC", "bank_type": "SEMANTIC", "tests": []}'),
        2,
        "duplicate key 'bank_type'",
    ),
    (
        "bank-top-level-list",
        _write(SEMANTIC, "[]"),
        2,
        "tenant_questions.json: Input should be a valid dictionary",
    ),
    (
        "bank-wrong-type",
        _edit_json(SEMANTIC, lambda d: d.update(bank_type="STATE")),
        2,
        "bank_type: Input should be 'SEMANTIC'",
    ),
    (
        "rank-circular",
        _rank(
            [
                {"higher": "repair_requests", "lower": "script_repair_email"},
                {"higher": "script_repair_email", "lower": "repair_requests"},
            ]
        ),
        2,
        "T-REP-001: rank_check: circular: repair_requests > script_repair_email > repair_requests",
    ),
    (
        "rank-forbidden",
        _rank([{"higher": "repair_requests", "lower": "lease_renewal"}], not_expected=["lease_renewal"]),
        2,
        "T-REP-001: rank_check: 'lease_renewal' is not expected, so it can never be ranked",
    ),
    (
        "expected-and-forbidden",
        _edit_json(SEMANTIC, lambda d: _test(d, "T-DEP-001").update(not_expected=["deposit_return"])),
        2,
        "T-DEP-001: not_expected: 'deposit_return' is both expected and not expected",
    ),
    (
        "unknown-entity",
        _edit_json(SEMANTIC, lambda d: _test(d, "T-RENT-001").update(expected_primary=["rent_areers"])),
        2,
        "T-RENT-001: expected_primary: unknown entity 'rent_areers'",
    ),
    (
        "wrong-load-mode",
        _edit_json(SEMANTIC, lambda d: _test(d, "T-RENT-001").update(expected_primary=["handler_crisis"])),
        2,
        "T-RENT-001: expected_primary: entity 'handler_crisis' is PATTERN, this field needs SEMANTIC",
    ),
    (
        "layout-outside",
        _write("banks.yaml", "semantic: ../elsewhere.json\n"),
        2,
        "banks.yaml: semantic: Value error, must be a relative path",
    ),
    (
        "layout-unknown-key",
        _write("banks.yaml", "semantics: x.json\n"),
        2,
        "banks.yaml: semantics: Extra inputs are not permitted",
    ),
    (
        "regex-does-not-compile",
        _edit_json(RULES, lambda d: d["crisis_patterns"][0].update(pattern="(unclosed")),
        2,
        "crisis pattern /(unclosed/: pattern: regex does not compile",
    ),
    (
        "regex-catastrophic",
        _edit_json(RULES, lambda d: d["crisis_patterns"][0].update(pattern="(a+)+$")),
        2,
        "crisis pattern /(a+)+$/: pattern: backtracks catastrophically",
    ),
    (
        "rules-missing",
        _replace_with("banks/" + RULES, lambda p: None),
        2,
        "pattern_rules.json: pattern tests need a rules file",
    ),
    (
        "history-unknown-test",
        _history({"version": "2026-11-01T10:00:00Z", "changes": [CHANGE]}),
        2,
        "T-GHOST-9: test_id: history names a test the semantic bank lacks",
    ),
    (
        "history-binary",
        _write(HISTORY, b"\x89PNG\r\n\x1a\n\x00\x00"),
        2,
        "expectations_2026-11-01.json: not UTF-8 text",
    ),
    (
        "history-future",
        _history({"version": "2999-01-01T00:00:00Z"}, "semantic/history/expectations_2999-01-01.json"),
        0,
        "version: dated in the future (2999-01-01T00:00:00+00:00)",
    ),
    (
        "vacuous-not-expected",
        lambda root: _validate(root),
        0,
        "T-EVICT-001: not_expected: 'handler_crisis' is PATTERN",
    ),
    (
        "run-unknown-topic",
        _flags("--model", "local-minilm", "--topic", "nosuch"),
        2,
        "--topic: unknown topic 'nosuch'",
    ),
    (
        "run-unknown-test",
        _flags("--model", "local-minilm", "--test", "NOPE-1"),
        2,
        "--test: unknown test id(s) NOPE-1",
    ),
    ("run-bad-banks", _flags("--banks", "semantic,vibes"), 2, "--banks: expected 'all'"),
    ("run-negative-max-errored", _flags("--max-errored", "-1"), 2, "--max-errored: must be 0 or more"),
    ("run-empty-selection", _flags("--banks", "state", "--test", "T-RENT-001"), 2, "matches no test"),
    ("show-corrupt-results", _corrupt_results("show"), 2, "results.json: provenance: Input should be"),
    ("diff-corrupt-results", _corrupt_results("diff"), 2, "not a readable results document (TypeError)"),
    (
        "models-unknown-kind",
        _models("schema_version: 1\nmodels:\n  x: {embedder: {kind: nope}, reranker: {kind: cosine}}\n"),
        2,
        "embedder.kind",
    ),
    ("models-not-yaml", _models("models: [\n"), 2, "models.yaml"),
    # Issue 27 item 4: each of these was accepted, hung, or failed without naming the file.
    ("models-binary", _models(b"\xff\xfe\x00\x01binary"), 2, "models.yaml: not UTF-8 text"),
    (
        "models-dup-model-key",
        _models(f"models:\n  x: {LOCAL}\n  x: {LOCAL}\n"),
        2,
        "models.yaml:3: duplicate key 'x'",
    ),
    (
        "models-enabled-yes",
        _models(f"models:\n  x: {{enabled: 'yes', {LOCAL[1:]}\n"),
        2,
        "models.yaml: model 'x': field 'enabled': Input should be a valid boolean",
    ),
    (
        "models-rate-inf",
        _models(f"models:\n  x: {{rate_limit_per_min: .inf, {LOCAL[1:]}\n"),
        2,
        "models.yaml: model 'x': field 'rate_limit_per_min': inf is not a finite number",
    ),
    (
        "models-rate-1e400-text",
        _models(f"models:\n  x: {{rate_limit_per_min: '1e400', {LOCAL[1:]}\n"),
        2,
        "model 'x': field 'rate_limit_per_min': Input should be a finite number",
    ),
    (
        "models-fifo",
        _fifo("models.yaml", lambda root: ["models", "--models-file", str(root / "models.yaml")]),
        2,
        "models.yaml: cannot read file: it is a FIFO, not a regular file",
    ),
    (
        "pattern-critical-yes",
        _edit_json(PATTERN, lambda d: d["tests"][0].update(is_critical="yes")),
        2,
        "T-PAT-CRISIS-001: is_critical: Input should be a valid boolean",
    ),
    (
        "rule-critical-one",
        _edit_json(RULES, lambda d: d["crisis_patterns"][0].update(is_critical=1)),
        2,
        "crisis_patterns.0.is_critical: Input should be a valid boolean",
    ),
    (
        "test-id-newline",
        _edit_json(SEMANTIC, lambda d: _test(d, "T-RENT-001").update(test_id="T-RENT-001\n")),
        2,
        "T-RENT-001\\n: test_id: String should match pattern",
    ),
    (
        "entity-ref-escape",
        _edit_json(SEMANTIC, lambda d: _test(d, "T-RENT-001").update(expected_primary=["rent\x1b[2J"])),
        2,
        "T-RENT-001: expected_primary: unknown entity 'rent\\x1b[2J'",
    ),
    (
        "run-test-id-newline",
        _flags("--model", "local-minilm", "--test", "NOPE\nerror: forged"),
        2,
        "--test: unknown test id(s) NOPE\\nerror: forged",
    ),
    (
        "run-fail-under-150",
        _flags("--fail-under", "150"),
        2,
        "--fail-under: 150 is out of range (must be >= 0",
    ),
    ("run-fail-under-nan", _flags("--fail-under", "nan"), 2, "--fail-under: nan is not a finite number"),
    ("run-fail-under-1e400", _flags("--fail-under", "1e400"), 2, "--fail-under: inf is not a finite number"),
    ("calibrate-rate-nan", _calibrate("--rate-per-min", "nan"), 2, "--rate-per-min: nan is not a finite"),
    ("calibrate-cost-negative", _calibrate("--max-cost", "-1"), 2, "--max-cost: -1 is out of range"),
    (
        "state-value-nan",
        _raw(STATE, '"days_since_last": 10', '"days_since_last": NaN'),
        2,
        "T-STATE-002: user_state.days_since_last: nan is not a finite number",
    ),
    (
        "state-value-1e400",
        _raw(STATE, '"days_since_last": 10', '"days_since_last": 1e400'),
        2,
        "T-STATE-002: user_state.days_since_last: inf is not a finite number",
    ),
    (
        "conditions-nan",
        _conditions(gte=float("nan")),
        2,
        "handler_returning_user: state_conditions.days_since_last.gte: nan is not a finite number",
    ),
    ("bank-fifo", _fifo("banks/" + STATE), 2, "tenant_states.json: cannot read file: it is a FIFO"),
    ("kb-fifo", _fifo("kb.yaml"), 2, "kb.yaml: cannot read file: it is a FIFO"),
    (
        "diff-fifo",
        _fifo("kb.yaml", lambda root: ["diff", str(root / "kb.yaml"), str(root / "kb.yaml")]),
        2,
        "kb.yaml: no results found",  # a FIFO is not a results file: refused before any read
    ),
    (
        "bank-10mb-string",
        _edit_json(SEMANTIC, lambda d: _test(d, "T-RENT-001").update(prompt="a" * 10_000_000)),
        2,
        "tenant_questions.json: file is 10,00",
    ),
    (
        "prompt-too-long",
        _edit_json(SEMANTIC, lambda d: _test(d, "T-RENT-001").update(prompt="a" * 10_001)),
        2,
        "T-RENT-001: prompt: String should have at most 10000 characters",
    ),
    (
        "prompt-whitespace",
        _edit_json(SEMANTIC, lambda d: _test(d, "T-RENT-001").update(prompt=" \n\t ")),
        2,
        "T-RENT-001: prompt: Value error, is blank (empty or only whitespace)",
    ),
    (
        "pattern-prompt-whitespace",
        _edit_json(PATTERN, lambda d: d["tests"][0].update(prompt="   ")),
        2,
        "T-PAT-CRISIS-001: prompt: Value error, is blank",
    ),
    (
        "entity-summary-whitespace",
        _edit_kb(lambda d: _entity(d, "rent_arrears").update(summary="\n")),
        2,
        "rent_arrears: summary: Value error, is blank",
    ),
    (
        "history-is-a-file",
        _replace_with("banks/semantic/history", lambda p: p.write_text("x")),
        2,
        "history: history folder is not a directory",
    ),
    (
        "history-misnamed",
        _history({"version": "2026-11-01T10:00:00Z"}, "semantic/history/expectation_2026-11-01.json"),
        2,
        "expectation_2026-11-01.json: not a history file name (expected expectations_YYYY-MM-DD",
    ),
    (
        "history-name-not-a-date",
        _history({"version": "2026-11-01T10:00:00Z"}, "semantic/history/expectations_2026-13-01.json"),
        2,
        "expectations_2026-13-01.json: '2026-13-01' in the file name is not a date",
    ),
    (
        "history-out-of-order",
        _history({"version": "2026-11-05T10:00:00Z"}),
        2,
        "expectations_2026-11-01.json: version: the version's UTC date is 2026-11-05, the file name",
    ),
    (
        "history-override-blank-reason",
        _history({"version": "2026-11-01T10:00:00Z", "changes": [BLANK_REASON]}),
        2,
        "T-RENT-001: human_override.reason: Value error, is blank",
    ),
    (
        "override-blank-by",
        lambda root: [
            "override",
            "T-RENT-001",
            "--withdraw",
            "--by",
            " ",
            "--reason",
            "r",
            *_validate(root)[1:],
        ],
        2,
        "--by and --reason must not be empty",
    ),
    (
        "regex-ambiguous-alternation",
        _edit_json(RULES, lambda d: d["crisis_patterns"][0].update(pattern="(x|x)*y")),
        2,
        "crisis pattern /(x|x)*y/: pattern: backtracks catastrophically",
    ),
]


def _relevance(**fields: Any) -> Mutation:
    """T-RENT-001 stated by `fields` (any-of, graded) instead of its exact primary."""

    def edit(data: Any) -> None:
        test = _test(data, "T-RENT-001")
        test["expected_primary"] = []
        test.update(fields)

    return _edit_json(SEMANTIC, edit)


RELEVANCE_CASES: list[tuple[str, Mutation, int, str]] = [
    (
        f"gain-{name}",
        _relevance(relevant={"rent_arrears": gain}),
        2,
        f"T-RENT-001: relevant.rent_arrears: {msg}",
    )
    for name, gain, msg in (
        ("negative", -1, "Input should be greater than or equal to 0"),
        ("float", 1.5, "Input should be a valid integer"),
        ("string", "3", "Input should be a valid integer"),
        ("bool", True, "Input should be a valid integer"),
        ("nan", float("nan"), "nan is not a finite number"),
    )
] + [
    (
        "gain-unknown-entity",
        _relevance(relevant={"no_such": 2}),
        2,
        "T-RENT-001: relevant: unknown entity 'no_such'",
    ),
    (
        "graded-only-zero-gains",
        _relevance(relevant={"rent_arrears": 0}),
        2,
        "T-RENT-001: Value error, needs expected_primary, expected_any or a relevant entity with gain > 0",
    ),
    (
        "any-of-unknown-entity",
        _relevance(expected_any=["rent_arrears", "no_such"]),
        2,
        "T-RENT-001: expected_any: unknown entity 'no_such'",
    ),
    (
        "graded-and-any-of-at-once",
        _relevance(expected_any=["rent_arrears"], relevant={"rent_arrears": 2}),
        2,
        "T-RENT-001: relevant: 'rent_arrears' is in expected_any and relevant: an entity has one role",
    ),
    (
        "graded-and-not-expected",
        _relevance(relevant={"rent_arrears": 2}, not_expected=["rent_arrears"]),
        2,
        "'rent_arrears' is in relevant and not_expected: an entity has one role",
    ),
]
CASES += RELEVANCE_CASES


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(REPO / "tests/fixtures/tenant_domain", tmp_path, dirs_exist_ok=True)
    shutil.copy(REPO / "models.yaml", tmp_path / "models.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    return tmp_path


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if "dagster_home" not in p.parts}


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.timeout(120)  # a hang guard (the catastrophic regex), not a speed assertion
@pytest.mark.parametrize(("mutate", "code", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_line(
    root: Path, capsys: pytest.CaptureFixture[str], mutate: Mutation, code: int, fragment: str
) -> None:
    argv = mutate(root)
    before = _tree(root)
    assert cli.main(argv) == code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert fragment in err, err
    assert _tree(root) == before  # nothing written, not even on the way to the error
    if code == 2:
        errors = [line for line in err.splitlines() if not line.startswith("warning:")]
        assert errors and all(
            os.sep in line or line.startswith("error:") or "problem(s)" in line for line in errors
        )
