"""How deep a JSON or YAML document nests, checked before a parser builds it.

libyaml's composer recurses in C for each level (a document 30,000 levels deep overflows the
stack: the process dies with no message), its scanner slows quadratically with nested flow
collections, and Python's `json` raises RecursionError past ~1,000. No input this tool reads
nests anywhere near MAX_NESTING_DEPTH, so a deeper document is refused with one line before any
of them runs.

Each check starts with a count that bounds the depth from above (a level needs an opening
bracket, or in YAML a `-`, `?` or `:`), so a typical file costs one pass of `str.count` per
character class and nothing more.
"""

from __future__ import annotations

import re
from itertools import accumulate

import yaml

from eval_pipeline.core.fileio import BadFile

MAX_NESTING_DEPTH = 100

_YAML_OPENERS = "[{-?:"
_JSON_STRING = re.compile(r'"(?:[^"\\]+|\\.)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_OPEN_EVENTS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE_EVENTS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
# The event parser of libyaml (iterative, unlike its composer) when PyYAML wheels ship it.
_EventLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def too_deep(limit: int = MAX_NESTING_DEPTH) -> BadFile:
    return BadFile(f"nested more than {limit} levels deep; at most {limit} are allowed")


def check_json_depth(text: str, limit: int = MAX_NESTING_DEPTH) -> None:
    """BadFile if JSON `text` nests deeper than `limit` (brackets inside strings do not count)."""
    if text.count("[") + text.count("{") <= limit:
        return
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    if max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit:
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
