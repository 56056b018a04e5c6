"""Nothing lost: interrupts, crashes and races leave no partial output, temp file or process.

SIGINT and SIGTERM are sent to real ``tflkit`` processes (``rewrite``, ``validate --html``,
``regress record``) at several moments; every process tflkit starts carries a tag in its
environment, so any survivor is found by scanning ``/proc``.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tflkit import ir
from tflkit.fsio import file_mode, is_temporary, write_atomic
from tflkit.proc.interrupts import Interrupted, exit_on_signals

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "tflkit" / "examples" / "tiny_classifier.tflite"
TAG = "TFLKIT_INTERRUPT_TEST_TAG"


# --------------------------------------------------------------------------------------------
# helpers: a tagged tflkit process, survivors, leftovers
# --------------------------------------------------------------------------------------------
def _start(args: list[str], tag: str, **kwargs: object) -> subprocess.Popen[bytes]:
    env = dict(os.environ, **{TAG: tag})
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    return subprocess.Popen(
        [sys.executable, "-m", "tflkit", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        **kwargs,  # type: ignore[arg-type]
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


@functools.cache
def _startup() -> float:
    """Seconds until a tflkit process is inside ``main()`` (its imports done), measured here.

    A signal during Python's own start-up, before tflkit's handlers exist, is Python's default
    (a KeyboardInterrupt traceback or death by SIGTERM, with nothing written yet), so every
    moment below is counted from this point.
    """
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tflkit", "inspect", str(EXAMPLE)],
        cwd=REPO,
        capture_output=True,
        check=True,
    )
    return time.perf_counter() - start


def _interrupt(args: list[str], sig: int, delay: float) -> tuple[int, str, list[str]]:
    """Run tflkit, send ``sig`` ``delay`` s after start-up; (exit code, stderr, survivors)."""
    tag = uuid.uuid4().hex
    wait = _startup() + delay
    proc = _start(args, tag)
    time.sleep(wait)
    if proc.poll() is None:
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=180)
    text = err.decode("utf-8", "replace") + f"\n(signal {sig} sent {wait:.2f} s after start)"
    return proc.returncode, text, _survivors(tag)


def _leftovers(folder: Path, expected: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in expected)


def _check_interrupted(code: int, err: str, sig: int, survivors: list[str]) -> bool:
    """Assert the contract; returns whether the signal landed before the command finished."""
    assert not survivors, f"processes outlived tflkit: {survivors}"
    assert "Traceback" not in err, err
    if code == 128 + sig:
        name = signal.Signals(sig).name
        assert f"tflkit: error: interrupted ({name})\n" in err, err
        return True
    # Finished first: exit 0/1, or Python's own default when the signal hit the interpreter's
    # shutdown after main() returned (tflkit's handlers are gone by then).
    assert code in (0, 1, -sig), f"exit {code}: {err}"
    return False


MOMENTS = (0.0, 1.0)


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
    landed = 0
    for sig in (signal.SIGINT, signal.SIGTERM):
        for delay in MOMENTS:
            out_dir = tmp_path / f"{sig.name}-{delay}"
            out_dir.mkdir()
            out = out_dir / "out.tflite"
            code, err, survivors = _interrupt(["rewrite", str(EXAMPLE), "-o", str(out)], sig, delay)
            landed += _check_interrupted(code, err, sig, survivors)
            assert _leftovers(out_dir, {"out.tflite"}) == []
            assert not out.exists() or out.read_bytes() == expected, "partial or mixed output"
            assert code != 0 or out.exists()
    assert landed >= 2, "no signal arrived while rewrite was running: moments too late"


# --------------------------------------------------------------------------------------------
# validate --html (the GPU runners are worker processes: they must die with tflkit)
# --------------------------------------------------------------------------------------------
def test_validate_html_interrupted_at_several_moments(tmp_path: Path) -> None:
    landed = 0
    for sig in (signal.SIGINT, signal.SIGTERM):
        for delay in (0.5, 4.0):
            out_dir = tmp_path / f"{sig.name}-{delay}"
            out_dir.mkdir()
            html = out_dir / "report.html"
            code, err, survivors = _interrupt(
                ["validate", str(EXAMPLE), "--html", str(html), "-n", "1"], sig, delay
            )
            landed += _check_interrupted(code, err, sig, survivors)
            assert _leftovers(out_dir, {"report.html"}) == []
            if html.exists():
                assert html.read_text().rstrip().endswith("</html>"), "partial HTML report"
                assert html.stat().st_mode & 0o777 == file_mode()
    assert landed >= 2


# --------------------------------------------------------------------------------------------
# regress record (a baseline directory)
# --------------------------------------------------------------------------------------------
def _has_regress() -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "tflkit", "regress", "record", "--help"],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def test_regress_record_interrupted_at_several_moments(tmp_path: Path) -> None:
    if not _has_regress():
        pytest.fail("`tflkit regress record` is missing", pytrace=False)
    landed = 0
    for sig in (signal.SIGINT, signal.SIGTERM):
        for delay in (0.5, 3.0):
            out_dir = tmp_path / f"{sig.name}-{delay}"
            out_dir.mkdir()
            baseline = out_dir / "baseline"
            args = ["regress", "record", str(EXAMPLE), "-o", str(baseline), "-r", "cpu"]
            code, err, survivors = _interrupt([*args, "-r", "gpu-fp16", "-n", "1"], sig, delay)
            landed += _check_interrupted(code, err, sig, survivors)
            assert _leftovers(out_dir, {"baseline"}) == []
            if baseline.exists():
                names = sorted(p.name for p in baseline.iterdir())
                assert names and not any(n.startswith(".") for n in names), names
                assert code == 0, f"a baseline exists after exit {code}: {names}"
    assert landed >= 2


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
