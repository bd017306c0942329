"""The `eval-pipeline` command.

Exit codes are a contract: 0 ran and gates met, 1 a gate failed, 2 bad input or configuration,
3 could not evaluate or an internal error (one line; `--debug` shows the traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from eval_pipeline.cli.console import command_console
from eval_pipeline.cli.gc_pause import cyclic_gc_paused, hold_long_lived
from eval_pipeline.core.errors import EXIT_ERROR, EXIT_INPUT, EvalPipelineError

# Each command's module, in `--help`'s order, and the commands it adds (`add_commands`) and runs
# (`cmd_<command>`). Heavy imports (dagster, onnxruntime) stay inside the commands that need them.
_COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("run", ("run",)),
    ("backfill", ("backfill",)),
    ("show", ("show",)),
    ("models", ("models",)),
    ("diff", ("diff",)),
    ("calibrate", ("calibrate",)),
    ("override", ("override",)),
    ("agreement", ("agreement",)),
    ("validate", ("validate", "schemas")),
    ("init", ("init",)),
    ("report", ("report",)),
    ("import_beir", ("import-beir",)),
    ("export_trec", ("export-trec",)),
)


class _Parser(argparse.ArgumentParser):
    """A usage error is one line and where to read more, not argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        self.fail(self.prog, message)

    def fail(self, prog: str, message: str) -> NoReturn:
        self.exit(EXIT_INPUT, f"{prog}: {message}; see `{prog} --help`\n")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        # An option the command does not know is reported by the whole parser: name the command's help.
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, "command", None)
            prog = f"{self.prog} {command}" if command else self.prog
            self.fail(prog, f"unrecognized arguments: {' '.join(extras)}")
        return parsed


class _Unsaid(Exception):
    """A parse error of a parser that holds one command: the whole parser says it (below)."""


class _OneCommandParser(_Parser):
    def fail(self, prog: str, message: str) -> NoReturn:
        raise _Unsaid(message)


class _Version(argparse.Action):
    """`--version`, looked up only when asked: importlib.metadata loads the email package."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the installed release and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> NoReturn:
        from importlib.metadata import version

        print(f"eval-pipeline {version('eval-pipeline')}")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `command`, one that knows that command only, imports no other
    command's module and raises `_Unsaid` where the whole parser would print an error."""
    parser = (_Parser if command is None else _OneCommandParser)(
        prog="eval-pipeline", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    for module, names in _COMMANDS:
        if command is None or command in names:
            commands = importlib.import_module(f"eval_pipeline.cli.{module}")
            commands.add_commands(sub)
            for name in names:
                sub.choices[name].set_defaults(func=getattr(commands, f"cmd_{name.replace('-', '_')}"))
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    """`argv` parsed as the whole parser parses it: a command named first (after any --debug) by its
    own parser, importing no other command's module; any error by the whole parser, as ever."""
    named = argv[1:2] if argv[:1] == ["--debug"] else argv[:1]
    if named and any(named[0] in names for _, names in _COMMANDS):
        with contextlib.suppress(_Unsaid):
            return build_parser(named[0]).parse_args(argv)
    return build_parser().parse_args(argv)


def _run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    # Here, not at the top: `--help` and parsing import no pydantic model.
    with cyclic_gc_paused():  # the models it builds live to the end
        from eval_pipeline.core.control_chars import one_line
        from eval_pipeline.core.inputs.loading import InputError

    try:
        if getattr(args, "reads_project", False):
            from eval_pipeline.cli.flags import require_project

            require_project(args)
        return func(args)
    except InputError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"{len(exc.problems)} problem(s) found", file=sys.stderr)
        return exc.exit_code
    except EvalPipelineError as exc:  # every deliberate error: its class says the exit code
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:  # the machine's limits: one line naming the path and the limit
        from eval_pipeline.cli.flags import name_too_long
        from eval_pipeline.core.system_limits import exhausted

        said = exhausted(exc) or name_too_long(exc)
        if said is None:
            return _internal_error(exc, args.debug)
        print(f"error: {one_line(str(said))}", file=sys.stderr)
        return said.exit_code
    except Exception as exc:
        return _internal_error(exc, args.debug)


def _internal_error(exc: BaseException, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    first = (str(exc).strip().splitlines() or [""])[0]
    hint = "" if debug else "; rerun with --debug for the traceback"
    print(f"internal error: {type(exc).__name__}: {first}{hint}", file=sys.stderr)
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    with command_console():  # usage errors quote the arguments: inert from the start
        with cyclic_gc_paused():  # every command's module and the parser live to the end
            args = parse_args(sys.argv[1:] if argv is None else list(argv))
        func: Callable[[argparse.Namespace], int] = args.func
        return _run(func, args)


def console() -> int:
    """The `eval-pipeline` process: `main` with what it builds held frozen (`hold_long_lived`), then
    output flushed and every object frozen, so Python's exit skips a last collection over all of it
    (a warm `run --test`'s start-up bound, docs/performance.md). Not in `main`, which goes on."""
    hold_long_lived()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()
    return code
