"""The ONNX preparation pass (pins, static shapes, onnxsim, If folding, names) and ONNX
quantization through ai-edge-quantizer, end to end through ``tflkit convert``.

The ONNX files are written with onnx.helper by the ONNX converter environment's interpreter
(onnx is not in tflkit's venv). The converters run in the environments tflkit provisions, here
in the test cache.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest_corpus import cache_root
from tflkit.converters._route_clock import is_progress

#: An If on a sample-rate input whose then-branch pads with a top-level initializer (what
#: onnx2tf 1.29 fails on with ``KeyError: 'pads'``) and whose else-branch scales.
BRANCHING_MODEL = """
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
f32 = TensorProto.FLOAT
then_g = helper.make_graph(
    [helper.make_node("Pad", ["x", "pads"], ["y_then"], mode="reflect")], "then", [],
    [helper.make_tensor_value_info("y_then", f32, ["N", "W"])],
)
else_g = helper.make_graph(
    [helper.make_node("Mul", ["x", "three"], ["y_else"])], "else", [],
    [helper.make_tensor_value_info("y_else", f32, ["N", "W"])],
)
rate = numpy_helper.from_array(np.array(16000, np.int64))
nodes = [
    helper.make_node("Constant", [], ["rate"], value=rate),
    helper.make_node("Equal", ["sr", "rate"], ["cond"]),
    helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
    helper.make_node("Relu", ["y"], ["out"]),
]
graph = helper.make_graph(
    nodes, "branching",
    [helper.make_tensor_value_info("x", f32, ["N", 64]),
     helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
    [helper.make_tensor_value_info("out", f32, ["N", "W"])],
    initializer=[
        numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads"),
        numpy_helper.from_array(np.array(3.0, np.float32), "three"),
    ],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8  # what onnxruntime 1.23 and onnxsim read
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
"""


@pytest.fixture(scope="module")
def branching(tmp_path_factory) -> Path:
    from tflkit.converters.envs import ensure_env

    env = ensure_env("onnx", root=cache_root() / "converters")
    source = tmp_path_factory.mktemp("branching") / "branching.onnx"
    made = subprocess.run(
        [str(env.python), "-c", BRANCHING_MODEL, str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    return source


def _tflkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tflkit", *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.mark.parametrize(("rate", "branch"), [(16000, "Pad"), (8000, "Mul")])
def test_pinned_input_folds_the_branch(branching, tmp_path, rate, branch):
    """``--input-value sr=R`` makes the If's condition constant: the branch R takes replaces the
    If, each step is reported, the .tflite matches ONNX Runtime fed the same pin exactly, and the
    user's file is untouched."""
    before = hashlib.sha256(branching.read_bytes()).hexdigest()
    out = tmp_path / "m.tflite"
    done = _tflkit(
        "convert", str(branching), "-o", str(out), "--input-value", f"sr={rate}", "--json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    steps = report["preparation"]
    assert f"pinned sr = {rate} (int64)" in steps
    assert "input x: 1x64 (was ?x64)" in steps
    assert "folded 1 of 1 If nodes (condition constant)" in steps
    assert report["attempts"] == [
        {"route": "onnx2tf", "error": None, "seconds": report["attempts"][0]["seconds"]}
    ]
    assert report["cpu_vs_reference_max_abs"] == {"out": 0.0}
    assert [i["name"] for i in report["inputs"]] == ["x"]  # the pinned input is a constant now
    from tflkit import ir

    ops = [op.type for op in ir.load(out).main.ops]
    assert ("PAD" in ops or "MIRROR_PAD" in ops) if branch == "Pad" else "MUL" in ops, ops
    assert hashlib.sha256(branching.read_bytes()).hexdigest() == before


def test_branch_on_an_input_names_the_pin_to_pass(branching, tmp_path):
    """Unpinned, onnx2tf fails inside the If; the one line says which input to pin."""
    out = tmp_path / "m.tflite"
    done = _tflkit("convert", str(branching), "-o", str(out), "--route", "onnx2tf")
    assert done.returncode == 2, done.stderr
    (line,) = [ln for ln in done.stderr.strip().splitlines() if not is_progress(ln)]
    assert line.startswith("tflkit: error: no route converted the model (onnx2tf): onnx2tf: ")
    assert "KeyError: 'pads'" in line
    assert line.endswith(
        "the model branches (If) on sr: pin the value the app feeds (--input-value sr=VALUE) "
        "and the branch it takes replaces the If"
    )
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input-value", "sr"], "--input-value takes NAME=V[,V...] with numbers, got 'sr'"),
        (["--input-value", "sr=fast"], "--input-value takes NAME=V[,V...] with numbers"),
        (["--input-value", "rate=1"], "--input-value names ['rate'] are not ONNX inputs"),
        (["--route", "tf"], "--route takes auto, onnx2tf, onnx2torch, not 'tf'"),
    ],
)
def test_bad_pins_and_routes_are_usage_errors(branching, tmp_path, args, message):
    done = _tflkit("convert", str(branching), "-o", str(tmp_path / "m.tflite"), *args)
    assert done.returncode == 2, done.stderr
    (line,) = [ln for ln in done.stderr.strip().splitlines() if not is_progress(ln)]
    assert message in line, line


def test_onnx_only_options_refused_for_pytorch(tmp_path):
    program = tmp_path / "m.pt2"
    program.write_bytes(b"never read")
    done = _tflkit("convert", str(program), "--input-value", "sr=1")
    assert done.returncode == 2
    assert "--input-value: only for ONNX sources, not PyTorch" in done.stderr


def test_calibration_takes_channels_first_arrays_for_a_channels_last_model():
    """An ONNX model's calibration data (NCHW) fits the NHWC .tflite onnx2tf made."""
    from tflkit.converters.calibration import _channels_last

    nchw = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    moved = _channels_last(nchw, (1, 4, 5, 3))
    assert moved.shape == (2, 4, 5, 3) and moved[1, 2, 3, 0] == nchw[1, 0, 2, 3]
    assert _channels_last(np.zeros((7, 4, 5, 3)), (1, 4, 5, 3)).shape == (7, 4, 5, 3)
    assert _channels_last(np.zeros((7, 64)), (1, 64)).shape == (7, 64)


@pytest.mark.parametrize(
    "layout", ["N,C,H,W", "N,1,C,H,W", "N,H,W,C", "N,1,H,W,C", "1,C,H,W", "1,H,W,C"]
)
def test_every_calibration_layout_reaches_the_model_channels_last(tmp_path, layout):
    """An ``.npz`` of samples in the source's layout or the model's, with or without each
    sample's batch axis, gives feeds of the model's own shape, each value where it belongs
    (``[N, 1, C, H, W]`` was moved channels-last and then dropped: the quantizer's XNNPack
    failed to reshape on the NCHW feed)."""
    from tflkit.converters.calibration import InputSpec, calibration_feeds

    spec = InputSpec("x", (1, 4, 5, 3), "float32")
    nhwc = np.arange(2 * 4 * 5 * 3, dtype=np.float32).reshape(2, 4, 5, 3)
    nchw = np.moveaxis(nhwc, -1, 1)
    array = {
        "N,H,W,C": nhwc, "N,C,H,W": nchw, "N,1,H,W,C": nhwc[:, None], "N,1,C,H,W": nchw[:, None],
        "1,H,W,C": nhwc[:1], "1,C,H,W": nchw[:1],
    }[layout]  # fmt: skip
    if layout.startswith("1,"):
        nhwc = nhwc[:1]
    np.savez(tmp_path / "data.npz", x=array)
    feeds = calibration_feeds(tmp_path / "data.npz", [spec], steps=8)
    assert len(feeds) == len(nhwc)
    for feed, sample in zip(feeds, nhwc, strict=True):
        assert feed["x"].shape == spec.shape
        np.testing.assert_array_equal(feed["x"][0], sample)
