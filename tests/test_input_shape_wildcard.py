"""``--input-shape '*=N'``: every dynamic dimension fixed at once, in every command, and fix
hints that say so once.

The model is the shape of a speech-quality model users ship: 85 rank-1 inputs of dynamic length
(``[-1]``, stored as ``[1]``), each sized through SHAPE arithmetic into a RESHAPE (so every RESHAPE
is rejected for a dynamic shape and every op's fix names the inputs). Before the wildcard,
``check --all`` repeated 85 ``--input-shape`` flags in each op's fix (20,240 lines, 2.4 MB).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tflkit import ir
from tflkit.cli.main import EXIT_OK, main
from tflkit.converters import _input_shapes
from tflkit.errors import UsageError
from tflkit.ir.builder import OpBuilder
from tflkit.ir.shapes import WILDCARD, by_feed_name, parse_input_shapes
from tflkit.rewriter.example import options

INPUTS = 85


def many_dynamic_inputs(count: int = INPUTS) -> ir.Model:
    """``count`` rank-1 dynamic inputs, each scaled after a RESHAPE sized by SHAPE arithmetic,
    summed into one score."""
    model = ir.Model(description=f"{count} dynamic rank-1 inputs")
    graph = model.add_subgraph("main")
    xs = [
        graph.new_tensor(f"feature_{i}", (1,), np.float32, shape_signature=(-1,))
        for i in range(count)
    ]
    b = OpBuilder(graph, prefix="m")
    shape_options = options("ShapeOptions", outType=ir.schema.fb.TensorType.INT32)
    total = None
    for x in xs:
        size = b.SHAPE(x, shape=(1,), dtype=np.int32, options=shape_options, name="shape")
        size = b.MAXIMUM(size, np.array([1], np.int32), name="size")
        y = b.RESHAPE(x, size, shape=(1,), name="flat")
        y = b.MUL(y, np.array(2.0, np.float32), options=options("MulOptions"), name="scale")
        y.shape_signature = (-1,)
        if total is not None:
            total = b.ADD(total, y, options=options("AddOptions"), name="sum")
            total.shape_signature = (-1,)
        else:
            total = y
    graph.inputs, graph.outputs = xs, [total]
    signature = ir.SignatureDef("serving_default", graph, {x.name: x for x in xs}, {"score": total})
    model.signatures.append(signature)
    return model


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    path = tmp_path / "many.tflite"
    path.write_bytes(ir.dumps(many_dynamic_inputs()))
    return path


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_parser_and_resolution() -> None:
    assert parse_input_shapes(["*=1"]) == {WILDCARD: (1,)}
    with pytest.raises(UsageError, match="takes one number"):
        parse_input_shapes(["*=1,2"])
    model = many_dynamic_inputs(3)
    assert by_feed_name(model, {WILDCARD: (4,)}) == {f"feature_{i}": (4,) for i in range(3)}
    # a named input keeps its own shape; the wildcard takes the others
    named = by_feed_name(model, {"feature_1": (7,), WILDCARD: (4,)})
    assert named == {"feature_1": (7,), "feature_0": (4,), "feature_2": (4,)}


def test_converter_workers_read_the_wildcard() -> None:
    named, fill = _input_shapes.given_shapes({"input_shapes": {"*": [1], "ids": [1, 8]}})
    assert named == {"ids": [1, 8]} and fill == 1
    assert _input_shapes.filled([1, None, None], fill) == [1, 1, 1]
    assert _input_shapes.filled([None, 3], None) == [None, 3]


def test_check_says_it_once(model_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, report = _json(capsys, "check", str(model_path))
    hints = {op["fix"]["summary"] for op in report["ops"] if op.get("fix")}
    shape_hints = [h for h in hints if "--input-shape" in h]
    assert shape_hints and all("'*=1'" in h and "feature_5=" not in h for h in shape_hints)
    assert main(["check", "--all", str(model_path)]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert not any("feature_5=" in line for line in lines)  # no op lists every input's flag
    assert len(lines) < 3000  # 20,240 before (85 flags in each op's fix)


def test_every_command_takes_the_wildcard(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _json(capsys, "check", str(model_path), "--input-shape", "*=1")
    assert code == EXIT_OK and report["input_shapes"] == {"*": [1]}
    assert not any(i["code"] == "DYNAMIC_INPUT" for i in report["issues"])
    out = tmp_path / "fixed.tflite"
    code, report = _json(capsys, "rewrite", str(model_path), "-o", str(out), "--input-shape", "*=1")
    assert code == EXIT_OK and report["verification"]["ok"], report
    assert report["static_after"]["gpu_ops"] == report["static_after"]["total_ops"]
    assert not any(t.is_dynamic for t in ir.load(out).main.inputs)
    code, report = _json(
        capsys, "validate", str(model_path), "--runner", "cpu", "-n", "1", "--input-shape", "*=3"
    )
    assert report["runners"][0]["status"] == "ok", report["runners"][0]
    assert main(["rewrite", str(model_path), "-o", str(out), "--force"]) == EXIT_OK
    note = capsys.readouterr().out
    assert "feature_0, feature_1 and 83 more" in note and "'*=1'" in note
