"""What an evaluation evaluated: its project, the KB and its entities by digest, the banks, the
expectation version, and which mechanisms the system under test answered.

Which project a KB belongs to: its declared `name` (the manifest's) when both sides declare
one; otherwise two KBs are one project when each shares at least half of its entity ids with
the other. Editing entities or banks never makes another project: that is a KB or coverage
change of the same one.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from eval_pipeline.core.inputs.banks import Mechanism, PatternTest
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks


class ProjectIdentity(FrozenModel):
    name: str | None = Field(description="The KB manifest's declared name, if any")
    kb_version: str
    entity_ids: list[str]

    @property
    def label(self) -> str:
        if self.name:
            return f"'{self.name}'"
        return f"unnamed KB {self.kb_version} ({len(self.entity_ids)} entities)"

    def same_project(self, other: ProjectIdentity) -> bool:
        if self.name and other.name:
            return self.name == other.name
        mine, theirs = set(self.entity_ids), set(other.entity_ids)
        shared = len(mine & theirs)
        return 2 * shared >= max(len(mine), len(theirs), 1)


class BankIdentity(FrozenModel):
    file: str = Field(description="Relative to the banks directory")
    hash: str
    test_ids: list[str]
    critical_ids: list[str] = Field(default_factory=list, description="Tests marked critical")


class EvaluationIdentity(FrozenModel):
    project: ProjectIdentity
    kb_hash: str
    entities: dict[str, str] = Field(description="entity id -> content digest")
    banks: dict[Mechanism, BankIdentity] = Field(description="The bank files that were present")
    expectation_version: str = Field(description="Hash of the expectation history")
    mechanism_sources: dict[Mechanism, str] = Field(
        description="'reference' (the harness's rules) or the kind of the system under test"
    )


def project_identity(kb: KnowledgeBase) -> ProjectIdentity:
    return ProjectIdentity(
        name=kb.name, kb_version=kb.kb_version, entity_ids=sorted(e.entity_id for e in kb.entities)
    )


def evaluation_identity(
    kb: KnowledgeBase, banks: Banks, history_version: str, sources: Mapping[Mechanism, str]
) -> EvaluationIdentity:
    layout = banks.layout.banks()
    return EvaluationIdentity(
        project=project_identity(kb),
        kb_hash=kb.content_hash,
        entities={e.entity_id: e.content_hash for e in kb.entities},
        banks={
            m: BankIdentity(
                file=layout[m],
                hash=banks.file_hashes.get(layout[m], ""),
                test_ids=[t.test_id for t in bank.tests],
                critical_ids=[t.test_id for t in bank.tests if isinstance(t, PatternTest) and t.is_critical],
            )
            for m in Mechanism
            if (bank := banks.bank(m)) is not None
        },
        expectation_version=history_version,
        mechanism_sources=dict(sources),
    )
