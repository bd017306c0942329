"""Schemas of the four test banks and the pattern rules file (specification §5), and where they
live under the banks directory: the specification's file names, unless a `banks.yaml` beside them
names others (paths relative to the banks directory, never outside it), e.g.

    semantic: semantic/tenant_bank.json
    history: semantic/history
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictInt, StringConstraints, field_validator, model_validator

from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.kb import Label, Prompt, UserType

LAYOUT_FILE = "banks.yaml"
TestId = Annotated[str, StringConstraints(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.-]+$")]
# User state is open-ended (a second domain may add fields); values are JSON scalars or lists.
UserState = dict[str, Any]


class Mechanism(StrEnum):
    SEMANTIC = "semantic"
    STATE = "state"
    PATTERN = "pattern"
    ALWAYS = "always"


class BankLayout(FrozenModel):
    semantic: str = "semantic/parent_test_bank.json"
    state: str = "state/state_handler_tests.json"
    pattern: str = "pattern/pattern_tests.json"
    always: str = "always/always_load_tests.json"
    rules: str = "pattern/pattern_rules.json"
    history: str = "semantic/history"

    @field_validator("*")
    @classmethod
    def _inside(cls, value: str) -> str:
        path = PurePosixPath(value)
        if not value or path.is_absolute() or ".." in path.parts or "\\" in value:
            raise ValueError("must be a relative path inside the banks directory")
        return value

    def banks(self) -> dict[Mechanism, str]:
        """Each mechanism's bank file (each field is named for its mechanism)."""
        return {m: getattr(self, m.value) for m in Mechanism}


class PatternType(StrEnum):
    CRISIS = "crisis"
    NEGATIVE = "negative"
    KEYWORD = "keyword"


class RankCheck(FrozenModel):
    higher: str
    lower: str


# A graded judgment, as in TREC qrels: 0 = judged not relevant, 1 and up = relevant, more is better.
MAX_GAIN = 1000
Gain = Annotated[StrictInt, Field(ge=0, le=MAX_GAIN)]


class _Relevance(FrozenModel):
    """What a semantic test counts as relevant: exact primaries, "any of" primaries, graded gains.

    At least one of them must name something relevant; `relevant` may also hold gain-0 judgments.
    """

    expected_primary: list[str] = Field(default_factory=list, description="Every one must be selected")
    expected_any: list[str] = Field(default_factory=list, description="At least one must be selected")
    relevant: dict[str, Gain] = Field(default_factory=dict, description="Graded judgments: entity -> gain")

    @property
    def graded(self) -> bool:
        """Whether a graded judgment names something relevant (a gain above 0)."""
        return any(g > 0 for g in self.relevant.values())

    @model_validator(mode="after")
    def _names_something_relevant(self) -> _Relevance:
        if not (self.expected_primary or self.expected_any or self.graded):
            raise ValueError("needs expected_primary, expected_any or a relevant entity with gain > 0")
        return self


class Expectations(_Relevance):
    """What a semantic test expects in the final selection."""

    expected_secondary: list[str] = Field(default_factory=list)
    not_expected: list[str] = Field(default_factory=list)
    rank_check: list[RankCheck] = Field(default_factory=list)

    def entity_ids(self) -> set[str]:
        ids = {*self.expected_primary, *self.expected_any, *self.relevant}
        ids |= {*self.expected_secondary, *self.not_expected}
        return ids | {e for rc in self.rank_check for e in (rc.higher, rc.lower)}


class SemanticTest(_Relevance):
    test_id: TestId
    name: str = ""
    source_id: str | None = Field(default=None, description="The query's id in an imported collection")
    category: Label
    topics: list[Label] = Field(default_factory=list)
    prompt: Prompt
    expected_secondary: list[str] = Field(default_factory=list)
    not_expected: list[str] = Field(default_factory=list)
    rank_check: list[RankCheck] = Field(default_factory=list)
    user_type: UserType | None = Field(default=None, description="Sent to an external system under test")
    user_state: UserState = Field(default_factory=dict)

    def original_expectations(self) -> Expectations:
        return Expectations(**{name: getattr(self, name) for name in Expectations.model_fields})


class StateTest(FrozenModel):
    test_id: TestId
    name: str = ""
    user_state: UserState
    expected_handlers: list[str] = Field(default_factory=list)
    not_expected_handlers: list[str] = Field(default_factory=list)


class PatternTest(FrozenModel):
    test_id: TestId
    name: str = ""
    prompt: Prompt
    expected_matches: list[str] = Field(default_factory=list)
    expected_secondary: list[str] = Field(default_factory=list)
    not_expected_matches: list[str] = Field(default_factory=list)
    pattern_type: PatternType
    is_critical: StrictBool = False


class AlwaysTest(FrozenModel):
    test_id: TestId
    name: str = ""
    user_type: UserType
    user_state: UserState = Field(default_factory=dict)
    expected_always: list[str] = Field(min_length=1)


class _BankHeader(FrozenModel):
    version: str = "1.0"
    created: str | None = None
    description: str = ""


class SemanticBank(_BankHeader):
    bank_type: Literal["SEMANTIC"]
    tests: list[SemanticTest]


class StateBank(_BankHeader):
    bank_type: Literal["STATE"]
    tests: list[StateTest]


class PatternBank(_BankHeader):
    bank_type: Literal["PATTERN"]
    tests: list[PatternTest]


class AlwaysBank(_BankHeader):
    bank_type: Literal["ALWAYS"]
    tests: list[AlwaysTest]


class CrisisPattern(FrozenModel):
    pattern: str = Field(min_length=1, description="Python regex, matched case-insensitively")
    entities: list[str] = Field(min_length=1)
    is_critical: StrictBool = False


class KeywordBoost(FrozenModel):
    keywords: list[Annotated[str, StringConstraints(min_length=1)]] = Field(min_length=1)
    entity: str


class PatternRules(FrozenModel):
    crisis_patterns: list[CrisisPattern] = Field(default_factory=list)
    keyword_boosts: list[KeywordBoost] = Field(default_factory=list)

    def boosts_by_entity(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for boost in self.keyword_boosts:
            out.setdefault(boost.entity, []).extend(boost.keywords)
        return out


AnyTest = SemanticTest | StateTest | PatternTest | AlwaysTest
