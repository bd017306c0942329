"""The empty list a model field starts with.

A pydantic model's field with a `default_factory` has the factory's signature read when the model
builds (does it take the validated data?). The `list` builtin's signature is parsed from its text
signature (~50 µs each, and the first parse compiles the tokenizer's patterns, ~2 ms): a narrowed
run builds 65 such fields, ~5 ms of its CPU. A function's signature is read from its code object.
"""

from __future__ import annotations

from typing import Any


def empty_list() -> list[Any]:
    return []
