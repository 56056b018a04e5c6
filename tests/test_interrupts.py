"""Nothing lost: interrupts, crashes and races leave no partial output, temp file or process.

SIGINT and SIGTERM are sent to real ``tflkit`` processes (``rewrite``, ``validate --html``,
``regress record``) at moments the test sees happen, never after a guessed delay:

- *started*: the process catches SIGTERM and SIGHUP (``SigCgt`` in ``/proc/PID/status``), so
  tflkit's handlers are in place, and nothing is done yet;
- *worker*: a worker process tflkit started is running (a child whose command line names it);
- *committed*: the output is in place and the process waits to write its stdout
  (``pipe_write`` in ``/proc/PID/wchan``), a pipe the test filled and reads only after the
  signal (a slow reader). With ``PYTHONUNBUFFERED`` the signal meets the command printing its
  report; without it (``print`` is buffered) the process on its way out, flushing stdout after
  the command returned: where a SIGTERM used to kill it (exit -15) with the baseline in place.

The contract at every moment: exit 128 + signal with one "interrupted" line, no traceback, no
process left (each carries a tag in its environment, found by scanning ``/proc``), no temporary
file; no output when the signal came before the commit, a whole one when it came after.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli import default_sigint
from tflkit import ir
from tflkit.fsio import file_mode, is_temporary, write_atomic
from tflkit.proc import _cpu_smoke_worker
from tflkit.proc.interrupts import Interrupted, exit_on_signals
from tflkit.proc.worker import target_of
from tflkit.regress.baseline import read_baseline

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "tflkit" / "examples" / "tiny_classifier.tflite"
TAG = "TFLKIT_INTERRUPT_TEST_TAG"
SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Command-line marks of two workers: the CPU smoke run each of these commands starts first,
#: and a GPU runner's worker running the model (``--run``): a run of validate or regress record.
SMOKE_WORKER = target_of(_cpu_smoke_worker.main)
RUN_WORKER = "--run"
WAIT_S = 120.0


# --------------------------------------------------------------------------------------------
# moments: recognised from outside the process, with its id and the output it is to write
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Moment:
    name: str
    reached: Callable[[int, Path], bool]
    committed: bool = False  # the output exists; stdout is a full pipe
    unbuffered: bool = True  # PYTHONUNBUFFERED=1 in the process's environment


def _handlers_installed(pid: int, _output: Path) -> bool:
    """Python catches SIGINT from its start-up; SIGTERM and SIGHUP once tflkit's handlers are
    in place (SIGINT's with them), before the command starts."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(ln for ln in status.splitlines() if ln.startswith("SigCgt:")).split()[1], 16)
    return all(caught & (1 << (sig - 1)) for sig in (signal.SIGTERM, signal.SIGHUP))


def _child_running(mark: str) -> Callable[[int, Path], bool]:
    def reached(pid: int, _output: Path) -> bool:
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                try:
                    argv = Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")
                except OSError:
                    continue
                if mark in argv:
                    return True
        return False

    return reached


def _committed_and_blocked(pid: int, output: Path) -> bool:
    """The output is in place and the process waits to write its stdout (the full pipe)."""
    return output.exists() and "pipe_write" in Path(f"/proc/{pid}/wchan").read_text()


def _moments(worker: str, *, exiting: bool) -> list[Moment]:
    """Before anything, while ``worker`` runs, after the commit (and, for a command that prints
    with ``print``, after the commit while the process exits)."""
    found = [
        Moment("started", _handlers_installed),
        Moment(f"worker {worker}", _child_running(worker)),
        Moment("committed, printing", _committed_and_blocked, committed=True),
    ]
    if exiting:
        found.append(Moment("committed, exiting", _committed_and_blocked, True, unbuffered=False))
    return found


def _cases(moments: list[Moment]) -> Iterator[tuple[signal.Signals, int, Moment]]:
    for sig in SIGNALS:
        for number, moment in enumerate(moments):
            yield sig, number, moment


# --------------------------------------------------------------------------------------------
# helpers: a tagged tflkit process interrupted at a moment, survivors, leftovers
# --------------------------------------------------------------------------------------------
def _start(
    args: list[str], tag: str, *, env: dict[str, str] | None = None, stdout: int | None = None
) -> subprocess.Popen[bytes]:
    full = dict(os.environ, **{TAG: tag})
    full.setdefault("XDG_RUNTIME_DIR", "/tmp")
    full.pop("PYTHONUNBUFFERED", None)
    full.update(env or {})
    return subprocess.Popen(
        [sys.executable, "-m", "tflkit", *args],
        cwd=REPO,
        env=full,
        stdout=subprocess.DEVNULL if stdout is None else stdout,
        stderr=subprocess.PIPE,
        preexec_fn=default_sigint,
    )


def _tagged(tag: str) -> list[str]:
    """Command lines of live processes carrying ``tag`` (zombies excluded)."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes():
                continue
            if "\nState:\tZ" in (entry / "status").read_text():
                continue
            found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


def _survivors(tag: str, grace: float = 5.0) -> list[str]:
    deadline = time.monotonic() + grace
    while (alive := _tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def _full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is full: a write to it blocks until the other end is read."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        while True:
            os.write(write_end, b"\0" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(write_end, True)  # the child shares this file description
    return read_end, write_end


def _reached(moment: Moment, pid: int, output: Path) -> bool:
    try:
        return moment.reached(pid, output)
    except (OSError, StopIteration):  # the process is gone, or not yet in /proc
        return False


def _interrupt(
    args: list[str], output: Path, sig: int, moment: Moment
) -> tuple[int, str, list[str]]:
    """Run tflkit, send ``sig`` at ``moment``; (exit code, stderr, survivors).

    A moment that never comes (the process ends first) fails the test."""
    tag = uuid.uuid4().hex
    env = {"PYTHONUNBUFFERED": "1"} if moment.unbuffered else {}
    read_end, write_end = _full_pipe() if moment.committed else (None, None)
    proc = _start(args, tag, env=env, stdout=write_end)
    reader = None
    try:
        if write_end is not None:
            os.close(write_end)
        deadline = time.monotonic() + WAIT_S
        while not _reached(moment, proc.pid, output):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                _, err = proc.communicate()
                pytest.fail(
                    f"{moment.name!r} never came (exit {proc.returncode}): {err.decode()[-2000:]}",
                    pytrace=False,
                )
            time.sleep(0.002)
        proc.send_signal(sig)
        if read_end is not None:  # only now may the process write its stdout
            reader = threading.Thread(target=_drain, args=(read_end,), daemon=True)
            read_end = None
            reader.start()
        _, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if read_end is not None:
            os.close(read_end)
        if reader is not None:
            reader.join(WAIT_S)
    text = err.decode("utf-8", "replace") + f"\n(signal {sig} sent at {moment.name!r})"
    return proc.returncode, text, _survivors(tag)


def _drain(fd: int) -> None:
    with open(fd, "rb") as stream:
        stream.read()


def _leftovers(folder: Path, expected: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in expected)


def _check_interrupted(code: int, err: str, sig: int, survivors: list[str]) -> None:
    """The contract at every moment: 128 + signal, one line saying so, nothing left running."""
    assert not survivors, f"processes outlived tflkit: {survivors}"
    assert "Traceback" not in err, err
    assert code == 128 + sig, f"exit {code}: {err}"
    name = signal.Signals(sig).name
    assert err.count(f"tflkit: error: interrupted ({name})\n") == 1, err


# --------------------------------------------------------------------------------------------
# rewrite
# --------------------------------------------------------------------------------------------
def test_rewrite_interrupted_at_several_moments(tmp_path: Path) -> None:
    reference = tmp_path / "reference.tflite"
    done = subprocess.run(
        [sys.executable, "-m", "tflkit", "rewrite", str(EXAMPLE), "-o", str(reference)],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    expected = reference.read_bytes()
    for sig, number, moment in _cases(_moments(SMOKE_WORKER, exiting=False)):
        out_dir = tmp_path / f"{sig.name}-{number}"
        out_dir.mkdir()
        out = out_dir / "out.tflite"
        args = ["rewrite", str(EXAMPLE), "-o", str(out)]
        code, err, survivors = _interrupt(args, out, sig, moment)
        _check_interrupted(code, err, sig, survivors)
        assert _leftovers(out_dir, {"out.tflite"}) == [], moment
        if moment.committed:
            assert out.read_bytes() == expected, f"{moment}: the committed output changed"
        else:
            assert not out.exists(), f"{moment}: an output although interrupted before it"


# --------------------------------------------------------------------------------------------
# validate --html (the GPU runners are worker processes: they must die with tflkit)
# --------------------------------------------------------------------------------------------
def test_validate_html_interrupted_at_several_moments(tmp_path: Path) -> None:
    for sig, number, moment in _cases(_moments(RUN_WORKER, exiting=False)):
        out_dir = tmp_path / f"{sig.name}-{number}"
        out_dir.mkdir()
        html = out_dir / "report.html"
        args = ["validate", str(EXAMPLE), "--html", str(html), "-n", "1"]
        code, err, survivors = _interrupt(args, html, sig, moment)
        _check_interrupted(code, err, sig, survivors)
        assert _leftovers(out_dir, {"report.html"}) == [], moment
        if moment.committed:
            assert html.read_text().rstrip().endswith("</html>"), f"{moment}: partial report"
            assert html.stat().st_mode & 0o777 == file_mode()
        else:
            assert not html.exists(), f"{moment}: a report although interrupted before it"


# --------------------------------------------------------------------------------------------
# regress record (a baseline directory, renamed into place)
# --------------------------------------------------------------------------------------------
def test_regress_record_interrupted_at_several_moments(tmp_path: Path) -> None:
    """Before the runs, during the GPU runner's run, and after the baseline is renamed into
    place (while the report is printed, and while the process exits): the last two keep the
    whole baseline and still exit 128 + signal, never die by the signal (exit -15)."""
    for sig, number, moment in _cases(_moments(RUN_WORKER, exiting=True)):
        out_dir = tmp_path / f"{sig.name}-{number}"
        out_dir.mkdir()
        baseline = out_dir / "baseline"
        args = ["regress", "record", str(EXAMPLE), "-o", str(baseline), "-r", "cpu"]
        code, err, survivors = _interrupt(
            [*args, "-r", "gpu-fp16", "-n", "1"], baseline, sig, moment
        )
        _check_interrupted(code, err, sig, survivors)
        assert _leftovers(out_dir, {"baseline"}) == [], moment
        if moment.committed:
            kept = read_baseline(baseline)
            assert sorted(kept.manifest["runners"]) == ["cpu", "gpu-fp16"], moment
            assert sorted(p.name for p in baseline.iterdir()) == ["arrays.npz", "manifest.json"]
        else:
            assert not baseline.exists(), f"{moment}: a baseline although interrupted before it"


# --------------------------------------------------------------------------------------------
# races and permissions
# --------------------------------------------------------------------------------------------
def test_two_rewrites_to_the_same_output_leave_one_whole_result(tmp_path: Path) -> None:
    other = tmp_path / "other.tflite"
    model = ir.load(EXAMPLE)
    model.description = "a different model with the same graph"
    ir.save(model, other)
    expected = set()
    for source in (EXAMPLE, other):
        ref = tmp_path / f"ref-{source.name}"
        subprocess.run(
            [sys.executable, "-m", "tflkit", "rewrite", str(source), "-o", str(ref)],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        expected.add(ref.read_bytes())
    out_dir = tmp_path / "race"
    out_dir.mkdir()
    out = out_dir / "out.tflite"
    tag = uuid.uuid4().hex
    procs = [_start(["rewrite", str(s), "-o", str(out)], tag) for s in (EXAMPLE, other)]
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err.decode()
    assert out.read_bytes() in expected
    assert _leftovers(out_dir, {"out.tflite"}) == []


def _writer(path: str, fill: int, rounds: int) -> None:
    payload = bytes([fill]) * (3 << 20)
    for _ in range(rounds):
        write_atomic(path, [payload[: 1 << 20], payload[1 << 20 :]])


def test_concurrent_writers_never_mix(tmp_path: Path) -> None:
    target = tmp_path / "shared.bin"
    ctx = multiprocessing.get_context("fork")
    writers = [ctx.Process(target=_writer, args=(str(target), fill, 15)) for fill in (1, 2)]
    for w in writers:
        w.start()
    seen = set()
    while any(w.is_alive() for w in writers):
        if target.exists():
            data = target.read_bytes()
            assert len(data) == 3 << 20 and len(set(data)) == 1, "a reader saw a mixed file"
            seen.add(data[0])
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert set(target.read_bytes()) <= {1, 2}
    assert _leftovers(tmp_path, {"shared.bin"}) == []


def test_outputs_follow_the_umask(tmp_path: Path) -> None:
    for mask in (0o022, 0o077, 0o002):
        old = os.umask(mask)
        try:
            path = write_atomic(tmp_path / f"report-{mask:o}.json", "{}\n")
        finally:
            os.umask(old)
        assert path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_failed_write_keeps_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "model.tflite"
    target.write_bytes(b"old")

    def chunks() -> Iterator[bytes]:  # dies half-way, like an interrupt
        yield b"new data, part 1"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, chunks())
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["model.tflite"]
    assert all(not is_temporary(p.name) for p in tmp_path.iterdir())


def test_sigterm_during_a_write_unwinds(tmp_path: Path) -> None:
    """SIGTERM arriving while a (slow) atomic write is half done: no file, no temp file."""
    script = (
        "import os, signal, sys, time\n"
        "from tflkit.fsio import write_atomic\n"
        "from tflkit.proc.interrupts import exit_on_signals, exit_code\n"
        "def chunks():\n"
        "    yield b'x' * 1000\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(5)\n"
        "    yield b'never'\n"
        "@exit_on_signals\n"
        "def main():\n"
        "    try:\n"
        "        write_atomic(sys.argv[1], chunks())\n"
        "    except KeyboardInterrupt as exc:\n"
        "        return exit_code(exc)\n"
        "    return 0\n"
        "sys.exit(main())\n"
    )
    target = tmp_path / "out.bin"
    done = subprocess.run(
        [sys.executable, "-c", script, str(target)], cwd=REPO, capture_output=True, timeout=60
    )
    assert done.returncode == 128 + signal.SIGTERM, done.stderr.decode()
    assert list(tmp_path.iterdir()) == []


def test_exit_on_signals_restores_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)

    @exit_on_signals
    def body() -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
        return 0

    with pytest.raises(Interrupted) as info:
        body()
    assert info.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before
