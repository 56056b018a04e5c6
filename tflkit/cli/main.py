"""The ``tflkit`` command: a Typer app, one module per command; errors become one line.

Exit codes: 0 ok, 1 a finding (e.g. not GPU-ready), 2 usage or input error, 3 internal error,
4 a device could not be reached, dropped the connection or did not finish in time
(``tflkit device``); 128 + N when signal N stopped it (130 for Ctrl-C).

``--debug`` and ``--verbose`` are parsed by the app's callback, the one place that reads them: it
stores them on the :class:`GlobalOptions` the run was given (``ctx.obj``), which :func:`main`'s
error handler reads, and runs the command inside ``native_log(verbose)``.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from tflkit.cli.output import native_log
from tflkit.errors import TflkitError
from tflkit.proc.interrupts import exit_code, exit_on_signals, interrupted_by, run_process

EXIT_OK = 0
EXIT_FINDING = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_DEVICE = 4  # tflkit.harness.transport.DeviceError


@dataclass
class GlobalOptions:
    """The options given before the command (``ctx.obj`` of a run)."""

    debug: bool = False
    verbose: bool = False


class _TflkitGroup(TyperGroup):
    """The top-level group; ``--verbose`` counts anywhere on the line (moved before the command)."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        rest = [a for a in args if a != "--verbose"]
        if rest and len(rest) < len(args):
            args = ["--verbose", *rest]
        elif not rest:
            args = rest  # `tflkit --verbose` alone shows the help, as `tflkit` does
        return super().parse_args(ctx, args)


def _global_options(
    ctx: typer.Context,
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    verbose: bool = typer.Option(
        False, "--verbose", help="Show the native runtime's log lines (anywhere on the line)."
    ),
) -> None:
    """Global options (parsed before the command): kept on ``ctx.obj``; the command runs inside
    ``native_log(verbose)`` (closed with the context, before :func:`main` reports an error)."""
    options = ctx.ensure_object(GlobalOptions)
    options.debug, options.verbose = debug, verbose
    ctx.with_resource(native_log(verbose))


#: The commands, by name: the module that defines each and its function. A command line imports
#: only the command it names (:func:`build_app`): ``tflkit check`` loads neither the runner
#: registry nor the other commands' modules (``check --json`` of a 3-op model: 1.41x the
#: ``import typer, rich`` anchor, 1.68x when every command was imported; ``bench/cli_startup.py``).
COMMANDS = {
    "inspect": ("tflkit.cli.inspect_cmd", "inspect"),
    "check": ("tflkit.cli.check_cmd", "check"),
    "convert": ("tflkit.cli.convert_cmd", "convert"),
    "validate": ("tflkit.cli.validate_cmd", "validate"),
    "rewrite": ("tflkit.cli.rewrite_cmd", "rewrite"),
    "rules": ("tflkit.cli.rules_cmd", "rules"),
    "doctor": ("tflkit.cli.doctor_cmd", "doctor"),
}
#: The command groups, by name: the module that defines each and its Typer app.
GROUPS = {
    "converters": ("tflkit.cli.converters_cmd", "app"),
    "device": ("tflkit.cli.device_cmd", "app"),
    "harness": ("tflkit.cli.harness_cmd", "app"),
    "regress": ("tflkit.cli.regress_cmd", "app"),
}


def _load(where: tuple[str, str]) -> Any:
    """The command function or group app at ``(module, name)``."""
    module, name = where
    return getattr(importlib.import_module(module), name)


_GLOBAL_FLAGS = ("--debug", "--verbose")


def build_app(only: str | None = None) -> typer.Typer:
    """The Typer app: every command, or only the command or group named ``only``.

    Typer turns each command's signature into a click command on every start (15 ms for all
    of them here), so :func:`main` imports and builds only the one the line names (its help and
    errors are the same); a line naming none (``tflkit``, ``--help``, a mistyped name) gets every
    command.
    """
    app = typer.Typer(
        name="tflkit",
        cls=_TflkitGroup,
        help="Take a model to the TFLite / LiteRT GPU delegate and prove it works there.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name, where in COMMANDS.items():
        if only in (None, name):
            app.command(name)(_load(where))
    for name, where in GROUPS.items():
        if only in (None, name):
            app.add_typer(_load(where), name=name)
    app.callback()(_global_options)
    return app


def _named_command(args: Sequence[str]) -> str | None:
    """The command or group a command line names (after the global flags), if it is one."""
    for arg in args:
        if arg not in _GLOBAL_FLAGS:
            return arg if arg in COMMANDS or arg in GROUPS else None
    return None


def _error(message: str) -> None:
    print(f"tflkit: error: {message}", file=sys.stderr)


def _interrupted(exc: KeyboardInterrupt) -> int:
    """Say a signal stopped tflkit; its exit code, 128 + signal (130 for Ctrl-C, 143 SIGTERM)."""
    _error(f"interrupted ({exc})" if str(exc) else "interrupted")
    return exit_code(exc)


@exit_on_signals  # SIGTERM/SIGHUP unwind like Ctrl-C: no temp file, no worker left behind
def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code instead of raising.

    Usage errors are Typer's own (exit 2); ``TflkitError`` becomes one line with its exit code;
    anything else is an internal error (exit 3). ``--debug`` shows the traceback.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    options = GlobalOptions()  # filled by the callback once the line is parsed
    try:
        build_app(_named_command(args))(args=args, prog_name="tflkit", obj=options)
    except SystemExit as exc:
        interrupt = interrupted_by(exc)  # Typer turns Ctrl-C/SIGTERM into a bare Exit(130)
        if interrupt is not None:
            return _interrupted(interrupt)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)
    except TflkitError as exc:
        if options.debug:
            traceback.print_exc()
        log = getattr(exc, "log", "")  # a converter's own output (kept off the one line)
        if log and (options.verbose or options.debug):
            sys.stderr.write(log.rstrip("\n") + "\n")
        _error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP through exit_on_signals
        return _interrupted(exc)
    except MemoryError:  # a model or input too large for this machine: no traceback
        _error("out of memory: the model or its inputs are too large for this machine")
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:
        if options.debug:
            traceback.print_exc()
        _error(f"internal error: {type(exc).__name__}: {exc} (run with --debug for details)")
        return EXIT_INTERNAL
    return EXIT_OK


def run() -> NoReturn:
    """Console-script entry point: the whole process runs under ``run_process``.

    Its signal handlers stay until the process has ended, so a signal after the command
    returned (the output already renamed into place, the process on its way out) still exits
    128 + signal with the "interrupted" line, and the process never dies by the signal.
    """
    run_process(main, _interrupted)


if __name__ == "__main__":
    run()
