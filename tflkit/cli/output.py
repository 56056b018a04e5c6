"""Writing reports to stdout (JSON or rich text) and progress to stderr."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from tflkit.jsonable import dumps

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console


def console() -> Console:
    """A console for reports; 120 columns when stdout is not a terminal (pipes, CI logs).

    rich is imported here, not with the module: ``--json`` output never loads it."""
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 120)


def print_json(payload: Any) -> None:
    """The document as JSON (:func:`tflkit.jsonable.dumps`) in one write (``json.dump`` writes
    each token: 100k+ calls): indented on a terminal, one line into a pipe or a file (the
    standard library's C encoder only writes compact JSON: 5x faster on a 2,400-op report)."""
    sys.stdout.write(dumps(payload, indent=2 if sys.stdout.isatty() else None) + "\n")


#: A step shows a spinner only when it takes longer than this.
SPINNER_DELAY_S = 1.0


@contextmanager
def spinner(message: str, delay: float = SPINNER_DELAY_S) -> Iterator[None]:
    """A spinner on stderr saying what runs, once it has run for ``delay`` seconds; nothing
    when stderr is not a terminal (pipes, CI logs)."""
    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    status = Console(stderr=True, highlight=False).status(message)
    lock = threading.Lock()
    started = False

    def start() -> None:
        nonlocal started
        with lock:
            if not done.is_set():
                status.start()
                started = True

    done = threading.Event()
    timer = threading.Timer(delay, start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            done.set()
            timer.cancel()
            if started:
                status.stop()


_VERBOSE: ContextVar[bool] = ContextVar("tflkit_verbose", default=False)


def echo_native_log(text: str) -> None:
    """With ``--verbose``: a child process's native log (the GPU probe's) on stderr."""
    if _VERBOSE.get() and text.strip():
        sys.stderr.write(text if text.endswith("\n") else text + "\n")


@contextmanager
def native_log(verbose: bool = False) -> Iterator[None]:
    """Keep what native libraries (LiteRT, XNNPACK, TensorFlow) write on file descriptor 2 off
    the terminal, unless ``verbose``; tflkit's own stderr (errors, spinners) still gets there.

    fd 2 points at a scratch file for the duration; when ``sys.stderr`` is the process's real
    stderr it is rebound to a copy of the original descriptor (a replaced ``sys.stderr``, e.g.
    under pytest's capture, is left alone). Child processes inherit the scratch file, but the
    tflkit worker runner captures their output anyway; with ``verbose`` a command shows a
    child's log with :func:`echo_native_log`.
    """
    token = _VERBOSE.set(verbose)
    try:
        if verbose:
            yield
        else:
            with _quiet_fd2():
                yield
    finally:
        _VERBOSE.reset(token)


@contextmanager
def _quiet_fd2() -> Iterator[None]:
    try:
        real = sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):
        real = False
    sys.stderr.flush()
    saved = os.dup(2)
    python_stderr = sys.stderr
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        if real:
            sys.stderr = open(  # noqa: SIM115 - closed below, after fd 2 is restored
                os.dup(saved), "w", buffering=1, encoding=python_stderr.encoding,
                errors="backslashreplace",
            )  # fmt: skip
        try:
            yield
        finally:
            if real:
                sys.stderr.flush()
                sys.stderr.close()
                sys.stderr = python_stderr
            os.dup2(saved, 2)
            os.close(saved)


def show_report(
    report: Any,
    render: Callable[[Any, Console], None],
    *,
    html: Path | None,
    json_output: bool,
) -> None:
    """The end of a reporting command: the HTML page if asked, then JSON or ``render`` on the
    terminal."""
    if html is not None:
        from tflkit.report.html import write_html

        write_html(report, html)
    if json_output:
        print_json(report)
    else:
        render(report, console())


def write_junit(report: Any, path: Path | None) -> None:
    """``validate --junit FILE``: the report of any subject as JUnit XML."""
    if path is not None:
        from tflkit.report.validate_junit import write_validate_junit

        write_validate_junit(report, path)


def show_validation(report: Any, *, html: Path | None, json_output: bool) -> None:
    """The end of ``validate`` (any subject) and ``device validate``: :func:`show_report` with
    :func:`tflkit.report.validation.render_validation`, then exit with the report's code (1 on
    a finding)."""
    import typer

    from tflkit.report.validation import render_validation

    show_report(report, render_validation, html=html, json_output=json_output)
    if report.exit_code:
        raise typer.Exit(report.exit_code)
