"""Where the banks live under the banks directory.

The default layout is the specification's file names; a `banks.yaml` beside them can name other
files (paths relative to the banks directory, never outside it), e.g.

    semantic: semantic/tenant_bank.json
    history: semantic/history
"""

from __future__ import annotations

from pathlib import PurePosixPath

from pydantic import field_validator

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.frozen import FrozenModel

LAYOUT_FILE = "banks.yaml"


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
