"""How deep a JSON or YAML document nests, checked before a parser builds it.

libyaml's composer recurses in C per level (30,000 levels overflow the stack: the process dies
with no message), its scanner slows quadratically with nested flow collections, and Python's
`json` raises RecursionError past ~1,000. No input nests anywhere near MAX_NESTING_DEPTH, so a
deeper one is refused with one line first. Each check starts with a count bounding the depth from
above (a level needs a bracket, or in YAML a `-`, `?` or `:`): a typical file costs one `str.count`
per character class.
"""

from __future__ import annotations

import numpy as np
import yaml

from eval_pipeline.core.fileio import BadFile

MAX_NESTING_DEPTH = 100

_YAML_OPENERS = "[{-?:"
# +1 for an opening bracket, -1 for a closing one, by byte value.
_STEP = np.zeros(256, dtype=np.int8)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1
_QUOTE = ord('"')
_TOKEN = np.zeros(256, dtype=np.bool_)  # what the count looks at: brackets and quotes
_TOKEN[list(b'[]{}"')] = True
_CHUNK = 1 << 20  # bytes scanned at once: ~20 MB of arrays however large the file
_OPEN_EVENTS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE_EVENTS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
# The event parser of libyaml (iterative, unlike its composer) when PyYAML wheels ship it.
_EventLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def too_deep(limit: int = MAX_NESTING_DEPTH) -> BadFile:
    return BadFile(f"nested more than {limit} levels deep; at most {limit} are allowed")


def _json_depth(text: str) -> int:
    """How deep JSON `text` nests: its brackets outside strings, counted with numpy in a small
    fraction of what parsing the text costs."""
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        # Escapes pair up from the left: an escaped backslash, then an escaped quote, become two
        # inert bytes each, and every quote left opens or closes a string.
        data = data.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    codes = np.frombuffer(data, dtype=np.uint8)
    depth = deepest = 0
    inside = 0  # 1 while a string is open at the end of the chunks seen
    for start in range(0, codes.size, _CHUNK):
        chunk = codes[start : start + _CHUNK]
        tokens = chunk[_TOKEN[chunk]]
        if not tokens.size:
            continue
        quotes = np.cumsum(tokens == _QUOTE, dtype=np.int32) + inside
        steps = np.where(quotes & 1, 0, _STEP[tokens])
        running = np.cumsum(steps, dtype=np.int32) + depth
        deepest = max(deepest, int(running.max()))
        depth, inside = int(running[-1]), int(quotes[-1] & 1)
    return deepest


def check_json_depth(text: str, limit: int = MAX_NESTING_DEPTH) -> None:
    """BadFile if JSON `text` nests deeper than `limit` (brackets inside strings do not count)."""
    if text.count("[") + text.count("{") <= limit:
        return
    if _json_depth(text) > limit:
        raise too_deep(limit)


def check_yaml_depth(text: str, limit: int = MAX_NESTING_DEPTH) -> None:
    """BadFile if YAML `text` nests deeper than `limit`, read as events (no tree is built); the
    read stops at the first level too many, so a hostile document costs no more than its start.
    A syntax error is left for the parser that follows to report with its line."""
    if sum(text.count(c) for c in _YAML_OPENERS) <= limit:
        return
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_EventLoader):
            if isinstance(event, _OPEN_EVENTS):
                depth += 1
                if depth > limit:
                    raise too_deep(limit)
            elif isinstance(event, _CLOSE_EVENTS):
                depth -= 1
    except yaml.YAMLError:
        return
