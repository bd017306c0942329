"""The base of the product's immutable records."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    """Unknown fields are refused; the schema is built on first use (most runs need few models)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)
