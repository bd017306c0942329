"""`init DIR`: a new project, the way in for a new domain: a KB (manifest with the project's
name, one entity per load mode), banks with one example test each, a models file with the two
offline models and the gates the project keeps, and empty results/ and storage/ folders of its
own. Run from DIR, every command finds them by default; the example validates and evaluates as it
stands."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from eval_pipeline.cli.exit_status import EXIT_OK, UsageError
from eval_pipeline.cli.flags import path_arg

_PERSONA = "assistant_persona"
_WELCOME = "handler_welcome"
_URGENT = "handler_urgent"
_GUIDE = "getting_started"

ENTITIES: list[dict[str, Any]] = [
    {
        "entity_id": _GUIDE,
        "entity_type": "KNOWLEDGE",
        "load_mode": "SEMANTIC",
        "title": "Getting started",
        "summary": "The first steps for someone new to the service.",
        "topics": ["basics"],
        "content": "Create an account, confirm your email address, then follow the short tour.",
    },
    {
        "entity_id": "contact_support",
        "entity_type": "KNOWLEDGE",
        "load_mode": "SEMANTIC",
        "title": "Contacting support",
        "summary": "How to reach a person when self-help is not enough.",
        "topics": ["support"],
        "content": "Write to the support address or use the chat; answers come within one working day.",
    },
    {
        "entity_id": _WELCOME,
        "entity_type": "HANDLER",
        "load_mode": "STATE",
        "title": "Welcome a new user",
        "summary": "First conversation.",
        "content": "Greet the user and offer the getting-started guide.",
        "state_conditions": {"is_first_conversation": {"eq": True}},
    },
    {
        "entity_id": _URGENT,
        "entity_type": "HANDLER",
        "load_mode": "PATTERN",
        "title": "Urgent help",
        "summary": "Safety first when urgent language appears.",
        "content": "Stop, acknowledge, and give the emergency contact before anything else.",
    },
    {
        "entity_id": _PERSONA,
        "entity_type": "PERSONA",
        "load_mode": "ALWAYS",
        "title": "Assistant persona",
        "summary": "Calm, brief, practical.",
        "content": "Answer briefly and practically; ask one question at a time.",
    },
]


def _bank(kind: str, tests: list[dict[str, Any]]) -> dict[str, Any]:
    return {"bank_type": kind, "version": "1.0", "tests": tests}


BANKS: dict[str, dict[str, Any]] = {
    "semantic/parent_test_bank.json": _bank(
        "SEMANTIC",
        [
            {
                "test_id": "SEM-001",
                "name": "New user",
                "category": "example",
                "topics": ["basics"],
                "prompt": "how do I get started with my new account?",
                "expected_primary": [_GUIDE],
                "expected_secondary": [],
                "not_expected": [],
                "rank_check": [],
                "user_state": {},
            }
        ],
    ),
    "state/state_handler_tests.json": _bank(
        "STATE",
        [
            {
                "test_id": "STATE-001",
                "name": "First conversation",
                "user_state": {"is_first_conversation": True},
                "expected_handlers": [_WELCOME],
                "not_expected_handlers": [],
            }
        ],
    ),
    "pattern/pattern_tests.json": _bank(
        "PATTERN",
        [
            {
                "test_id": "PAT-001",
                "name": "Urgent request",
                "prompt": "this is an emergency, please help",
                "expected_matches": [_URGENT],
                "expected_secondary": [],
                "not_expected_matches": [],
                "pattern_type": "crisis",
                "is_critical": True,
            }
        ],
    ),
    "pattern/pattern_rules.json": {
        "crisis_patterns": [{"pattern": "emergency", "entities": [_URGENT], "is_critical": True}],
        "keyword_boosts": [],
    },
    "always/always_load_tests.json": _bank(
        "ALWAYS",
        [
            {
                "test_id": "ALWAYS-001",
                "name": "Persona for everyone",
                "user_type": "USER",
                "user_state": {},
                "expected_always": [_PERSONA],
            }
        ],
    ),
}

MODELS = """\
# This project's retrieval configurations; see `eval-pipeline models` and the docs.
schema_version: 1
models:
  local-minilm:
    description: Bundled MiniLM embeddings, top 6 by cosine. Offline, free.
    embedder: {kind: local}
    reranker: {kind: cosine}
  local-hybrid:
    description: Bundled MiniLM embeddings, cosine + lexical + keyword-boost rerank. Offline, free.
    embedder: {kind: local}
    reranker: {kind: hybrid}
"""


def with_new_gates(models: str) -> str:
    """A new project's models file: its models, then the gates a new project keeps."""
    from eval_pipeline.core.verdicts.project_gates import NEW_PROJECT_GATES, gates_section

    return f"{models}\n{gates_section(NEW_PROJECT_GATES)}"


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "init",
        help="scaffold a new project (KB, banks, models, results, storage)",
        description="Create a new project in DIR: a small KB, one test of each bank, a models file "
        "with the offline models, and its own results and storage folders; `eval-pipeline run` in "
        "DIR then evaluates it.",
    )
    p.add_argument("dir", type=path_arg, help="a new or empty folder")
    p.add_argument("--name", help="the project's name (default: the folder's name)")


def cmd_init(args: argparse.Namespace) -> int:
    import yaml

    from eval_pipeline.core.fileio import atomic_write_text

    root: Path = args.dir
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise UsageError(f"{root}: exists and is not an empty folder; init writes a new project")
    name = args.name or root.resolve().name
    manifest = {"kb_version": "0.1", "name": name, "description": "A new eval_pipeline project."}
    atomic_write_text(root / "kb" / "manifest.yaml", yaml.safe_dump(manifest, sort_keys=False))
    for entity in ENTITIES:
        text = yaml.safe_dump(entity, sort_keys=False, allow_unicode=True)
        atomic_write_text(root / "kb" / "entities" / f"{entity['entity_id']}.yaml", text)
    for rel, data in BANKS.items():
        atomic_write_text(root / "test_banks" / rel, json.dumps(data, indent=2) + "\n")
    (root / "test_banks" / "semantic" / "history").mkdir(parents=True)
    atomic_write_text(root / "models.yaml", with_new_gates(MODELS))
    for folder in ("results", "storage", "calibration"):
        (root / folder).mkdir()
    print(f"project '{name}' in {root}: edit kb/ and test_banks/, then from there `eval-pipeline run`")
    return EXIT_OK
