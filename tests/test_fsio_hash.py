"""The file's sha256 that ``check`` reports, hashed by a child process beside the check."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tflkit.cli.main import EXIT_OK, main
from tflkit.fsio import Sha256Job


@pytest.mark.parametrize("size", [1, (32 << 20) - 1, 32 << 20, (32 << 20) + 5, 70 << 20])
def test_the_childs_windows_cover_the_file(tmp_path: Path, size: int) -> None:
    """The child maps 32 MiB windows: files ending before, at and after a window's end."""
    data = (bytes(range(251)) * (size // 251 + 1))[:size]
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    assert Sha256Job(path).hexdigest() == hashlib.sha256(data).hexdigest()


def test_a_file_the_kernel_sizes_zero_is_read() -> None:
    """/proc files say size 0 and hold bytes: the child reads them (no window to map)."""
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
