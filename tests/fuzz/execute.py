"""Run one ``tflkit`` command on a mutant in a child process and classify what happened.

Two ways to start the child:

* ``fork`` (default): the runner imports ``tflkit.cli.main`` once and forks a child per command,
  which calls ``main(argv)`` exactly as the ``tflkit`` script does and exits with its code. The
  child is a real process (its own session, stdout/stderr to files, a memory limit), so a native
  crash, an abort or a hang is seen as such; it skips only the interpreter start-up (~0.5 s).
* ``spawn``: a fresh ``python -m tflkit`` per command, slower, for a final cross-check.

Outcomes: ``ok`` (exit 0, or 1 with a finding), ``rejected`` (exit 2 with exactly one
``tflkit: error:`` line), ``unexplained`` (a non-zero exit without that one line), ``internal``
(exit 3), ``traceback`` (a Python traceback was printed), ``crash`` (killed by a signal) and
``hang`` (killed after the timeout).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BAD = ("unexplained", "internal", "traceback", "crash", "hang")
#: Address-space cap of every child: a mutant that makes native code allocate without bound
#: fails there instead of pushing the machine into swap or the OOM killer.
MEMORY_LIMIT = 4 << 30
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Outcome:
    command: str
    kind: str
    code: int | None
    seconds: float
    message: str  # the error line, the signal, the last lines of output, or an ok run's report

    @property
    def bad(self) -> bool:
        return self.kind in BAD


def preload() -> None:
    """Import what every command imports, once, before forking (fork mode)."""
    import ai_edge_litert.interpreter  # noqa: F401
    import rich.console  # noqa: F401

    import tflkit.cli.main
    import tflkit.compat.check
    import tflkit.inspection
    import tflkit.rewriter.run
    import tflkit.validation.pipeline  # noqa: F401
    from tflkit.cli.main import main

    # The first main() in a process costs ~0.15 s of lazy set-up (Typer, Click, Rich): pay it
    # once here, on a path that fails before any native code could start a thread.
    missing = str(Path(tempfile.gettempdir()) / "tflkit-fuzz-no-such-model.tflite")
    with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
        for argv in (
            ["inspect", missing],
            ["check", missing],
            ["validate", missing],
            ["rewrite", missing, "-o", missing + ".out"],
        ):
            main(argv)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _child(argv: list[str], out: int, err: int) -> None:
    """In the forked child: become a session leader, redirect, run the CLI, exit."""
    try:
        os.setsid()
        _limit_memory()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        # Python-level streams onto the new fds (under pytest they are capture objects).
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        from tflkit.cli.main import main

        code = main(argv)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # the fuzz must see it: print like the interpreter would
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        code = 120
    os._exit(code if isinstance(code, int) else 1)


def _wait(pid: int, timeout: float) -> tuple[int | None, bool]:
    """(returncode like subprocess's, timed_out)."""
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status), True
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def run_command(argv: list[str], *, timeout: float, mode: str = "fork") -> Outcome:
    """Run ``tflkit ARGV`` in a child; classify the result."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        if mode == "fork":
            pid = os.fork()
            if pid == 0:
                _child(argv, out.fileno(), err.fileno())
            code, timed_out = _wait(pid, timeout)
        else:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tflkit", *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=REPO,
                start_new_session=True,
                preexec_fn=_limit_memory,
            )
            try:
                code, timed_out = proc.wait(timeout=timeout), False
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code, timed_out = proc.wait(), True
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
        out.seek(0)
        stdout = out.read().decode("utf-8", "replace")
    return classify(argv[0], code, timed_out, stdout, stderr, time.perf_counter() - start)


def classify(
    command: str, code: int | None, timed_out: bool, stdout: str, stderr: str, seconds: float
) -> Outcome:
    errors = [line for line in stderr.splitlines() if line.startswith("tflkit: error: ")]
    tail = " | ".join((stderr or stdout).strip().splitlines()[-3:])
    if timed_out:
        return Outcome(command, "hang", None, seconds, "killed after the timeout")
    if code is not None and code < 0:
        return Outcome(command, "crash", code, seconds, f"killed by signal {-code}: {tail}")
    if "Traceback (most recent call last)" in stderr + stdout:
        return Outcome(command, "traceback", code, seconds, tail)
    if code == 3:
        return Outcome(command, "internal", code, seconds, errors[0] if errors else tail)
    if code in (0, 1) and not (code == 1 and command in ("inspect",)):
        report = " ".join(stdout.split())[:2000]  # the report, unwrapped (rich wraps lines)
        return Outcome(command, "ok", code, seconds, errors[0] if errors else report)
    if code == 2 and len(errors) == 1:
        return Outcome(command, "rejected", code, seconds, errors[0])
    return Outcome(command, "unexplained", code, seconds, tail)
