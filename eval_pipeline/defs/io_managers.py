"""Storage of asset values: tables as Parquet, documents as JSON, one file per partition."""

from __future__ import annotations

import os
from typing import Any

import dagster as dg
import pandas as pd
from pydantic import BaseModel
from upath import UPath

from eval_pipeline.core.fileio import temp_file


def _atomic_write_bytes(path: UPath, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_file(str(path.parent))
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, str(path))


class ParquetIOManager(dg.UPathIOManager):
    extension: str = ".parquet"

    def dump_to_path(self, context: dg.OutputContext, obj: pd.DataFrame, path: UPath) -> None:
        _atomic_write_bytes(path, obj.to_parquet(index=False))

    def load_from_path(self, context: dg.InputContext, path: UPath) -> pd.DataFrame:
        return pd.read_parquet(str(path))


class JsonModelIOManager(dg.UPathIOManager):
    """Pydantic models as JSON; the consuming parameter's annotation says which model."""

    extension: str = ".json"

    def dump_to_path(self, context: dg.OutputContext, obj: BaseModel, path: UPath) -> None:
        _atomic_write_bytes(path, obj.model_dump_json(indent=2).encode("utf-8"))

    def load_from_path(self, context: dg.InputContext, path: UPath) -> Any:
        model = context.dagster_type.typing_type
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"input {context.name} needs a pydantic model annotation")
        return model.model_validate_json(path.read_bytes())


class ParquetIOManagerFactory(dg.ConfigurableIOManagerFactory[ParquetIOManager]):
    base_dir: str

    def create_io_manager(self, context: dg.InitResourceContext) -> ParquetIOManager:
        return ParquetIOManager(base_path=UPath(self.base_dir))


class JsonIOManagerFactory(dg.ConfigurableIOManagerFactory[JsonModelIOManager]):
    base_dir: str

    def create_io_manager(self, context: dg.InitResourceContext) -> JsonModelIOManager:
        return JsonModelIOManager(base_path=UPath(self.base_dir))
