"""No module of eval_pipeline names the sample domain's vocabulary: the sample is data, not code.

The words are read from the sample data itself, so the test follows it as it grows: every entity
id and user type, and every category and topic made of several words (single-word ones such as
"money" or "conversational" are ordinary English that a comment or a prompt may use).
"""

from __future__ import annotations

import re
from pathlib import Path

from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.scoring.registry import ALWAYS

REPO = Path(__file__).resolve().parents[1]


def _sample_vocabulary() -> set[str]:
    kb, banks = load_validated(REPO / "kb", REPO / "test_banks")
    words = {e.entity_id for e in kb.entities}
    words |= {u for e in kb.entities for u in e.user_types} | {t.user_type for t in ALWAYS.tests(banks)}
    labels = {t.category for t in banks.semantic_tests}
    labels |= {topic for t in banks.semantic_tests for topic in t.topics}
    labels |= {topic for e in kb.entities for topic in e.topics}
    return words | {label for label in labels if "_" in label}


def test_no_module_names_a_sample_domain_value() -> None:
    words = _sample_vocabulary()
    assert {"PARENT", "one_liner", "gray_rock"} <= words  # the sample's vocabulary was found
    pattern = re.compile(
        r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, sorted(words))) + r")(?![A-Za-z0-9_])"
    )
    found = [
        f"{path.relative_to(REPO)}:{n}: {match.group(1)}"
        for path in sorted((REPO / "eval_pipeline").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in pattern.finditer(line)
    ]
    assert found == []
