"""Every pydantic model of the package builds its validator when first used, not when its module is
imported (`defer_build=True`): a command pays only for the models it reads or writes, which keeps
a narrowed run within its start-up bound (docs/performance.md, "Start-up")."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest
from pydantic import BaseModel

import eval_pipeline

PACKAGE = Path(eval_pipeline.__file__).parent


def _package_models() -> list[type[BaseModel]]:
    for info in pkgutil.walk_packages([str(PACKAGE)], "eval_pipeline."):
        if not info.name.endswith("__main__"):  # running it is its import
            importlib.import_module(info.name)
    found: list[type[BaseModel]] = []
    todo = list(BaseModel.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        # Dagster's config classes (resources, run config) are Dagster's to build.
        if cls.__module__.startswith("eval_pipeline.") and not any(
            c.__module__.startswith("dagster") for c in cls.__mro__
        ):
            found.append(cls)
    return found


@pytest.mark.slow
def test_every_model_of_the_package_defers_its_build() -> None:
    models = _package_models()
    assert len(models) > 50  # the walk found the package's models
    assert [m.__qualname__ for m in models if m.model_config.get("defer_build") is not True] == []
