"""Constant folding to the fixed point (``fold_constants``) on an audio front end, and its guards.

The front end is the pattern TensorFlow writes for framing audio of a dynamic length (a keyword
spotter's preprocessing): SHAPE of the input -> STRIDED_SLICE / GATHER -> REDUCE_PROD ->
FLOOR_DIV -> PACK -> RESHAPE into frames, and SLICE sizes from CONCATENATION / SUB on the same
numbers. Once ``--input-shape`` fixes the input, all of that is constant: ``rewrite`` must fold
it in one run (a second run has nothing to do), keep the outputs bit-identical and leave SLICEs
with constant sizes that the GPU takes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest_corpus import build_with_script, cache_root, tensorflow_version
from tests.needs import unavailable
from tflkit import ir
from tflkit.cli.main import main
from tflkit.compat import static
from tflkit.delegates.litert_cpu import computed_shapes
from tflkit.ir.builder import OpBuilder
from tflkit.ir.shapes import fix_input_shapes
from tflkit.rewriter.example import graph_model, i32, options, scale
from tflkit.rewriter.passes import run_passes
from tflkit.rewriter.rules import catalog
from tflkit.rewriter.rules.constant import FOLD_MAX_BYTES, FoldConstants
from tflkit.rewriter.run import checker_gate, rewrite_model

SAMPLES, FRAME = 4096, 256
INPUT = "audio_preproc_input"
SHAPE_SPEC = f"{INPUT}=1,{SAMPLES}"
#: Shape arithmetic that must be gone after the rewrite.
SHAPE_OPS = {"SHAPE", "STRIDED_SLICE", "GATHER", "REDUCE_PROD", "FLOOR_DIV", "PACK", "SUB"}
SHAPE_OPS |= {"CONCATENATION", "EXPAND_DIMS"}


def audio_front_end() -> ir.Model:
    """Framing of a dynamic-length waveform, sizes computed from its SHAPE (19 ops)."""
    model = ir.Model(description="audio front end (tflkit test)")
    g = model.add_subgraph("main")
    x = g.new_tensor(INPUT, (1, SAMPLES), np.float32, shape_signature=(-1, SAMPLES))
    b = OpBuilder(g, prefix="fe")
    i32s = np.int32

    def dynamic(t: ir.Tensor, *dims: int) -> ir.Tensor:
        t.shape_signature = dims
        return t

    y = dynamic(scale(b, x), -1, SAMPLES)
    s = b.SHAPE(y, shape=(2,), dtype=i32s, options=options("ShapeOptions", outType=2))
    batch = b.STRIDED_SLICE(
        s, i32(0), i32(1), i32(1), shape=(), dtype=i32s,
        options=options("StridedSliceOptions", shrinkAxisMask=1), name="batch",
    )  # fmt: skip
    rest = b.STRIDED_SLICE(
        s, i32(1), i32(2), i32(1), shape=(1,), dtype=i32s,
        options=options("StridedSliceOptions"), name="rest",
    )  # fmt: skip
    numel = b.REDUCE_PROD(
        rest, i32(0), shape=(), dtype=i32s, options=options("ReducerOptions"), name="numel"
    )
    frames = b.FLOOR_DIV(numel, np.array(FRAME, i32s), shape=(), name="frames")
    newshape = b.PACK(
        batch, frames, np.array(FRAME, i32s), shape=(3,), dtype=i32s,
        options=options("PackOptions", axis=0, valuesCount=3), name="newshape",
    )  # fmt: skip
    count = SAMPLES // FRAME
    framed = dynamic(b.RESHAPE(y, newshape, shape=(1, count, FRAME)), -1, -1, FRAME)
    keep = b.SUB(frames, np.array(1, i32s), shape=(), options=options("SubOptions"), name="keep")
    width = b.GATHER(s, i32(1), shape=(1,), options=options("GatherOptions"), name="width")
    half = b.FLOOR_DIV(width, np.array(2 * FRAME, i32s), shape=(1,), name="half")
    bdim = b.EXPAND_DIMS(batch, np.array(0, i32s), shape=(1,), dtype=i32s, name="bdim")
    kdim = b.RESHAPE(keep, i32(1), shape=(1,), dtype=i32s, name="kdim")
    axis0 = options("ConcatenationOptions", axis=0)
    size = b.CONCATENATION(bdim, kdim, i32(FRAME), shape=(3,), options=axis0, name="size")
    kept = b.SLICE(framed, i32(0, 0, 0), size, shape=(1, count - 1, FRAME), name="kept")
    size2 = b.CONCATENATION(bdim, half, i32(FRAME), shape=(3,), options=axis0, name="size2")
    halved = b.SLICE(framed, i32(0, 1, 0), size2, shape=(1, count // 2, FRAME), name="half")
    outs = [
        dynamic(scale(b, dynamic(kept, -1, -1, FRAME), 2.0), -1, -1, FRAME),
        dynamic(scale(b, dynamic(halved, -1, -1, FRAME), 3.0), -1, -1, FRAME),
    ]
    g.inputs, g.outputs = [x], outs
    model.signatures.append(
        ir.SignatureDef("serving_default", g, {INPUT: x}, {"kept": outs[0], "half": outs[1]})
    )
    return model


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture
def front_end(tmp_path: Path) -> Path:
    path = tmp_path / "front_end.tflite"
    ir.save(audio_front_end(), path)
    return path


def test_check_names_a_fix_for_slices_sized_by_shape_arithmetic(
    front_end: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _json(capsys, "check", str(front_end), "--input-shape", SHAPE_SPEC)
    assert code == 0
    slices = [op for op in report["ops"] if op["type"] == "SLICE"]
    assert len(slices) == 2 and all(not op["on_gpu"] for op in slices)
    assert {op["fix"]["rule"] for op in slices} == {"fold_shape_inputs"}
    # the shrinking STRIDED_SLICE of the SHAPE is shape arithmetic: folded, not decomposed
    batch = next(op for op in report["ops"] if op["type"] == "STRIDED_SLICE" and not op["on_gpu"])
    assert batch["fix"]["rule"] == "fold_constants"


def test_check_names_fold_constants_for_an_op_of_constants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """REDUCE_PROD with 0 runtime inputs (the issue's "no fix known")."""
    path = tmp_path / "example.tflite"
    ir.save(FoldConstants().examples()[0].build(), path)
    code, report = _json(capsys, "check", str(path))
    assert code == 0
    (reduce,) = [op for op in report["ops"] if op["type"] == "REDUCE_PROD"]
    assert not reduce["on_gpu"] and reduce["fix"]["rule"] == "fold_constants"


def test_rewrite_folds_the_front_end_in_one_run(
    front_end: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "folded.tflite"
    code, report = _json(
        capsys, "rewrite", str(front_end), "-o", str(out), "--input-shape", SHAPE_SPEC
    )
    assert code == 0 and out.exists()
    model = ir.load(out.read_bytes())
    types = [op.type for op in model.main.ops]
    assert not SHAPE_OPS & set(types), types
    assert sorted(types) == ["MUL", "MUL", "MUL", "RESHAPE", "SLICE", "SLICE"]
    for op in model.main.ops:
        if op.type in ("SLICE", "RESHAPE"):
            assert all(t.is_constant for t in op.inputs[1:]), op
    assert [list(op.inputs[2].data) for op in model.main.ops if op.type == "SLICE"] == [
        [1, SAMPLES // FRAME - 1, FRAME],
        [1, SAMPLES // FRAME // 2, FRAME],
    ]
    fired = {f["rule"] for f in report["passes"]["fired"]} if "passes" in report else None
    outcome = rewrite_model(front_end.read_bytes(), input_shapes={INPUT: [1, SAMPLES]})
    assert {f.rule for f in outcome.passes.fired} >= {"fold_shape", "fold_constants"}
    assert fired is None or fired == {f.rule for f in outcome.passes.fired}
    assert outcome.verification is not None and outcome.verification.ok
    assert all(o.identical for o in outcome.verification.outputs)
    # the checker takes every op of the result, the SLICEs included
    verdicts = static.op_verdicts(model, "litert-gpu")
    assert [v.op_type for v in verdicts if not v.ok] == []
    code, checked = _json(capsys, "check", str(out))
    assert code == 0 and checked["gpu_ops"] == checked["total_ops"] == 6
    assert all(op["on_gpu"] for op in checked["ops"] if op["type"] == "SLICE")
    # the fixed point: a second rewrite has nothing to do and writes nothing
    again = tmp_path / "again.tflite"
    code, _second = _json(capsys, "rewrite", str(out), "-o", str(again))
    assert code == 0 and not again.exists()
    assert rewrite_model(out.read_bytes(), check=False).passes.fired == []


# --- guards -----------------------------------------------------------------------------------


def _first(model: ir.Model, op_type: str) -> ir.Op:
    return next(op for op in model.main.ops if op.type == op_type)


def test_output_larger_than_the_bound_is_not_folded() -> None:
    """TILE of a small constant into 8 KiB: folding would add 8 KiB for 256 bytes."""

    def body(b: OpBuilder, x):
        row = np.arange(64, dtype=np.float32).reshape(1, 64)
        table = b.TILE(row, i32(32, 1), shape=(32, 64), name="table")
        return b.ADD(scale(b, x), table, options=options("AddOptions"))

    model = graph_model([((32, 64), np.float32)], body)
    tile = _first(model, "TILE")
    rule = FoldConstants()
    assert rule.pattern(tile)
    assert tile.outputs[0].nbytes > FOLD_MAX_BYTES
    assert "grow the model" in (rule.match(tile).reason or "")
    result = run_passes(model, list(catalog().defaults()), gate=checker_gate("litert-gpu"))
    assert "fold_constants" not in {f.rule for f in result.fired}
    assert result.why_not("fold_constants")


def test_large_output_folds_when_it_frees_as_much() -> None:
    """TRANSPOSE of 16 KiB of weights read by nothing else: the model does not grow."""
    weights = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)

    def body(b: OpBuilder, x):
        w = b.TRANSPOSE(weights, i32(1, 0), name="w_t")
        fc = b.FULLY_CONNECTED(scale(b, x), w, None, shape=(1, 64),
                               options=options("FullyConnectedOptions"))  # fmt: skip
        return scale(b, fc)

    model = graph_model([((1, 64), np.float32)], body)
    before = ir.dumps(model)
    assert FoldConstants().match(_first(model, "TRANSPOSE"))
    result = run_passes(model, list(catalog().defaults()), gate=checker_gate("litert-gpu"))
    assert [f.rule for f in result.fired] == ["fold_constants"]
    assert "TRANSPOSE" not in {op.type for op in model.main.ops}
    after = ir.dumps(model)
    assert len(after) <= len(before) + 1024
    from tflkit.rewriter.contract import EXACT
    from tflkit.rewriter.verify import verify

    verdict = verify(before, after, EXACT, seeds=(0, 1))
    assert verdict.ok and all(o.identical for o in verdict.outputs)


@pytest.mark.parametrize(
    "op_type", ["RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL", "DEQUANTIZE"]
)
def test_random_and_weight_ops_are_never_folded(op_type: str) -> None:
    def body(b: OpBuilder, x):
        if op_type == "MULTINOMIAL":
            made = b.MULTINOMIAL(np.zeros((1, 4), np.float32), np.array(4, np.int32),
                                 shape=(1, 4), dtype=np.int32)  # fmt: skip
            return scale(b, x), made
        if op_type == "DEQUANTIZE":
            w = b.DEQUANTIZE(np.ones((2, 3), np.float16), shape=(2, 3), dtype=np.float32)
            return b.ADD(scale(b, x), w, options=options("AddOptions"))
        noise = b.op(op_type, [i32(2, 3)], shape=(2, 3), dtype=np.float32)
        return b.ADD(scale(b, x), noise, options=options("AddOptions"))

    model = graph_model([((2, 3), np.float32)], body)
    op = _first(model, op_type)
    assert not FoldConstants().pattern(op)


def test_graph_outputs_and_control_flow_bodies_are_not_folded() -> None:
    def body(b: OpBuilder, x):
        return scale(b, x), b.ADD(i32(1, 2), i32(3, 4), options=options("AddOptions"))

    model = graph_model([((2, 3), np.float32)], body)
    rule = FoldConstants()
    add = _first(model, "ADD")
    assert rule.pattern(add) and "graph output" in (rule.match(add).reason or "")
    branch = model.add_subgraph("branch")
    bb = OpBuilder(branch, prefix="br")
    inner = bb.ADD(i32(1, 2), i32(3, 4), options=options("AddOptions"))
    branch.outputs = [bb.MUL(inner, i32(2, 2), options=options("MulOptions"))]
    assert "control-flow body" in (rule.match(branch.ops[0]).reason or "")


def test_variable_inputs_are_not_folded() -> None:
    def body(b: OpBuilder, x):
        state = b.tensor((2, 3), np.float32, "state", is_variable=True)
        state.buffer = b.subgraph.model.intern_buffer(np.zeros((2, 3), np.float32))
        return b.ADD(scale(b, x), b.ADD(state, np.ones((2, 3), np.float32),
                                        options=options("AddOptions")),
                     options=options("AddOptions"))  # fmt: skip

    model = graph_model([((2, 3), np.float32)], body)
    inner = next(op for op in model.main.ops if op.type == "ADD" and op.inputs[0].is_variable)
    assert not FoldConstants().pattern(inner)


# --- on the accelerator -----------------------------------------------------------------------


def _on_gpu(data: bytes) -> int:
    """Ops the accelerator runs (a graph that fails to compile runs none there)."""
    from tflkit.gpu.probe import probe
    from tflkit.report.rewrite_report import Residency

    residency = Residency.from_probe(probe(data, locate_crash=False), len(ir.load(data).main.ops))
    return residency.ops_on_gpu or 0 if residency.status == "ok" else 0


@pytest.mark.gpu
def test_accelerator_takes_more_ops_after_folding(gpu: str) -> None:
    """At the fixed input shape the original fails to compile as a whole (a RESHAPE shape from
    PACK): no op on the GPU; after the rewrite every op is."""
    model = audio_front_end()
    fix_input_shapes(model, {INPUT: [1, SAMPLES]}, infer=computed_shapes)
    outcome = rewrite_model(ir.dumps(audio_front_end()), input_shapes={INPUT: [1, SAMPLES]})
    before, after = _on_gpu(ir.dumps(model)), _on_gpu(outcome.rewritten)
    print(f"\nops on GPU: before {before}/19, after {after}/{len(outcome.model.main.ops)}")
    assert before < after == len(outcome.model.main.ops) == 6


# --- the same pattern as TensorFlow converts it -----------------------------------------------

TF_SAMPLES, TF_FRAME = 16000, 400


def _build_tf_front_end(out: Path) -> None:
    """Run as a script (TensorFlow stays out of the test process): ``front_end.tflite``, a
    dynamic-batch waveform framed by SHAPE arithmetic, a projection, mean and softmax."""
    import tensorflow as tf

    class FrontEnd(tf.Module):
        def __init__(self) -> None:
            rng = np.random.default_rng(0)
            self.w = tf.constant(rng.standard_normal((TF_FRAME, 8)).astype(np.float32) * 0.05)

        @tf.function(input_signature=[tf.TensorSpec([None, TF_SAMPLES], tf.float32, name=INPUT)])
        def __call__(self, x):
            shape = tf.shape(x)
            batch, count = shape[0], tf.reduce_prod(shape[1:]) // TF_FRAME
            framed = tf.reshape(x[:, : count * TF_FRAME], tf.stack([batch, count, TF_FRAME]))
            kept = tf.slice(framed, [0, 0, 0], tf.stack([batch, count - 1, TF_FRAME]))
            feats = tf.tensordot(kept, self.w, axes=[[2], [0]])
            return {"scores": tf.nn.softmax(tf.reduce_mean(feats, axis=1))}

    module = FrontEnd()
    function = module.__call__.get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], module)
    (out / "front_end.tflite").write_bytes(converter.convert())
    (out / "DONE").write_text("ok")


@pytest.fixture(scope="module")
def tf_front_end() -> Path:
    version = tensorflow_version()
    if version is None:
        unavailable("TensorFlow is not importable: pip install 'tflkit[convert]'")
    key = hashlib.sha256(Path(__file__).read_bytes() + version.encode()).hexdigest()[:12]
    out = build_with_script(
        Path(__file__),
        cache_root() / "fold" / f"front-end-{key}",
        done_marker="DONE",
        what="TensorFlow audio front end",
    )
    return out / "front_end.tflite"


def test_tensorflow_front_end_folds_in_one_run(
    tf_front_end: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tf_front_end.read_bytes()
    assert {"SHAPE", "REDUCE_PROD", "PACK", "SLICE"} <= {op.type for op in ir.load(data).main.ops}
    out = tmp_path / "folded.tflite"
    spec = f"{INPUT}=1,{TF_SAMPLES}"
    code, _ = _json(capsys, "rewrite", str(tf_front_end), "-o", str(out), "--input-shape", spec)
    assert code == 0 and out.exists()
    model = ir.load(out.read_bytes())
    types = {op.type for op in model.main.ops}
    assert not {"SHAPE", "REDUCE_PROD", "PACK", "GATHER"} & types, types
    for op in model.main.ops:  # what is left slices data, at constant bounds
        if op.type in ("SLICE", "STRIDED_SLICE", "RESHAPE"):
            assert not op.inputs[0].is_constant
            assert all(t.is_constant for t in op.inputs[1:]), op
    (slice_op,) = [op for op in model.main.ops if op.type == "SLICE"]
    assert slice_op.inputs[1].is_constant and slice_op.inputs[2].is_constant
    count = TF_SAMPLES // TF_FRAME
    assert list(slice_op.inputs[2].data) == [1, count - 1, TF_FRAME]
    outcome = rewrite_model(data, input_shapes={INPUT: [1, TF_SAMPLES]})
    assert outcome.verification is not None and outcome.verification.ok
    assert all(o.identical for o in outcome.verification.outputs)
    assert [v.op_type for v in static.op_verdicts(model, "litert-gpu") if not v.ok] == []
    again = tmp_path / "again.tflite"
    code, _ = _json(capsys, "rewrite", str(out), "-o", str(again))
    assert code == 0 and not again.exists()


@pytest.mark.gpu
def test_tensorflow_front_end_on_the_accelerator(tf_front_end: Path, gpu: str) -> None:
    model = ir.load(tf_front_end.read_bytes())
    fix_input_shapes(model, {INPUT: [1, TF_SAMPLES]}, infer=computed_shapes)
    outcome = rewrite_model(tf_front_end.read_bytes(), input_shapes={INPUT: [1, TF_SAMPLES]})
    before, after = _on_gpu(ir.dumps(model)), _on_gpu(outcome.rewritten)
    ops = len(outcome.model.main.ops)
    print(f"\nops on GPU: before {before}/{len(model.main.ops)}, after {after}/{ops}")
    assert before < after == ops


if __name__ == "__main__":
    _build_tf_front_end(Path(sys.argv[1]))
