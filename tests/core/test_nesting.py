"""Nesting depth is checked before a parser recurses: exactly the limit passes, one more level
is refused, brackets inside strings and a shallow document cost nothing, and YAML's block,
compact and flow nesting all count."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from eval_pipeline.core.fileio import BadFile
from eval_pipeline.core.inputs import file_reader
from eval_pipeline.core.inputs.file_reader import (
    MAX_NESTING_DEPTH,
    check_json_depth,
    check_yaml_depth,
    parse_input_text,
)

LIMIT = MAX_NESTING_DEPTH


def _json(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "yaml_text",
    [
        lambda d: "[" * d + "]" * d,  # flow
        lambda d: "- " * d + "x\n",  # compact block sequences
        lambda d: "".join(" " * i + f"k{i}:\n" for i in range(d - 1)) + " " * (d - 1) + "k: v\n",  # block
        lambda d: "{a: " * d + "1" + "}" * d,  # flow mappings
    ],
    ids=["flow", "compact", "block", "flow-mapping"],
)
def test_yaml_at_the_limit_passes_and_one_level_more_is_refused(yaml_text: Callable[[int], str]) -> None:
    check_yaml_depth(yaml_text(LIMIT))
    with pytest.raises(BadFile, match=f"nested more than {LIMIT} levels deep"):
        check_yaml_depth(yaml_text(LIMIT + 1))


def test_json_at_the_limit_passes_and_one_level_more_is_refused() -> None:
    check_json_depth(_json(LIMIT))
    with pytest.raises(BadFile, match=f"nested more than {LIMIT} levels deep"):
        check_json_depth(_json(LIMIT + 1))


def test_brackets_inside_json_strings_do_not_count() -> None:
    opened = '"' + "[" * 1000 + '"'
    escaped = '"\\"' + "{" * 1000 + '"'
    check_json_depth(f'{{"a": {opened}, "b": {escaped}, "c": [[1]]}}')
    # ...nor do closing ones hide real nesting behind them.
    with pytest.raises(BadFile):
        check_json_depth('["' + "]" * 1000 + '", ' + _json(LIMIT + 1) + "]")


def test_a_deep_document_fails_as_a_bad_file_before_any_parser_runs() -> None:
    for text, suffix in (
        (_json(100_000), ".json"),
        ("- " * 100_000 + "x\n", ".yaml"),
        (_json(100_000), ".yaml"),
    ):
        with pytest.raises(BadFile, match="nested more than 100 levels deep; at most 100 are allowed"):
            parse_input_text(text, suffix)


def test_a_yaml_syntax_error_is_left_to_the_parser_to_report_with_its_line() -> None:
    check_yaml_depth("a: [" + "- " * 200 + "\n")  # no verdict on depth
    with pytest.raises(BadFile) as caught:
        parse_input_text("a: [" + "- " * 200 + "\n", ".yaml")
    assert caught.value.line is not None and "invalid YAML" in caught.value.message


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


@pytest.mark.parametrize("chunk", [3, 7, 1 << 20])
def test_json_depth_counts_only_structure_across_chunks_and_escapes(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_reader, "_CHUNK", chunk)  # strings and escapes straddle the chunks
    tricky = ['a"b', "[[", "]]}", "\\", '\\\\"', "x\\\\", "ü[", '{"]']
    docs = [
        {k: [[v, {"k": [v]}]] for k, v in zip(("a", "[", '"', "\\"), tricky, strict=False)},
        [[[{"[": '\\"]]]'}]], "}", [[[["\\\\"]]]]],
        [{"q": '"' * 5 + "[" * 5}, [[[[[[[[["\\"]]]]]]]]]],
    ]
    for doc in docs:
        for ascii_only in (True, False):
            text = json.dumps(doc, ensure_ascii=ascii_only)
            assert file_reader._json_depth(text) == _depth(doc), text
