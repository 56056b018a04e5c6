"""``tflkit convert`` on the command line: options reach the converter, bad input is one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from tests.test_convert_keras import models  # noqa: F401  (session fixture: the Keras models)
from tflkit.cli import convert_cmd
from tflkit.converters._route_clock import is_progress
from tflkit.errors import UsageError


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("convert")(convert_cmd.convert)
    app.command("noop")(lambda: None)  # two commands: "convert" stays a subcommand
    return app


def _invoke(*args: str):
    return CliRunner().invoke(_app(), ["convert", *args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--quantize", "int8"], "--quantize int8 needs --representative"),
        (["--fp16", "--quantize", "dynamic"], "--fp16 and --quantize are exclusive"),
        (["--quantize", "int4"], "--quantize takes none, dynamic, int8"),
        (["--converter-option", "nope=true"], "unknown converter option(s) ['nope']"),
        (["--converter-option", "unfold_batchmatmul"], "--converter-option takes NAME=VALUE"),
        (["--converter-option", "unfold_batchmatmul=2"], "unfold_batchmatmul takes true or false"),
        (["--image-range", "a,b"], "--image-range takes LOW,HIGH"),
    ],
)
def test_bad_options(tmp_path, args, message):
    source = tmp_path / "m.keras"
    source.write_bytes(b"x")
    result = _invoke(str(source), "-o", str(tmp_path / "m.tflite"), *args)
    assert isinstance(result.exception, UsageError)
    assert message in str(result.exception)
    assert not (tmp_path / "m.tflite").exists()


def test_unknown_format_and_overwrite(tmp_path):
    odd = tmp_path / "model.bin"
    odd.write_bytes(b"x")
    result = _invoke(str(odd))
    assert isinstance(result.exception, UsageError) and "unknown model format '.bin'" in str(
        result.exception
    )
    keras_file = tmp_path / "model.keras"
    keras_file.write_bytes(b"x")
    result = _invoke(str(keras_file), "-o", str(keras_file))
    assert "must end in .tflite" in str(result.exception)
    assert keras_file.read_bytes() == b"x"


def test_convert_json(models, tmp_path):  # noqa: F811
    output = tmp_path / "encoder.tflite"
    result = _invoke(str(models / "transformer.keras"), "-o", str(output), "--json", "--seed", "5")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # progress lines go to stderr
    assert report["options"]["seed"] == 5 and report["inputs"][0]["shape"] == [1, 16, 32]
    assert report["reference_file"] == str(tmp_path / "encoder.reference.npz")
    assert output.is_file() and (tmp_path / "encoder.provenance.json").is_file()


def test_calibration_from_an_image_folder(tmp_path: Path) -> None:
    """Representative data from images: resized to the input, scaled to the value range."""
    from PIL import Image

    from tflkit.converters.calibration import InputSpec, calibration_feeds

    folder = tmp_path / "images"
    folder.mkdir()
    for i, colour in enumerate([(0, 0, 0), (255, 255, 255), (255, 0, 0)]):
        Image.new("RGB", (40, 30), colour).save(folder / f"{i}.png")
    spec = InputSpec("image", (1, 8, 8, 3), "float32")
    feeds = calibration_feeds(folder, [spec], steps=2, value_range=(-1.0, 1.0))
    assert len(feeds) == 2  # steps caps the three images
    black, white = feeds[0]["image"], feeds[1]["image"]
    assert black.shape == (1, 8, 8, 3) and black.dtype == np.float32
    assert np.all(black == -1.0) and np.all(white == 1.0)


def _tflkit(*args: str, cwd: Path, env: dict[str, str] | None = None):
    """``tflkit ARGS`` as a user runs it: its own process, in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "tflkit", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def test_lambda_needs_opt_in_and_relative_paths(models, tmp_path):  # noqa: F811
    """A Lambda layer fails in one line without --unsafe-deserialization and converts with it;
    the model, the output and --representative are relative to another working directory."""
    src, work = tmp_path / "src", tmp_path / "work"
    src.mkdir()
    work.mkdir()
    shutil.copy(models / "with_lambda.keras", src / "with_lambda.keras")
    rng = np.random.default_rng(0)
    np.savez(src / "rep.npz", features=rng.normal(size=(4, 8)).astype(np.float32))

    refused = _tflkit("convert", "../src/with_lambda.keras", "-o", "out/l.tflite", cwd=work)
    assert refused.returncode == 2, refused.stderr
    (line,) = [ln for ln in refused.stderr.strip().splitlines() if not is_progress(ln)]
    assert line.startswith("tflkit: error: with_lambda.keras has a Lambda layer")
    assert line.endswith("pass --unsafe-deserialization")
    assert not (work / "out" / "l.tflite").exists()

    args = ["convert", "../src/with_lambda.keras", "-o", "out/l.tflite", "--json"]
    args += ["--unsafe-deserialization", "--quantize", "int8", "--representative", "../src/rep.npz"]
    done = _tflkit(*args, "--calibration-steps", "4", cwd=work)
    assert done.returncode == 0, done.stderr
    (warning,) = [ln for ln in done.stderr.splitlines() if ln.startswith("tflkit: warning:")]
    assert "--unsafe-deserialization" in warning and "trust" in warning
    report = json.loads(done.stdout)
    assert report["schema"] == "tflkit.convert/1"
    assert report["options"]["representative"] == str((src / "rep.npz").resolve())
    assert any("Lambda" in note for note in report["notes"])
    assert (work / "out" / "l.tflite").is_file()
    assert (work / "out" / "l.provenance.json").is_file()


def test_int8_io_input_is_reported_as_int8(models, tmp_path):  # noqa: F811
    """--int8-io: the summary, the sidecar and the metadata give the input the .tflite takes
    (int8 with its scale and zero point), and the source's float32 beside it."""
    from tflkit import ir
    from tflkit.converters.provenance import read_provenance

    shutil.copy(models / "with_lambda.keras", tmp_path / "m.keras")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "rep.npz", features=rng.normal(size=(4, 8)).astype(np.float32))
    args = ["convert", "m.keras", "-o", "m.tflite", "--unsafe-deserialization", "--int8-io"]
    args += ["--quantize", "int8", "--representative", "rep.npz", "--calibration-steps", "4"]
    done = _tflkit(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    model = ir.load((tmp_path / "m.tflite").read_bytes())
    tensor = model.main.inputs[0]
    assert tensor.type_name == "INT8"
    scale, zero = tensor.scale_zero_point
    (line,) = [ln.strip() for ln in done.stdout.splitlines() if ln.strip().startswith("input ")]
    assert (
        line == f"input features: int8 (scale {scale:.3g}, zero point {zero}; source float32) "
        "1x8 (was ?x8)"
    ), line
    side = json.loads((tmp_path / "m.provenance.json").read_text())
    for record in (side, read_provenance(model)):
        (entry,) = record["inputs"]
        assert entry["dtype"] == "int8" and entry["source_dtype"] == "float32", entry
        assert entry["scale"] == pytest.approx(scale) and entry["zero_point"] == zero
