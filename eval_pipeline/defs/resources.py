"""Resources: where the inputs are, where outputs go, the systems under test, the run's scope."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast, get_args

import dagster as dg
from pydantic import Field
from upath import UPath

from eval_pipeline.core.inputs.history_file import LoadedHistory
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import (
    Banks,
    InputError,
    Problem,
    files_hash,
    history_dir,
    history_files,
    load_banks,
    load_history,
    load_kb,
)
from eval_pipeline.core.scoring.points import DEFAULT_PASS_THRESHOLD
from eval_pipeline.core.verdicts.run_gate import Gates
from eval_pipeline.providers.cache import CacheMode
from eval_pipeline.providers.models import ModelConfig, load_gates, load_models
from eval_pipeline.providers.object_store import output_path


class InputsResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The KB and the banks directory (paths relative to the working directory)."""

    kb_path: str = "kb"
    banks_dir: str = "test_banks"

    @property
    def kb(self) -> Path:
        return Path(self.kb_path)

    @property
    def banks(self) -> Path:
        return Path(self.banks_dir)

    def history_hash(self) -> str:
        return files_hash(history_files(self.banks), self.banks)

    def load_kb(self, path: Path) -> KnowledgeBase:
        """The KB at `path` (the date's snapshot, or the configured files)."""
        problems: list[Problem] = []
        kb = load_kb(path, problems)
        if problems or kb is None:
            raise InputError(problems)
        return kb

    def load_banks(self, root: Path) -> tuple[Banks, list[Problem]]:
        """Banks under `root` without history; schema problems are returned, not raised (checks
        report them)."""
        problems: list[Problem] = []
        return load_banks(root, problems), problems

    def load_history(self) -> list[LoadedHistory]:
        problems: list[Problem] = []
        history = load_history(history_dir(self.banks), problems)
        if problems:
            raise InputError(problems)
        return history


class StorageResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Where outputs go. `results_dir` (reports) and `outputs_uri` (the IO managers' tables and
    documents) may be object store URIs; snapshots and calibration files stay local."""

    storage_dir: str = "storage"
    results_dir: str = "results"
    calibration_dir: str = "calibration"
    outputs_uri: str | None = None  # default: storage_dir

    @property
    def outputs_root(self) -> str:
        return self.outputs_uri or self.storage_dir

    @property
    def snapshot_store(self) -> Path:
        return Path(self.storage_dir) / "snapshots"

    @property
    def results_root(self) -> UPath:
        return output_path(self.results_dir)

    def run_dir(self, model: str, date: str) -> UPath:
        return self.results_root / model / date


class ProvidersResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The systems under test. API keys come from the environment only, through `EnvVar`
    (the UI shows the variable's name, never its value); see `from_environment`."""

    models_file: str = "models.yaml"
    cache_dir: str = ".cache"
    cache_mode: str = "use"
    anthropic_api_key: str | None = None
    voyage_api_key: str | None = None
    anthropic_base_url: str | None = None
    voyage_base_url: str | None = None
    rerank_batch: bool = Field(
        default=False, description="Claude rerankers answer through the Message Batches API (half price)"
    )

    @classmethod
    def from_environment(cls, **config: Any) -> ProvidersResource:
        """Bind each variable that is set as an `EnvVar`; an unset one would fail every run,
        including runs of the offline models that need no key."""
        bound: dict[str, Any] = {f: dg.EnvVar(var) for f, var in ENV_FIELDS.items() if os.environ.get(var)}
        return cls(**config, **bound)

    def environ(self, cfg: ModelConfig | None = None) -> dict[str, str]:
        """Keys and base URLs for the providers. A model may name its own key variables
        (`anthropic_api_key_env: TEAM_KEY`); those are read when that model runs."""
        values = {var: getattr(self, field) for field, var in ENV_FIELDS.items()}
        if cfg is not None:
            for var in (cfg.anthropic_api_key_env, cfg.voyage_api_key_env):
                values.setdefault(var, os.environ.get(var))
        return {var: value for var, value in values.items() if value}

    def models(self) -> dict[str, ModelConfig]:
        return load_models(Path(self.models_file))

    def model(self, key: str) -> ModelConfig:
        models = self.models()
        if key not in models:
            raise dg.Failure(f"model '{key}' is not in {self.models_file}")
        return models[key]

    def mode(self) -> CacheMode:
        if self.cache_mode not in get_args(CacheMode):
            raise dg.Failure(f"cache_mode must be use, refresh or off (got {self.cache_mode!r})")
        return cast(CacheMode, self.cache_mode)


ENV_FIELDS = {
    "anthropic_api_key": "ANTHROPIC_API_KEY",
    "voyage_api_key": "VOYAGE_API_KEY",
    "anthropic_base_url": "ANTHROPIC_BASE_URL",
    "voyage_base_url": "VOYAGE_BASE_URL",
}


class RunScopeResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The gates a run applies; the CLI sets it per run. No field narrows the tests: a partition
    is a day's whole evaluation, the baseline diffs and gates read. A narrowed check is the CLI's
    ad-hoc path (`run --test/--topic/--banks`), which never writes a partition."""

    pass_threshold: int = DEFAULT_PASS_THRESHOLD
    # None: the project's gate (the models file's `gates:`), as a run from the UI applies it.
    fail_under: float | None = None
    max_errored: int | None = None
    # The progress bar's terminal (a step's own stderr goes to its compute log), opened by the CLI
    # (orchestration/evaluation_route.py); None: no bar (piped output, the UI, models at once).
    progress_fd: int | None = None

    def gates(self, models_file: str) -> Gates:
        """The release gate's settings: these, and the project's where these are unset."""
        kept = load_gates(Path(models_file)).overridden(
            fail_under=self.fail_under, max_errored=self.max_errored
        )
        return Gates(fail_under=kept.fail_under, max_errored=kept.max_errored)
