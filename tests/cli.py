"""Running the installed ``tflkit`` command as a user does, from tests."""

from __future__ import annotations

import os
import signal
import subprocess

from tests.conftest_corpus import REPO


def run_tflkit(
    *args: str | os.PathLike[str],
    timeout: float = 600,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """``tflkit ARGS`` from the project's virtualenv; output captured, never raising on the
    exit code (``XDG_RUNTIME_DIR`` set, which the GPU accelerator needs; ``env`` added to the
    environment)."""
    return subprocess.run(
        [str(REPO / ".venv/bin/tflkit"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env=dict(
            os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"), **(env or {})
        ),
    )


def default_sigint() -> None:
    """``preexec_fn`` for a child a test sends Ctrl-C: SIGINT as at a terminal. A shell starts
    background jobs with SIGINT ignored (a CI run started with ``&`` is one), and tflkit, like
    Python, keeps a signal that was ignored when it started ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
