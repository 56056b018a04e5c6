"""The file's sha256 that ``check`` reports, hashed by a child process beside the check."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tflkit.cli.main import EXIT_OK, main
from tflkit.fsio import Sha256Job


@pytest.mark.parametrize("size", [1, (256 << 10) - 1, 256 << 10, (256 << 10) + 5, 70 << 20])
def test_the_childs_reads_cover_the_file(tmp_path: Path, size: int) -> None:
    """The child reads through a 256 KiB buffer: files ending before, at and after its end."""
    data = (bytes(range(251)) * (size // 251 + 1))[:size]
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    assert Sha256Job(path).hexdigest() == hashlib.sha256(data).hexdigest()


def test_a_file_the_kernel_sizes_zero_is_read() -> None:
    """/proc files say size 0 and hold bytes: the child reads them to their end."""
    digest = Sha256Job("/proc/self/cmdline").hexdigest()
    assert digest is not None and digest != hashlib.sha256(b"").hexdigest()


def test_a_file_a_view_and_a_missing_file(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40_000  # 10 MB
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    want = hashlib.sha256(data).hexdigest()
    assert Sha256Job(path).hexdigest() == want
    assert Sha256Job(memoryview(data)).hexdigest() == want
    assert Sha256Job(tmp_path / "missing.bin").hexdigest() is None
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert Sha256Job(empty).hexdigest() == hashlib.sha256(b"").hexdigest()


def test_check_reports_the_files_digest(corpus, capsys: pytest.CaptureFixture[str]) -> None:
    path = corpus.path("conv_dense")
    assert main(["check", "--json", str(path)]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["sha256"] == hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_an_early_hash_is_handed_over_only_for_the_same_file(tmp_path: Path) -> None:
    """``hash_early`` (what ``tflkit check`` runs before Typer loads) skips options, what is not
    a regular file and what it is told to (a bundle); ``of_file`` takes its job over once, and
    not for a file changed since."""
    from tflkit import fsio
    from tflkit.bundle.magic import is_bundle

    first = b"\0\0\0\0TFL3" + b"first" * 1000
    path = tmp_path / "model.tflite"
    path.write_bytes(first)
    bundle = tmp_path / "model.litertlm"
    bundle.write_bytes(b"LITERTLM" * 1000)
    fsio.hash_early(
        ["--json", str(tmp_path), str(tmp_path / "missing"), str(bundle), str(path)], is_bundle
    )
    early = dict(fsio._EARLY)
    assert len(early) == 1
    job = Sha256Job.of_file(path)
    assert job is next(iter(early.values()))
    assert job.hexdigest() == hashlib.sha256(first).hexdigest()
    assert Sha256Job.of_file(path) is not job  # handed over once: a new job after that

    fsio.hash_early([str(path)])
    second = first + b"second"
    path.write_bytes(second)  # size and mtime change: another file now
    assert Sha256Job.of_file(path).hexdigest() == hashlib.sha256(second).hexdigest()
    fsio._stop_early()
    assert fsio._EARLY == {}


def test_an_early_hash_no_command_takes_ends_with_the_process(tmp_path: Path) -> None:
    """A job started for a file no command asks about: its child is killed when tflkit exits."""
    import os
    import subprocess
    import sys

    path = tmp_path / "big.bin"
    path.write_bytes(b"\0" * (256 << 20))
    code = (
        "import sys\n"
        "from tflkit import fsio\n"
        f"fsio.hash_early([{str(path)!r}])\n"
        "print(next(iter(fsio._EARLY.values()))._child.pid)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    child = int(done.stdout.strip())  # killed and reaped before the process exited
    assert not Path(f"/proc/{child}").exists(), os.popen(f"ps -o pid,stat,cmd -p {child}").read()
