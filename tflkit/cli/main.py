"""The ``tflkit`` command: a Typer app, one module per command; errors become one line.

Exit codes: 0 ok, 1 a finding (e.g. not GPU-ready), 2 usage or input error, 3 internal error.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence

import typer

from tflkit.cli import (
    check_cmd,
    convert_cmd,
    converters_cmd,
    device_cmd,
    inspect_cmd,
    regress_cmd,
    rewrite_cmd,
    validate_cmd,
)
from tflkit.errors import TflkitError
from tflkit.proc.interrupts import exit_code, exit_on_signals, interrupted_by

EXIT_OK = 0
EXIT_FINDING = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3

app = typer.Typer(
    name="tflkit",
    help="Take a model to the TFLite / LiteRT GPU delegate and prove it works there.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("inspect")(inspect_cmd.inspect)
app.command("check")(check_cmd.check)
app.command("convert")(convert_cmd.convert)
app.command("validate")(validate_cmd.validate)
app.command("rewrite")(rewrite_cmd.rewrite)
app.add_typer(converters_cmd.app, name="converters")
app.add_typer(device_cmd.app, name="device")
app.add_typer(regress_cmd.app, name="regress")


@app.callback()
def _global_options(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    verbose: bool = typer.Option(
        False, "--verbose", help="Show the native runtime's log lines (anywhere on the line)."
    ),
) -> None:
    """Global options (parsed before the command)."""


def _error(message: str) -> None:
    print(f"tflkit: error: {message}", file=sys.stderr)


@exit_on_signals  # SIGTERM/SIGHUP unwind like Ctrl-C: no temp file, no worker left behind
def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code instead of raising.

    Usage errors are Typer's own (exit 2); ``TflkitError`` becomes one line with its exit code;
    anything else is an internal error (exit 3). ``--debug`` shows the traceback.
    """
    from tflkit.cli.output import native_log

    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    verbose = "--verbose" in args  # accepted after the command too: taken out here
    args = [a for a in args if a != "--verbose"]
    try:
        with native_log(verbose):
            app(args=args, prog_name="tflkit")
    except SystemExit as exc:
        interrupt = interrupted_by(exc)  # Typer turns Ctrl-C/SIGTERM into a bare Exit(130)
        if interrupt is not None:
            _error(f"interrupted ({interrupt})" if str(interrupt) else "interrupted")
            return exit_code(interrupt)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)
    except TflkitError as exc:
        if debug:
            traceback.print_exc()
        _error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP through exit_on_signals
        _error(f"interrupted ({exc})" if str(exc) else "interrupted")
        return exit_code(exc)
    except MemoryError:  # a model or input too large for this machine: no traceback
        _error("out of memory: the model or its inputs are too large for this machine")
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:
        if debug:
            traceback.print_exc()
        _error(f"internal error: {type(exc).__name__}: {exc} (run with --debug for details)")
        return EXIT_INTERNAL
    return EXIT_OK


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
