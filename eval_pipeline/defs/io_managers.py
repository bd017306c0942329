"""Storage of asset values: tables as Parquet, documents as JSON, one file per partition, under
a local directory or an object store URI (`base_dir`: see providers/object_store.py)."""

from __future__ import annotations

import io
from typing import Any, cast, get_args, get_origin

import dagster as dg
import pandas as pd
from pydantic import BaseModel, ValidationError
from upath import UPath

from eval_pipeline.providers.object_store import is_local, output_path, write_bytes


def _read_value(path: UPath) -> bytes:
    """A stored value, on an object store in one GET: `UPath.read_bytes` (a file object) and a
    plain `cat_file` (s3fs: whether to download in chunks) ask for its size first, a HEAD. A
    range from 0 would be refused for an empty object; no value stored here is empty."""
    if is_local(path):
        return path.read_bytes()
    return cast("bytes", path.fs.cat_file(path.path, start=0))


class _StoreIOManager(dg.UPathIOManager):
    def make_directory(self, path: UPath) -> None:
        # An object store has no directories to make: asking for one costs requests per output.
        if is_local(path):
            super().make_directory(path)

    def _handle_transition_to_partitioned_asset(self, context: dg.OutputContext, path: UPath) -> None:
        # Dagster's looks for an unpartitioned value written without a file extension: never
        # there (these have one), and asking costs two requests per output on an object store.
        return


class ParquetIOManager(_StoreIOManager):
    extension: str = ".parquet"

    def dump_to_path(self, context: dg.OutputContext, obj: pd.DataFrame, path: UPath) -> None:
        write_bytes(path, obj.to_parquet(index=False))

    def load_from_path(self, context: dg.InputContext, path: UPath) -> pd.DataFrame:
        return pd.read_parquet(io.BytesIO(_read_value(path)))


def _model_of(context: dg.InputContext) -> tuple[type[BaseModel], bool]:
    """The pydantic model an input is annotated with, and whether it wants a mapping of
    partition key -> model (`dict[str, Model]`: several upstream partitions)."""
    annotation = context.dagster_type.typing_type
    mapping = get_origin(annotation) is dict
    model = get_args(annotation)[1] if mapping else annotation
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"input {context.name} needs a pydantic model (or dict[str, model]) annotation")
    return model, mapping


class JsonModelIOManager(_StoreIOManager):
    """Pydantic models as JSON; the consuming parameter's annotation says which model.

    An input annotated `dict[str, Model]` always gets a mapping, also of one partition, and an
    unreadable partition in it is passed over with a warning: one corrupt older document must
    not stop a diff that reads a week of them.
    """

    extension: str = ".json"

    def load_partitions(self, context: dg.InputContext) -> Any:
        model, mapping = _model_of(context)
        if not mapping:
            return super().load_partitions(context)
        paths = self._get_paths_for_partitions(context)
        loaded: dict[str, BaseModel] = {}
        for key in context.asset_partition_keys:
            path = paths[key]
            try:  # read, not asked first whether it exists: one request on an object store
                loaded[key] = model.model_validate_json(_read_value(path))
            except FileNotFoundError:
                continue
            except (ValidationError, OSError, UnicodeDecodeError) as exc:
                context.log.warning(f"{path}: unreadable, passed over ({type(exc).__name__})")
        return loaded

    def dump_to_path(self, context: dg.OutputContext, obj: BaseModel, path: UPath) -> None:
        write_bytes(path, obj.model_dump_json(indent=2).encode("utf-8"))

    def load_from_path(self, context: dg.InputContext, path: UPath) -> Any:
        model, _ = _model_of(context)
        return model.model_validate_json(_read_value(path))


class ParquetIOManagerFactory(dg.ConfigurableIOManagerFactory[ParquetIOManager]):
    base_dir: str

    def create_io_manager(self, context: dg.InitResourceContext) -> ParquetIOManager:
        return ParquetIOManager(base_path=output_path(self.base_dir))


class JsonIOManagerFactory(dg.ConfigurableIOManagerFactory[JsonModelIOManager]):
    base_dir: str

    def create_io_manager(self, context: dg.InitResourceContext) -> JsonModelIOManager:
        return JsonModelIOManager(base_path=output_path(self.base_dir))
