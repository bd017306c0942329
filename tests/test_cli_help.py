"""Every command explains itself: each option and positional argument has help, each subcommand a
help line (in `eval-pipeline -h`) and a description (in `eval-pipeline CMD -h`). The parser is
walked, not listed, so commands added later are checked too."""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Iterator

from eval_pipeline.cli import build_parser, parse_args


def _parsers(
    parser: argparse.ArgumentParser, path: str | None = None
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    path = path or parser.prog
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, f"{path} {name}")


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str | None, str | None]]:
    """(path, help line, description) of every subcommand, nested ones included."""
    for path, p in _parsers(parser):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                for name, child in action.choices.items():
                    yield f"{path} {name}", helps.get(name), child.description


def undocumented(parser: argparse.ArgumentParser) -> list[str]:
    missing = []
    for path, p in _parsers(parser):
        for action in p._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
                name = "/".join(action.option_strings) or action.dest
                missing.append(f"{path}: {name} has no help")
    for path, help_line, description in _subcommands(parser):
        if not (help_line or "").strip():
            missing.append(f"{path}: no help line")
        if not (description or "").strip():
            missing.append(f"{path}: no description")
    return missing


def test_every_option_argument_and_subcommand_is_described() -> None:
    assert undocumented(build_parser()) == []


def test_every_help_page_renders() -> None:
    # argparse formats help lazily: a stray % or a bad default only fails when someone asks.
    for path, parser in _parsers(build_parser()):
        assert parser.format_help().startswith(f"usage: {path}"), path


def test_the_walk_finds_what_is_undocumented() -> None:
    # The check itself can fail: a parser with one of each gap is reported, gap by gap.
    parser = argparse.ArgumentParser(prog="demo", description="d")
    parser.add_argument("--bare")
    sub = parser.add_subparsers(dest="command")
    child = sub.add_parser("quiet")
    child.add_argument("thing")
    sub.add_parser("told", help="a line", description="a description").add_argument("--x", help="x")
    assert undocumented(parser) == [
        "demo: --bare has no help",
        "demo quiet: thing has no help",
        "demo quiet: no help line",
        "demo quiet: no description",
    ]


def test_the_real_parser_has_subcommands_to_walk() -> None:
    commands = {path for path, _, _ in _subcommands(build_parser())}
    assert {"eval-pipeline run", "eval-pipeline show", "eval-pipeline diff"} <= commands


def _said(argv: list[str]) -> tuple[object, str, str]:
    """What parsing `argv` gives: the namespace or the exit code, and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            outcome: object = vars(parse_args(argv))
        except SystemExit as exc:
            outcome = exc.code
    return outcome, out.getvalue(), err.getvalue()


def test_a_command_is_parsed_by_its_own_parser_as_the_whole_parser_parses_it() -> None:
    whole = build_parser()
    sub = next(a for a in whole._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        own = next(a for a in build_parser(name)._actions if isinstance(a, argparse._SubParsersAction))
        assert name in own.choices and len(own.choices) < len(sub.choices), name
        assert own.choices[name].format_help() == parser.format_help(), name
    # Its errors are the whole parser's: one line and the `--help` to read.
    for argv in (
        ["run", "--bogus"],
        ["--debug", "run", "--fail-under"],
        ["run", "extra"],
        ["validate", "-h"],
    ):
        outcome, out, err = _said(argv)
        assert outcome in (0, 2), argv
        full = io.StringIO(), io.StringIO()
        with (
            contextlib.redirect_stdout(full[0]),
            contextlib.redirect_stderr(full[1]),
            contextlib.suppress(SystemExit),
        ):
            whole.parse_args(argv)
        assert (out, err) == (full[0].getvalue(), full[1].getvalue()), argv
    assert _said(["run", "--bogus"])[2] == (
        "eval-pipeline run: unrecognized arguments: --bogus; see `eval-pipeline run --help`\n"
    )
    parsed, _, _ = _said(["--debug", "run", "--test", "T-1", "--model", "m"])
    assert isinstance(parsed, dict) and (parsed["debug"], parsed["tests"], parsed["model"]) == (
        True,
        ["T-1"],
        ["m"],
    )


def test_the_agreement_parsers_defaults_are_the_cores() -> None:
    # The parser states them without importing numpy and the review models to read them.
    from eval_pipeline.core.calibration import agreement

    agreement_args = parse_args(["agreement"])
    assert (agreement_args.seed, agreement_args.resamples, agreement_args.min_topic_tests) == (
        agreement.DEFAULT_SEED,
        agreement.DEFAULT_RESAMPLES,
        agreement.MIN_TOPIC_TESTS,
    )
