"""The ``tflkit`` command: a Typer app (:mod:`tflkit.cli.app`), one module per command; errors
become one line.

Exit codes: 0 ok, 1 a finding (e.g. not GPU-ready), 2 usage or input error, 3 internal error,
4 a device could not be reached, dropped the connection or did not finish in time
(``tflkit device``); 128 + N when signal N stopped it (130 for Ctrl-C).

``--debug`` and ``--verbose`` are parsed by the app's callback, which stores them on the
``GlobalOptions`` the run was given: :func:`main`'s error handler reads them. The command a line
names is found before Typer is imported, and a ``check`` starts hashing its model then
(:func:`tflkit.fsio.hash_early`: on a large model the hash is the check's longer path).
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from tflkit.cli.commands import named_command
from tflkit.errors import TflkitError
from tflkit.proc.interrupts import exit_code, exit_on_signals, interrupted_by, run_process

EXIT_OK = 0
EXIT_FINDING = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_DEVICE = 4  # tflkit.harness.transport.DeviceError


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
    named = named_command(args)
    if named == "check":  # before Typer loads: on a large model the hash is the longer path
        from tflkit.bundle.magic import is_bundle
        from tflkit.fsio import hash_early

        hash_early(args[args.index(named) + 1 :], skip=is_bundle)  # a bundle: its sections
    from tflkit.cli.app import GlobalOptions, build_app

    options = GlobalOptions()  # filled by the callback once the line is parsed
    try:
        build_app(named)(args=args, prog_name="tflkit", obj=options)
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
