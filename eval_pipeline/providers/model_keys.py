"""What a model key may be: it names a folder of results (`<results>/<model>/<date>/`), so one
file-system name, never a path. Light on purpose: the command line checks `--model` with it
while parsing."""

from __future__ import annotations

import re

MODEL_KEY_PATTERN = r"^[a-z0-9][a-z0-9_.-]*$"
MODEL_KEY_MAX = 64


def model_key_problem(text: str) -> str | None:
    """Why `text` cannot be a model key, or None."""
    if len(text) > MODEL_KEY_MAX:
        return f"a model key has at most {MODEL_KEY_MAX} characters (got {len(text):,})"
    if not re.fullmatch(MODEL_KEY_PATTERN, text):
        return "a model key is lowercase letters, digits, '_', '.' and '-', starting with a letter or digit"
    return None
