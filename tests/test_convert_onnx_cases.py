"""ONNX conversion on small models built for each rough edge: int64 ids + a bool mask + external
data on both routes, Reshape ``allowzero=1`` and output names on the second route, an NHWC model
with SpaceToDepth, a route cut by ``auto``'s time budget, onnx2tf option values, and int8
quantization of a conversion without a signature.

The models are written with ``onnx`` in the ONNX converter environment (tflkit's own does not
hold onnx); every conversion runs the real converters of the test cache.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest_corpus import cache_root
from tflkit import ir

TEXT_MODEL = """
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
rng = np.random.default_rng(0)
init = [nh.from_array(rng.normal(0, 1, (200, 32)).astype(np.float32), "embedding"),
        nh.from_array(rng.normal(0, 0.3, (32, 3)).astype(np.float32), "classifier"),
        nh.from_array(np.array([2], np.int64), "axes"),
        nh.from_array(np.array([1], np.int64), "raxes")]
nodes = [h.make_node("Gather", ["embedding", "input_ids"], ["tokens"], axis=0),
         h.make_node("Cast", ["attention_mask"], ["maskf"], to=T.FLOAT),
         h.make_node("Unsqueeze", ["maskf", "axes"], ["mask3"]),
         h.make_node("Mul", ["tokens", "mask3"], ["masked"]),
         h.make_node("ReduceMean", ["masked", "raxes"], ["pooled"], keepdims=0),
         h.make_node("MatMul", ["pooled", "classifier"], ["logits"])]
g = h.make_graph(nodes, "text", [h.make_tensor_value_info("input_ids", T.INT64, [1, 8]),
    h.make_tensor_value_info("attention_mask", T.BOOL, [1, 8])],
    [h.make_tensor_value_info("logits", T.FLOAT, [1, 3])], init)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)]); m.ir_version = 9
onnx.save_model(m, sys.argv[1], save_as_external_data=True, all_tensors_to_one_file=True,
                location="model.onnx.data", size_threshold=256)
"""

ALLOWZERO_MODEL = """
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
shape = nh.from_array(np.array([1, 24], np.int64), "shape")
nodes = [h.make_node("Relu", ["x"], ["act"]),
         h.make_node("Reshape", ["act", "shape"], ["flat"], allowzero=1),
         h.make_node("Sigmoid", ["x"], ["gate"])]
g = h.make_graph(nodes, "rz", [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 6])],
    [h.make_tensor_value_info("flat", T.FLOAT, [1, 24]),
     h.make_tensor_value_info("gate", T.FLOAT, [1, 4, 6])], [shape])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)]); m.ir_version = 9
onnx.save(m, sys.argv[1])
"""

#: A text detector's shape: a 1-channel sigmoid map at half the input's size, from a small FPN
#: (three stride-2 convs, nearest upsampling, skip additions) over an image of any size.
DETECTOR_MODEL = """
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
rng = np.random.default_rng(0)
def w(name, co, ci, k):
    return nh.from_array(rng.normal(0, .2, (co, ci, k, k)).astype(np.float32), name)
inits = [w("w1", 8, 3, 3), w("w2", 16, 8, 3), w("w3", 16, 16, 3), w("w4", 8, 16, 1),
         w("w5", 1, 8, 3), nh.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
nodes = [
  h.make_node("Conv", ["x", "w1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
  h.make_node("Relu", ["c1"], ["r1"]),
  h.make_node("Conv", ["r1", "w2"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1]),
  h.make_node("Relu", ["c2"], ["r2"]),
  h.make_node("Conv", ["r2", "w3"], ["c3"], strides=[2, 2], pads=[1, 1, 1, 1]),
  h.make_node("Resize", ["c3", "", "scales"], ["u3"], mode="nearest"),
  h.make_node("Add", ["u3", "r2"], ["a2"]),
  h.make_node("Resize", ["a2", "", "scales"], ["u2"], mode="nearest"),
  h.make_node("Conv", ["u2", "w4"], ["c4"]),
  h.make_node("Add", ["c4", "r1"], ["a1"]),
  h.make_node("Conv", ["a1", "w5"], ["c5"], pads=[1, 1, 1, 1]),
  h.make_node("Sigmoid", ["c5"], ["prob"]),
]
g = h.make_graph(nodes, "det", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, "h", "w"])],
                 [h.make_tensor_value_info("prob", T.FLOAT, [1, 1, "h2", "w2"])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]); m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
