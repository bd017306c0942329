"""Reading one input file (KB, bank, rules, history, models, prices) into plain data, strictly.

Every input file goes through here, so every loader refuses the same things: anything but a
regular file (a FIFO would block the read forever, a device never ends), a file over
MAX_INPUT_BYTES, text that is not UTF-8, nesting deeper than MAX_NESTING_DEPTH, duplicate mapping
keys (JSON or YAML: the last one would silently win), YAML aliases that expand to a huge tree, and
non-finite numbers (NaN, ±Infinity, or 1e400, which parses to infinity) anywhere in the document.

Nesting is checked before a parser builds anything: libyaml's composer recurses in C per level
(30,000 levels overflow the stack: the process dies with no message), its scanner slows
quadratically with nested flow collections, and Python's `json` raises RecursionError past ~1,000.
Each check starts with a count bounding the depth from above (a level needs a bracket, or in YAML
a `-`, `?` or `:`): a typical file costs one `str.count` per character class.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from eval_pipeline.core.fileio import MAX_INPUT_BYTES, BadFile, read_input_text

# Nodes a YAML document may stand for once aliases are expanded: ample for any KB or bank file,
# far too few for an alias bomb.
MAX_YAML_NODES = 1_000_000
MAX_NESTING_DEPTH = 100
# Keys that name the item (test or entity) a value belongs to, and the lists holding items.
_ID_KEYS = ("test_id", "entity_id")
_ITEM_LISTS = ("tests", "entities", "changes")

Loc = tuple[int | str, ...]

# libyaml's parser is much faster than the pure-Python one on a KB of thousands of files (and its
# event parser is iterative, unlike its composer); PyYAML wheels ship it, the fallback keeps a
# source build working.
_SafeBase: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
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
        for event in yaml.parse(text, Loader=_SafeBase):
            if isinstance(event, _OPEN_EVENTS):
                depth += 1
                if depth > limit:
                    raise too_deep(limit)
            elif isinstance(event, _CLOSE_EVENTS):
                depth -= 1
    except yaml.YAMLError:
        return


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BadFile(f"duplicate key '{key}'")
        out[key] = value
    return out


class _StrictYamlLoader(_SafeBase):  # type: ignore[misc]
    """Safe YAML that refuses duplicate keys and notes whether it read a non-finite number."""

    non_finite = False

    def construct_yaml_float(self, node: Any) -> float:
        value: float = super().construct_yaml_float(node)
        if not math.isfinite(value):
            self.non_finite = True
        return value

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                line = key_node.start_mark.line + 1
                raise BadFile(f"duplicate key '{key}'", line)
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


# The float tag maps to the base class's function: point it at the override.
_StrictYamlLoader.add_constructor("tag:yaml.org,2002:float", _StrictYamlLoader.construct_yaml_float)


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many nodes `node` stands for once every alias is expanded (memoised: no expansion)."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    sizes[id(node)] = 1  # a recursive alias counts once rather than looping
    children: list[yaml.Node] = []
    if isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    total = 1 + sum(_expanded_size(child, sizes) for child in children)
    sizes[id(node)] = total
    return total


def _parse_yaml(text: str) -> tuple[Any, bool]:
    loader = _StrictYamlLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, False
        # Aliases make a small file stand for a huge tree (a "billion laughs"): refuse it before
        # anything walks it.
        if _expanded_size(node, {}) > MAX_YAML_NODES:
            raise BadFile(f"invalid YAML: expands to more than {MAX_YAML_NODES:,} nodes through aliases")
        return loader.construct_document(node), loader.non_finite
    finally:
        loader.dispose()


def _parse_json(text: str) -> tuple[Any, bool]:
    non_finite = False

    # NaN, ±Infinity and a literal too large for a float (1e400) each reach one of these hooks.
    def number(literal: str) -> float:
        nonlocal non_finite
        value = float(literal)
        if not math.isfinite(value):
            non_finite = True
        return value

    data = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_float=number, parse_constant=number)
    return data, non_finite


def _first_non_finite(data: Any) -> tuple[Loc, float] | None:
    """The location of the first NaN or infinite number in `data` (iterative: no recursion)."""
    stack: list[tuple[Loc, Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return loc, value
        if isinstance(value, dict):
            stack.extend(((*loc, str(k)), v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(((*loc, i), v) for i, v in reversed(list(enumerate(value))))
    return None


def owner(data: Any, loc: Loc) -> tuple[str, str]:
    """(the innermost test or entity holding `loc`: its id, or for an item of a top-level list
    without one its place such as `tests[3]`; the field path inside it), for error lines."""
    item, start, node = "-", 0, data
    for depth, step in enumerate((*loc, None)):
        found = None
        if isinstance(node, dict):
            found = next((node[k] for k in _ID_KEYS if isinstance(node.get(k), str) and node[k]), None)
            node = node.get(step)
        else:
            node = node[step] if isinstance(node, list) and isinstance(step, int) else None
        if found is None and depth == 2 and loc[0] in _ITEM_LISTS and isinstance(loc[1], int):
            found = f"{loc[0]}[{loc[1]}]"
        if found is not None:
            item, start = found, depth
    return item, ".".join(str(p) for p in loc[start:]) or "-"


def parse_input_text(text: str, suffix: str) -> Any:
    """JSON (`.json`) or YAML text as plain data, or BadFile (with the line where known)."""
    (check_json_depth if suffix == ".json" else check_yaml_depth)(text)
    try:
        data, non_finite = _parse_json(text) if suffix == ".json" else _parse_yaml(text)
    except json.JSONDecodeError as exc:
        raise BadFile(f"invalid JSON: {exc.msg}", exc.lineno) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BadFile(f"invalid YAML: {reason}", mark.line + 1 if mark is not None else None) from None
    except RecursionError:  # nesting through YAML aliases, which the depth check cannot see
        raise too_deep() from None
    # The parser noticed any non-finite number as it read it; only then is the document walked
    # to say where the first one is.
    bad = _first_non_finite(data) if non_finite else None
    if bad is not None:
        item, fld = owner(data, bad[0])
        raise BadFile(f"{bad[1]} is not a finite number (NaN and infinity are refused)", item=item, field=fld)
    return data


def load_input(path: Path, limit: int = MAX_INPUT_BYTES) -> Any:
    """A regular JSON or YAML file (by extension) as plain data, or BadFile naming why not."""
    return parse_input_text(read_input_text(path, limit), path.suffix)
