"""Models whose later-added fields stay out of their JSON while they hold their default: listed in
`omitted_at_default`, a field added to a written document (results, diffs) keeps the documents of
a project with no use for it, and the outputs built from them, byte for byte what they were.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class SparseModel(BaseModel):
    model_config = ConfigDict(defer_build=True)
    omitted_at_default: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        fields = type(self).model_fields
        for name in self.omitted_at_default:
            if getattr(self, name) == fields[name].get_default(call_default_factory=True):
                data.pop(name, None)
        return data