"""

SPACE_TO_DEPTH_MODEL = """
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
w = nh.from_array(np.random.default_rng(0).normal(0, .3, (16, 12, 1, 1)).astype(np.float32), "w")
nodes = [h.make_node("Transpose", ["image"], ["nchw"], perm=[0, 3, 1, 2]),
         h.make_node("SpaceToDepth", ["nchw"], ["s2d"], blocksize=2),
         h.make_node("Conv", ["s2d", "w"], ["conv"]),
         h.make_node("Transpose", ["conv"], ["features"], perm=[0, 2, 3, 1])]
g = h.make_graph(nodes, "s2d", [h.make_tensor_value_info("image", T.FLOAT, ["batch", 16, 16, 3])],
    [h.make_tensor_value_info("features", T.FLOAT, ["batch", 8, 8, 16])], [w])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)]); m.ir_version = 8
onnx.save(m, sys.argv[1])
"""


@pytest.fixture(autouse=True)
def shared_converters(monkeypatch):
    """The converter environments of the test cache (built there once, reused by every test)."""
    monkeypatch.setenv("TFLKIT_CONVERTERS_DIR", str(cache_root() / "converters"))


def _build(script: str, path: Path) -> Path:
    from tflkit.converters.envs import ensure_env

    env = ensure_env("onnx", root=cache_root() / "converters")
    path.parent.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(
        [str(env.python), "-c", script, str(path)], capture_output=True, text=True, timeout=300
    )
    assert made.returncode == 0, made.stderr[-2000:]
    return path


def _convert(source: Path, out: Path, *args: str) -> tuple[int, dict, str]:
    done = subprocess.run(
        [sys.executable, "-m", "tflkit", "convert", str(source), "-o", str(out), "--json", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, report, done.stderr


def _signature_names(path: Path) -> tuple[list[str], list[str]]:
    (signature,) = ir.load(path.read_bytes()).signatures
    return sorted(signature.inputs), sorted(signature.outputs)


@pytest.mark.parametrize("route", ["onnx2tf", "onnx2torch"])
def test_int64_bool_and_external_data_on_every_route(route: str, tmp_path: Path) -> None:
    """Once exit 3 ("Got value of type NOTYPE but expected type INT64"); now each route
    converts exactly, keeps the ONNX names, and says when it changed an input's type."""
    source = _build(TEXT_MODEL, tmp_path / "text" / "model.onnx")
    assert (source.parent / "model.onnx.data").is_file()
    out = tmp_path / f"{route}.tflite"
    code, report, err = _convert(source, out, "--route", route)
    assert code == 0, err
    assert report["cpu_vs_reference_max_abs"] == {"logits": 0.0}
    assert _signature_names(out) == (["attention_mask", "input_ids"], ["logits"])
    types = {i["name"]: i["dtype"] for i in report["inputs"]}
    assert types["attention_mask"] == "bool"
    if types["input_ids"] != "int64":
        assert any("input input_ids: int32 in the .tflite" in n for n in report["notes"])


def test_allowzero_reshape_and_output_names_on_the_second_route(tmp_path: Path) -> None:
    source = _build(ALLOWZERO_MODEL, tmp_path / "allowzero.onnx")
    out = tmp_path / "rz.tflite"
    code, report, err = _convert(source, out, "--route", "onnx2torch")
    assert code == 0, err
    assert any("allowzero=1 -> 0 on 1 node" in step for step in report["preparation"])
    assert _signature_names(out) == (["x"], ["flat", "gate"])
    assert max(report["cpu_vs_reference_max_abs"].values()) < 1e-6


def test_nhwc_space_to_depth_converts(tmp_path: Path) -> None:
    """onnx2tf keeps the channels-last input as is (the graph moves it itself); onnx2torch has
    a SpaceToDepth converter: both convert it exactly."""
    source = _build(SPACE_TO_DEPTH_MODEL, tmp_path / "s2d.onnx")
    for route in ("onnx2tf", "onnx2torch"):
        out = tmp_path / f"{route}.tflite"
        code, report, err = _convert(
            source, out, "--route", route, "--input-shape", "image=1,16,16,3"
        )
        assert code == 0, (route, err)
        assert report["inputs"][0]["shape"] == [1, 16, 16, 3]
        assert report["cpu_vs_reference_max_abs"]["features"] < 1e-5


def test_converter_option_values_reach_onnx2tf(tmp_path: Path) -> None:
    source = _build(ALLOWZERO_MODEL, tmp_path / "allowzero.onnx")
    keep = "keep_ncw_or_nchw_or_ncdhw_input_names=x"
    code, report, err = _convert(
        source, tmp_path / "a.tflite", "--route", "onnx2tf", "--converter-option", keep
    )
    assert code == 0, err
    assert report["inputs"][0]["shape"] == [1, 4, 6]  # not permuted to 1x6x4
    code, _, err = _convert(
        source, tmp_path / "b.tflite", "--converter-option", "keep_nchw_input_names=x"
    )
    assert code == 2
    (line,) = err.strip().splitlines()[-1:]
    assert "not an onnx2tf option" in line and "did you mean" in line, err


