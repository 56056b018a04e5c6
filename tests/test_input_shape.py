"""``--input-shape``: one parser, signature and tensor names, the same shape everywhere.

The real case is wyoming-openwakeword's melspectrogram (input ``input``, tensor
``serving_default_input:0``, shape ``?x?`` stored as ``[1, 1]``): at the stored shape XNNPACK
cannot prepare its convolutions, so every command must run it at the given shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tflkit import ir
from tflkit.cli.main import EXIT_OK, EXIT_USAGE, main
from tflkit.errors import UsageError
from tflkit.ir.shapes import (
    by_feed_name,
    by_tensor_name,
    parse_input_shapes,
    resolve_input_shapes,
)

MEL = "openwakeword/melspectrogram"


def test_parser() -> None:
    assert parse_input_shapes(["input=1,1280"]) == {"input": (1, 1280)}
    assert parse_input_shapes(["serving_default_input:0=1, 1280"]) == {
        "serving_default_input:0": (1, 1280)
    }
    assert parse_input_shapes(["a=b=2"]) == {"a=b": (2,)}  # the name ends at the last '='
    assert parse_input_shapes(None) == {}
    for bad in ("input:1,2", "=1,2", "x=", "x=1,,2", "x=1,0", "x=-1"):
        with pytest.raises(UsageError, match="--input-shape"):
            parse_input_shapes([bad])
    with pytest.raises(UsageError, match="twice"):
        parse_input_shapes(["x=1", "x=2"])


def test_signature_and_tensor_names(corpus: Any) -> None:
    model = ir.load(corpus.path("dynamic_audio"))
    for name in ("waveform", "serving_default_waveform:0"):
        assert by_tensor_name(model, {name: (16000,)}) == {"serving_default_waveform:0": (16000,)}
        assert by_feed_name(model, {name: (16000,)}) == {"waveform": (16000,)}
    with pytest.raises(UsageError, match="twice"):
        resolve_input_shapes(model, {"waveform": (2,), "serving_default_waveform:0": (2,)})
    with pytest.raises(UsageError, match=r"not a model input; inputs: waveform \(tensor"):
        resolve_input_shapes(model, {"audio": (2,)})
    with pytest.raises(UsageError, match="does not fit"):
        resolve_input_shapes(model, {"waveform": (1, 2)})


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def test_every_command_runs_the_given_shape(
    world_models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mel = str(world_models[MEL])
    out = tmp_path / "mel.tflite"
    # rewrite: the original is verified at the shape given by its signature name.
    code, report = _json(capsys, "rewrite", mel, "-o", str(out), "--input-shape", "input=1,1280")
    assert code == EXIT_OK, report
    assert report["verification"]["ok"] and out.is_file()
    assert ir.load(out).main.inputs[0].shape == (1, 1280)
    # validate: the CPU runner resizes before it allocates (XNNPACK fails at [1, 1]).
    for name in ("input", "serving_default_input:0"):
        code, report = _json(
            capsys, "validate", mel, "--runner", "cpu", "-n", "1", "--input-shape", f"{name}=1,1280"
        )
        assert report["runners"][0]["status"] == "ok", report["runners"][0]
    # check: at the stored [1, 1] the model does not even prepare (a fatal verdict, measured:
    # the accelerator refuses it); with the shape it compiles and the copies are counted.
    code, report = _json(capsys, "check", mel)
    assert not report["compiles"] and report["issues"][0]["fix"]["kind"] == "input_shape"
    code, report = _json(capsys, "check", mel, "--input-shape", "input=1,1280")
    assert code == EXIT_OK and report["internal_transfer_bytes"] > 0
    assert report["input_shapes"] == {"input": [1, 1280]}
    assert not any(i["code"] == "DYNAMIC_INPUT" for i in report["issues"])
    assert main(["check", mel, "--input-shape", "input=1,2,3"]) == EXIT_USAGE


def test_dynamic_copies_are_unknown_not_zero(
    world_models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    embedding = str(world_models["openwakeword/embedding_model"])  # input ?x76x32x1
    _, report = _json(capsys, "check", embedding)
    assert report["io_transfer_bytes"] is None
    assert main(["check", embedding]) == EXIT_OK
    assert "unknown until --input-shape graph inputs/outputs" in capsys.readouterr().out
    _, report = _json(capsys, "check", embedding, "--input-shape", "input_1=1,76,32,1")
    assert report["io_transfer_bytes"] == (76 * 32 + 96) * 4  # input in, 1x1x1x96 out


@pytest.mark.gpu
def test_validate_runs_the_gpu_at_the_given_shape(
    gpu: Any, world_models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The GPU cannot resize an input after compiling: validate compiles the model at the
    shape given (at the stored [1, 1] the accelerator refuses the melspectrogram)."""
    mel = str(world_models[MEL])
    code, report = _json(
        capsys, "validate", mel, "-n", "1", "--runner", "cpu", "--runner", "gpu-fp32",
        "--input-shape", "input=1,1280",
    )  # fmt: skip
    assert {r["runner"]: r["status"] for r in report["runners"]} == {"cpu": "ok", "gpu-fp32": "ok"}
    assert code == EXIT_OK and report["verdict"] == "pass"
