"""``tflkit inspect`` on the corpus: correct answers per feature, one-line errors, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tflkit.cli.main import EXIT_OK, EXIT_USAGE, main

EXAMPLE = Path(__file__).resolve().parents[1] / "tflkit" / "examples" / "tiny_classifier.tflite"


def inspect_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["inspect", "--json", str(path)]) == EXIT_OK
    return json.loads(capsys.readouterr().out)


def warning_codes(report: dict[str, Any]) -> set[str]:
    return {w["code"] for w in report["warnings"]}


def io_entries(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [entry for sig in report["signatures"] for entry in sig[kind]]


def test_float_model_has_no_warnings(corpus: Any, capsys: pytest.CaptureFixture[str]) -> None:
    report = inspect_json(corpus.path("conv_dense"), capsys)
    assert report["schema"] == "tflkit.inspect/1"
    assert report["warnings"] == []
    assert report["op_histogram"] == {"CONV_2D": 1, "RESHAPE": 1, "FULLY_CONNECTED": 1}
    assert report["op_versions"]["CONV_2D"] == [1]
    (signature,) = report["signatures"]
    assert signature["key"] == "serving_default"
    assert signature["inputs"][0]["shape"] == [1, 16, 16, 3]
    assert signature["inputs"][0]["dtype"] == "FLOAT32"
    assert report["weights_bytes_by_dtype"]["FLOAT32"] > 0


def test_fp16_weights(corpus: Any, capsys: pytest.CaptureFixture[str]) -> None:
    report = inspect_json(corpus.path("fp16_weights"), capsys)
    assert "DEQUANTIZE" in report["op_histogram"]
    assert report["weights_bytes_by_dtype"].get("FLOAT16", 0) > 0
    assert io_entries(report, "inputs")[0]["dtype"] == "FLOAT32"


def test_sparse_weights(corpus: Any, capsys: pytest.CaptureFixture[str]) -> None:
    report = inspect_json(corpus.path("sparse_weights"), capsys)
    assert report["sparse_tensors"] >= 1
    assert "DENSIFY" in report["op_histogram"]
    assert "SPARSE_WEIGHTS" in warning_codes(report)


def test_custom_and_flex_ops(corpus: Any, capsys: pytest.CaptureFixture[str]) -> None:
    custom = inspect_json(corpus.path("custom_op"), capsys)
    assert custom["custom_ops"] == ["Erf"]
    assert custom["flex_ops"] == []
    assert "CUSTOM_OP" in warning_codes(custom)
    flex = inspect_json(corpus.path("flex_op"), capsys)
    assert flex["flex_ops"] == ["FlexErf"]
    assert flex["custom_ops"] == []
    assert "FLEX_OP" in warning_codes(flex)


@pytest.mark.parametrize(("name", "io_dtype"), [("full_int8", "INT8"), ("full_uint8_io", "UINT8")])
def test_integer_quantized_io(
    corpus: Any, capsys: pytest.CaptureFixture[str], name: str, io_dtype: str
) -> None:
    report = inspect_json(corpus.path(name), capsys)
    entries = io_entries(report, "inputs") + io_entries(report, "outputs")
    assert {e["dtype"] for e in entries} == {io_dtype}
    for entry in entries:
        q = entry["quantization"]
        assert q is not None and q["scale"] > 0 and isinstance(q["zero_point"], int)
    assert "QUANTIZED_IO" in warning_codes(report)
    assert report["weights_bytes_by_dtype"].get("INT8", 0) > 0


def test_quantization_matches_interpreter(corpus: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from ai_edge_litert.interpreter import Interpreter

    path = corpus.path("full_uint8_io")
    report = inspect_json(path, capsys)
    interpreter = Interpreter(model_path=str(path))
    (detail,) = interpreter.get_input_details()
    scale, zero_point = detail["quantization"]
    entry = io_entries(report, "inputs")[0]
    assert entry["quantization"]["scale"] == pytest.approx(scale, rel=1e-6)
    assert entry["quantization"]["zero_point"] == zero_point
    assert entry["shape"] == detail["shape"].tolist()


def test_resource_variables(corpus: Any, capsys: pytest.CaptureFixture[str]) -> None:
    report = inspect_json(corpus.path("resource_variables"), capsys)
    assert {"VAR_HANDLE", "ASSIGN_VARIABLE", "READ_VARIABLE", "CALL_ONCE"} <= set(
        report["op_histogram"]
    )
    assert {"RESOURCE_VARIABLES", "CONTROL_FLOW"} <= warning_codes(report)
    assert len(report["subgraphs"]) >= 2


@pytest.mark.parametrize(("name", "op"), [("if_cond", "IF"), ("while_loop", "WHILE")])
def test_control_flow(corpus: Any, capsys: pytest.CaptureFixture[str], name: str, op: str) -> None:
    report = inspect_json(corpus.path(name), capsys)
    assert op in report["op_histogram"]
    assert len(report["subgraphs"]) == 3
    control = next(w for w in report["warnings"] if w["code"] == "CONTROL_FLOW")
    assert op in control["items"]


@pytest.mark.parametrize(("name", "shape"), [("dynamic_batch", ["?", 8]), ("dynamic_audio", ["?"])])
def test_dynamic_shapes(
    corpus: Any, capsys: pytest.CaptureFixture[str], name: str, shape: list[Any]
) -> None:
    report = inspect_json(corpus.path(name), capsys)
    assert io_entries(report, "inputs")[0]["shape"] == shape
    assert "DYNAMIC_SHAPE" in warning_codes(report)


def test_several_signatures(corpus: Any, capsys: pytest.CaptureFixture[str]) -> None:
    report = inspect_json(corpus.path("multi_signature"), capsys)
    keys = {s["key"]: s["subgraph"] for s in report["signatures"]}
    assert set(keys) == {"encode", "decode"}
    assert len(set(keys.values())) == 2


def test_int64_and_rank5(corpus: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert "INT64" in warning_codes(inspect_json(corpus.path("int64_argmax"), capsys))
    assert "RANK_GT_4" in warning_codes(inspect_json(corpus.path("rank5"), capsys))


def test_real_models(real_models: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    unsigned = {"deeplabv3"}  # no SignatureDef: one implicit signature, no key
    assert unsigned < {p.stem for p in real_models}
    for path in real_models:
        report = inspect_json(path, capsys)
        key = None if path.stem in unsigned else "serving_default"
        assert [s["key"] for s in report["signatures"]] == [key], path.name
        assert report["signatures"][0]["inputs"][0]["dtype"] == "FLOAT32"
        assert sum(report["op_histogram"].values()) == sum(s["ops"] for s in report["subgraphs"])
        assert report["size_bytes"] == path.stat().st_size


def test_weights_count_each_buffer_once(corpus: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from tflkit import ir

    path = corpus.path("conv_dense")
    model = ir.load(path)
    buffers = {id(t.buffer): t for t in model.main.tensors if t.is_constant}
    expected = sum(t.buffer.nbytes for t in buffers.values() if t.type_name == "FLOAT32")
    report = inspect_json(path, capsys)
    assert report["weights_bytes_by_dtype"]["FLOAT32"] == expected


def test_terminal_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(EXAMPLE)]) == EXIT_OK
    out = capsys.readouterr().out
    for text in ("serving_default", "LOG_SOFTMAX", "ARG_MAX", "INT64", "[1, 32, 32, 3]"):
        assert text in out


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tflkit", *args], capture_output=True, text=True, timeout=120
    )


def bad_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    data = EXAMPLE.read_bytes()
    rng = np.random.default_rng(0)
    files = {
        "truncated": (data[: len(data) // 2], "truncated or corrupt"),
        "random": (rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(), "not a TFLite model"),
        "text": (b"this is not a model\n" * 20, "not a TFLite model"),
        "empty": (b"", "empty file"),
    }
    paths = {}
    for name, (content, message) in files.items():
        path = tmp_path / f"{name}.tflite"
        path.write_bytes(content)
        paths[name] = (path, message)
    paths["missing"] = (tmp_path / "missing.tflite", "no such file")
    return paths


@pytest.mark.parametrize("case", ["truncated", "random", "text", "empty", "missing"])
def test_bad_input_is_one_line(tmp_path: Path, case: str) -> None:
    path, message = bad_files(tmp_path)[case]
    before = path.read_bytes() if path.exists() else None
    result = run_cli("inspect", str(path))
    assert result.returncode == EXIT_USAGE
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tflkit: error: ") and message in lines[0]
    assert "Traceback" not in result.stderr
    if before is not None:
        assert path.read_bytes() == before


def test_debug_shows_traceback(tmp_path: Path) -> None:
    path, _ = bad_files(tmp_path)["truncated"]
    result = run_cli("--debug", "inspect", str(path))
    assert result.returncode == EXIT_USAGE
    # a ModelLoadError (StructureError is the structural verifier's kind of it)
    assert "Traceback" in result.stderr
    assert "ModelLoadError" in result.stderr or "StructureError" in result.stderr


def test_usage_error_exit_code() -> None:
    assert run_cli("inspect").returncode == EXIT_USAGE
    assert run_cli("no-such-command").returncode == EXIT_USAGE


def test_warnings_name_inputs_as_the_table_does(
    corpus: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The dynamic input of ``dynamic_audio`` is ``waveform`` in the signature table, tensor
    ``serving_default_waveform:0``: the warning says ``waveform`` too."""
    report = inspect_json(corpus.path("dynamic_audio"), capsys)
    (entry,) = io_entries(report, "inputs")
    assert (entry["name"], entry["tensor"]) == ("waveform", "serving_default_waveform:0")
    (dynamic,) = [w for w in report["warnings"] if w["code"] == "DYNAMIC_SHAPE"]
    assert dynamic["items"] == ["waveform"]