def test_a_slow_route_is_cut_by_auto(tmp_path: Path, monkeypatch, capsys) -> None:
    """With the budget shrunk to 2 s (and a progress line every second), ``auto`` cuts onnx2tf
    in one line and the second route converts."""
    from tflkit.converters import _route_clock
    from tflkit.converters.api import convert

    monkeypatch.setattr(_route_clock, "FLOOR_S", 0.0)
    monkeypatch.setattr(_route_clock, "BASE_S", 2.0)
    monkeypatch.setattr(_route_clock, "PROGRESS_S", 1.0)
    source = _build(ALLOWZERO_MODEL, tmp_path / "allowzero.onnx")
    report = convert(source, tmp_path / "slow.tflite")
    err = capsys.readouterr().err
    assert "tflkit: onnx2tf converting: 1 s" in err
    (cut,) = [line for line in err.splitlines() if "cut after" in line]
    assert cut.endswith("trying the next route"), cut
    assert [a["route"] for a in report.attempts] == ["onnx2tf", "onnx2torch"]
    assert "cut after 2 s" in report.attempts[0]["error"]
    assert report.converter.startswith("onnx2torch")


def test_int8_quantization_of_a_signatureless_conversion(tmp_path: Path) -> None:
    """The quantizer works by signature: a conversion without one gets ``serving_default``
    (the tensors by name) and is quantized."""
    from tflkit.converters.base import ConvertOptions
    from tflkit.converters.foreign import _quantized
    from tflkit.report.convert_report import ConvertReport

    source = _build(ALLOWZERO_MODEL, tmp_path / "allowzero.onnx")
    converted = tmp_path / "float.tflite"
    code, _, err = _convert(source, converted, "--route", "onnx2tf")
    assert code == 0, err
    model = ir.load(converted.read_bytes())
    model.signatures = []
    (x,) = model.main.inputs
    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "rep.npz", **{x.name: rng.normal(size=(8, *x.shape[1:])).astype(np.float32)}
    )
    options = ConvertOptions(quantize="int8", representative=tmp_path / "rep.npz").resolved()
    report = ConvertReport(source="", kind="onnx", source_sha256="", output="", options={})
    work = tmp_path / "work"
    work.mkdir()
    quantized = ir.load(_quantized(ir.dumps(model), options, report, work))
    assert [s.key for s in quantized.signatures] == ["serving_default"]
    assert any(op.type == "QUANTIZE" for op in quantized.main.ops)
    assert any("had no signature" in note for note in report.notes), report.notes


@pytest.mark.parametrize("data", ["images", "npz"])
def test_int8_of_a_detector_of_any_image_size(tmp_path: Path, data: str) -> None:
    """A detector whose ONNX input is ``[1, 3, h, w]``: converted at ``--input-shape`` and
    quantized to int8 on an image folder of other sizes (the calibration images are resized to
    the model's input) or on an ``.npz`` of ``[N, 1, 3, h, w]`` samples in the source's layout
    (once dropped after its move channels-last: XNNPack failed to reshape on the NCHW feed), it
    takes int8 end to end and keeps the detector's output shape."""
    from PIL import Image

    source = _build(DETECTOR_MODEL, tmp_path / "det.onnx")
    rng = np.random.default_rng(1)
    images = tmp_path / "images"
    if data == "npz":
        images = tmp_path / "samples.npz"
        np.savez(images, x=rng.random((4, 1, 3, 320, 320)).astype(np.float32))
    else:
        images.mkdir()
        for i in range(4):
            pixels = (rng.random((480 + 16 * i, 640, 3)) * 255).astype(np.uint8)
            Image.fromarray(pixels).save(images / f"{i}.png")
    out = tmp_path / "det.tflite"
    args = ("--input-shape", "x=1,3,320,320", "--quantize", "int8", "--representative", images)
    code, report, err = _convert(source, out, *map(str, args))
    assert code == 0, err
    model = ir.load(out.read_bytes())
    assert any(op.type == "QUANTIZE" for op in model.main.ops)
    assert report["inputs"][0]["shape"] == [1, 320, 320, 3]
    assert [list(t.shape) for t in model.main.outputs] == [[1, 160, 160, 1]]
