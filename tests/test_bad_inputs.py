"""Bad ``validate --inputs``: a clear one-line error, or a result that says what was wrong.

Wrong shape, wrong dtype, empty arrays, missing and extra ``.npz`` keys, files that are not
arrays, a folder with a non-image, and NaN/Inf values (a report that says so, not an error).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tflkit import ir
from tflkit.errors import UsageError
from tflkit.validation.inputs import make_input_sets

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "tflkit" / "examples" / "tiny_classifier.tflite"  # one input: image [1,32,32,3]
SHAPE = (1, 32, 32, 3)


def _npy(array: np.ndarray) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        np.save(folder / "in.npy", array)
        return folder / "in.npy"

    return make


def _npz(**arrays: np.ndarray) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        np.savez(folder / "in.npz", **arrays)
        return folder / "in.npz"

    return make


def _raw(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        (folder / name).write_bytes(data)
        return folder / name

    return make


def _image_folder(folder: Path) -> Path:
    images = folder / "images"
    images.mkdir()
    (images / "cat.png").write_bytes(b"not a png at all")
    return images


def _empty_folder(folder: Path) -> Path:
    (folder / "docs").mkdir()
    (folder / "docs" / "readme.txt").write_text("no images here")
    return folder / "docs"


ZEROS = np.zeros(SHAPE, np.float32)
BAD: list[tuple[str, Callable[[Path], Path], str]] = [
    (
        "wrong shape",
        _npy(np.zeros((1, 16, 16, 3), np.float32)),
        r"has shape \(1, 16, 16, 3\); the input takes \(1, 32, 32, 3\)",
    ),
    ("wrong rank", _npy(np.zeros((32, 32), np.float32)), r"has shape \(32, 32\)"),
    ("strings", _npy(np.full(SHAPE, "a")), r"holds <U1 values; the input takes float32"),
    ("complex", _npy(np.zeros(SHAPE, np.complex64)), r"holds complex64 values; the input takes"),
    ("empty", _npy(np.zeros((0, *SHAPE), np.float32)), r"holds 0 input sets"),
    ("npz missing key", _npz(photo=ZEROS, other=ZEROS), r"has no array for input 'image'"),
    ("npz extra key", _npz(image=ZEROS, labels=np.zeros(3)), r"arrays \['labels'\] that are not"),
    ("two sets: fine", _npz(image=np.zeros((2, *SHAPE), np.float32)), None),
    ("not a zip", _raw("in.npz", b"PK\x03\x04 not a zip"), r"cannot read inputs .*in.npz"),
    ("text file", _raw("in.npy", b"hello"), r"cannot read inputs .*in.npy"),
    ("pickled object", _npy(np.array([{"a": 1}], dtype=object)), r"cannot read inputs"),
    ("non-image in folder", _image_folder, r"cat.png: not a readable image"),
    ("folder without images", _empty_folder, r"holds no images"),
]


@pytest.mark.parametrize("make, expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_one_clear_error(
    tmp_path: Path, make: Callable[[Path], Path], expected: str | None
) -> None:
    model = ir.load(EXAMPLE)
    source = make(tmp_path)
    if expected is None:  # a valid file after all (two sets of one input)
        assert len(make_input_sets(model, source=source).feeds) == 2
        return
    with pytest.raises(UsageError, match=expected) as info:
        make_input_sets(model, source=source)
    assert "\n" not in str(info.value)


def _validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tflkit", "validate", str(EXAMPLE), "-r", "cpu", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("case", ["not a zip", "non-image in folder"])
def test_cli_exits_2_with_one_line(tmp_path: Path, case: str) -> None:
    make = next(b[1] for b in BAD if b[0] == case)
    done = _validate("--inputs", str(make(tmp_path)))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tflkit: error: "), done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_nan_and_inf_inputs_are_labelled(tmp_path: Path) -> None:
    values = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    values[0, 0, 0, 0], values[0, 1, 1, 1] = np.nan, np.inf
    np.save(tmp_path / "nan.npy", values)
    done = _validate("--inputs", str(tmp_path / "nan.npy"), "-r", "cpu-ref", "--json")
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    notes = report["inputs"]["notes"]
    assert any("holds 1 NaN and 1 Inf of 3072 values" in n for n in notes), notes
    text = _validate("--inputs", str(tmp_path / "nan.npy"), "-r", "cpu-ref")
    assert "input image holds 1 NaN and 1 Inf" in text.stdout
