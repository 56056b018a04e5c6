"""Routes chosen by what they can convert: a model holding an op no route has is refused by both
from their op tables, before either converter starts or the second route's environment is built,
and the one line names the op and both converters."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.conftest_corpus import cache_root

#: One node of an op no converter knows (an exporter's own domain), between two Relus.
MODEL = """
import sys
import onnx
from onnx import TensorProto, helper
f32 = TensorProto.FLOAT
nodes = [
    helper.make_node("Relu", ["x"], ["a"]),
    helper.make_node("Frobnicate", ["a"], ["b"], domain="com.example"),
    helper.make_node("Relu", ["b"], ["y"]),
]
graph = helper.make_graph(
    nodes, "custom", [helper.make_tensor_value_info("x", f32, [1, 8])],
    [helper.make_tensor_value_info("y", f32, [1, 8])],
)
opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
model = helper.make_model(graph, opset_imports=opsets)
model.ir_version = 8
onnx.save(model, sys.argv[1])
"""


def test_no_route_is_started_for_an_op_none_has(tmp_path: Path) -> None:
    from tflkit.converters.envs import ensure_env

    env = ensure_env("onnx", root=cache_root() / "converters")
    source = tmp_path / "custom.onnx"
    made = subprocess.run([str(env.python), "-c", MODEL, str(source)], capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "tflkit", "convert", str(source), "-o", str(tmp_path / "m.tflite")],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    seconds = time.monotonic() - start
    assert done.returncode != 0 and "Traceback" not in done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "com.example Frobnicate" in line and "onnx2tf" in line and "onnx2torch" in line, line
    assert "onnx2torch converting" not in done.stderr  # its converter never started
    assert "building the" not in done.stderr  # nor its environment
    assert seconds < 120, seconds
    assert "onnx2tf converting" not in done.stderr  # onnx2tf's table refused it in the prepare
    # no converter started, so --verbose has no converter's log to show (a converter that ran
    # and failed shows its own: test_convert_foreign's onnx2tf refusal)
    verbose = subprocess.run(
        [sys.executable, "-m", "tflkit", "--verbose", "convert", str(source), "-o",
         str(tmp_path / "m.tflite")],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert "the converter's log" not in verbose.stderr
    assert verbose.stderr.strip().splitlines()[-1] == line
    assert "\x1b[" not in verbose.stderr
