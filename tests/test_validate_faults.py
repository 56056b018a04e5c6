"""Faults planted in real models are caught by the right runner and localized to their op.

The planting helpers are shared with ``bench/validate_faults.py`` (the full set, over the real
corpus); the tests run a representative slice:

- an fp16 overflow appended to a real model's output, in the two forms the issue measured
  (``x*k, +1, *1/k``: the software GPU overflows; ``x*k*1/k``: the software GPU merges the
  multiplies and hides it, the fp16 emulation does not);
- a rewritten copy with one perturbed weight, checked against the original ``.tflite``;
- a dropped quantization parameter (an activation's zero point), checked against the original.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tflkit import ir
from tflkit.compare.tolerances import NOISE_FACTOR
from tflkit.ir.builder import OpBuilder
from tflkit.ir.entry import entry_point
from tflkit.report.validate_report import ValidateReport
from tflkit.validation.inputs import make_input_sets
from tflkit.validation.localize import capture_cpu
from tflkit.validation.pipeline import ValidateOptions, validate

fb = ir.schema.fb
WEIGHT_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def _float_output(model: ir.Model) -> tuple[str, ir.Tensor]:
    _, _, _, outs = entry_point(model)
    for name, tensor in outs.items():
        if tensor.dtype is not None and np.dtype(tensor.dtype).kind == "f":
            return name, tensor
    raise ValueError("the model has no float output")


def plant_fp16_overflow(src: Path, dst: Path, *, peak: float, merged: bool) -> str:
    """Append ``y*a*b (+1) *1/b*1/a`` to the first float output; returns the output name of the
    ``*b`` MUL, whose output leaves fp16's range (4 x 65504 at the output's peak) while every
    constant and the ``*a`` product (half of 65504 at most) stay representable in fp16."""
    model = ir.load(src)
    _, out = _float_output(model)
    graph = out.subgraph
    assert graph is not None
    pre = min(60000.0, 0.5 * 65504.0 / max(peak, 1e-30))
    up = 4 * 65504.0 / (max(peak, 1e-30) * pre)
    if up > 60000.0:
        raise ValueError(f"output peak {peak:.3g} too small to overflow fp16 with fp16 constants")
    build = OpBuilder(graph, after=out.producer, prefix="planted")

    def mul(x: ir.Tensor, k: float, name: str) -> ir.Tensor:
        return build.MUL(x, np.array(k, np.float32), options=fb.MulOptionsT(), name=name)

    y = mul(mul(out, pre, "pre_scale"), up, "scale_up")
    planted = y.name
    if not merged:
        y = build.ADD(y, np.array(1.0, np.float32), options=fb.AddOptionsT(), name="plus_one")
    down = mul(mul(y, 1.0 / up, "scale_down"), 1.0 / pre, "unscale")
    graph.outputs = [down if t is out else t for t in graph.outputs]
    for signature in model.signatures:
        for key, tensor in signature.outputs.items():
            if tensor is out:
                signature.outputs[key] = down
    ir.save(model, dst)
    return planted


def _weight_constant(op: ir.Op) -> ir.Tensor | None:
    """The float constant holding ``op``'s bias (fp32, or fp16 behind a DEQUANTIZE).

    The bias, because a kernel weight can sit on a channel that is always zero (a dead ReLU),
    where scaling it changes no output.
    """
    weights = op.inputs[2] if len(op.inputs) > 2 else None
    if weights is None:
        return None
    if weights.producer is not None and weights.producer.type == "DEQUANTIZE":
        weights = weights.producer.inputs[0]
    if weights is None or not weights.is_constant or weights.dtype is None:
        return None
    return weights if np.dtype(weights.dtype).kind == "f" else None


def plant_weight(src: Path, dst: Path) -> str | None:
    """A copy where one bias of the middle conv/dense op grew by 10x the op's largest output
    (at least 1): the bias of its most active channel on a photograph/realistic input, so the
    change shows (a dead ReLU channel would hide it). Returns the op's output name (None: no
    float constant biases)."""
    model = ir.load(src)
    ops = [
        op
        for op in model.main.ops
        if op.type in WEIGHT_OPS
        and (constant := _weight_constant(op)) is not None
        and len(constant.consumers) == 1
    ]
    if not ops:
        return None
    op = ops[len(ops) // 2]
    constant = _weight_constant(op)
    assert constant is not None
    data = Path(src).read_bytes()
    _, _, inputs, _ = entry_point(model)
    feed = make_input_sets(model, count=1, kind="realistic").feeds[0]
    values = capture_cpu(data, model, feed, inputs)[op.outputs[0].index].astype(np.float64)
    channels = values.reshape(-1, values.shape[-1])
    bias = np.array(constant.data)
    if bias.shape != (channels.shape[1],):
        return None
    channel = int(np.argmax(channels.mean(axis=0)))
    bias[channel] += max(1.0, 10 * float(np.abs(channels).max()))
    constant.buffer = model.intern_buffer(bias)
    ir.save(model, dst)
    return op.outputs[0].name


def _zero_point_candidates(model: ir.Model) -> list[ir.Tensor]:
    """Activations (not graph outputs) quantized per tensor with a non-zero zero point."""
    return [
        op.outputs[0]
        for op in model.main.ops
        if op.outputs
        and op.outputs[0].is_quantized
        and op.outputs[0].quantization.zeroPoint is not None
        and len(op.outputs[0].quantization.zeroPoint) == 1
        and int(op.outputs[0].quantization.zeroPoint[0]) != 0
        and op.outputs[0] not in model.main.outputs
    ]


def _cpu_outputs(data: bytes, feed: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """The model's outputs on the CPU (XNNPACK, as the ``cpu`` runner), dequantized; None if it
    does not run (a kernel that needs its input's and output's quantization to match refuses a
    dropped zero point at prepare time: SOFTMAX, MAX_POOL_2D on XNNPACK, PAD)."""
    from ai_edge_litert.interpreter import Interpreter

    from tflkit.validation.localize import dequantize

    model = ir.load(data)
    _, _, ins, outs = entry_point(model)
    try:
        interpreter = Interpreter(model_content=data)
        for name, tensor in ins.items():
            if tuple(feed[name].shape) != tuple(tensor.shape):
                interpreter.resize_tensor_input(tensor.index, feed[name].shape)
        interpreter.allocate_tensors()
        for name, tensor in ins.items():
            interpreter.set_tensor(tensor.index, feed[name])
        interpreter.invoke()
        return [dequantize(t, interpreter.get_tensor(t.index)) for t in outs.values()]
    except (RuntimeError, ValueError):
        return None


def plant_dropped_zero_point(src: Path, dst: Path) -> str | None:
    """A copy where one activation lost its (non-zero) zero point; returns the tensor's name,
    None if no such loss changes the model's output on a realistic input.

    The ops around a tensor read its quantization, so a dropped zero point changes values only
    where they leave the range it shifts to (a ReLU's upper half, clipped) or where an op copies
    integers without requantizing (RESHAPE, pooling: every value shifts by the zero point). On
    most activations neither happens on real data and the loss changes nothing: no fault. So
    the zero point is dropped where its loss moves the model's output (CPU, dequantized,
    relative to the output's peak) the most, among the copies the CPU still runs, as the weight
    fault takes the most active channel.
    """
    data = Path(src).read_bytes()
    model = ir.load(data)
    candidates = _zero_point_candidates(model)
    if not candidates:
        return None
    feed = make_input_sets(model, count=1, kind="realistic").feeds[0]
    original = _cpu_outputs(data, feed)
    assert original is not None, "the original model does not run on the CPU"
    best, best_move = None, 0.0
    for tensor in candidates:
        copy = ir.load(data)
        planted = copy.main.tensors[tensor.index]
        planted.quantization.zeroPoint = np.zeros_like(np.asarray(tensor.quantization.zeroPoint))
        got = _cpu_outputs(ir.dumps(copy), feed)
        if got is None:
            continue
        move = max(
            float(np.max(np.abs(a - e))) / max(float(np.max(np.abs(e))), 1e-30)
            for a, e in zip(got, original, strict=True)
        )
        if move > best_move:
            best, best_move = copy, move
            name = tensor.name
    if best is None:
        return None
    ir.save(best, dst)
    return name


def _culprit(report) -> tuple[str, list[str]]:
    loc = report.localization
    assert loc is not None and loc.unavailable is None, loc and loc.unavailable
    assert loc.culprits, f"nothing localized: {loc.notes}"
    first = loc.first_divergent
    assert first is not None and all(first.op_index <= c.op_index for c in loc.culprits)
    return loc.culprits[0].op_type, loc.culprits[0].outputs


def _peak(model: Path) -> float:
    report = validate(model, ValidateOptions(runners=["cpu"], num_inputs=2, calibrate=False))
    cpu = report.runner("cpu")
    name, _ = _float_output(ir.load(model))
    return float(max(np.abs(out[name]).max() for out in cpu.outputs))


@pytest.fixture(scope="module")
def wakeword(world_models) -> Path:
    return world_models["openwakeword/hey_mycroft_v0.1"]


@pytest.mark.gpu
def test_fp16_overflow_caught_by_gpu_and_emulation_and_localized(wakeword, gpu, tmp_path):
    planted = plant_fp16_overflow(
        wakeword, tmp_path / "add.tflite", peak=_peak(wakeword), merged=False
    )
    report = validate(
        tmp_path / "add.tflite",
        ValidateOptions(runners=["cpu", "cpu-fp16", "gpu-fp16"], num_inputs=2, localize=True),
    )
    verdicts = {p.key: p.verdict for p in report.pairs}
    assert verdicts == {"cpu-fp16:cpu": "fail", "gpu-fp16:cpu": "fail"}
    assert report.localization is not None and report.localization.runner == "cpu-fp16"
    op_type, outputs = _culprit(report)
    assert op_type == "MUL" and outputs == [planted]
    hazards = report.runner("cpu-fp16").executed["fp16_hazards"]
    assert hazards and hazards[0]["op_type"] == "MUL" and "overflows" in hazards[0]["what"]


@pytest.mark.gpu
def test_merged_multiply_hidden_by_the_gpu_is_caught_by_the_emulation(wakeword, gpu, tmp_path):
    planted = plant_fp16_overflow(
        wakeword, tmp_path / "merged.tflite", peak=_peak(wakeword), merged=True
    )
    report = validate(
        tmp_path / "merged.tflite",
        ValidateOptions(
            runners=["cpu", "cpu-fp16", "gpu-fp16"],
            num_inputs=2,
            localize=True,
            localize_runner="cpu-fp16",
        ),
    )
    verdicts = {p.key: p.verdict for p in report.pairs}
    assert verdicts["cpu-fp16:cpu"] == "fail"
    # What the software GPU does with it is its own business; when it passes, the report says
    # that the emulation disagrees.
    if verdicts["gpu-fp16:cpu"] == "pass":
        assert any("fp16 emulation fails where this GPU passes" in n for n in report.notes)
    op_type, outputs = _culprit(report)
    assert op_type == "MUL" and outputs == [planted]


def _validate_perturbed_copy(original: Path, tmp_path: Path) -> tuple[str, ValidateReport]:
    """A copy of ``original`` with one perturbed weight, validated (and localized) on the CPU
    against ``original``: the planted tensor and the report. Also checks that the unmodified
    model against itself passes, so a catch is not a false alarm."""
    planted = plant_weight(original, tmp_path / "rewritten.tflite")
    assert planted is not None
    report = validate(
        tmp_path / "rewritten.tflite",
        ValidateOptions(runners=["cpu"], reference=original, num_inputs=2, localize=True),
    )
    same = validate(original, ValidateOptions(runners=["cpu"], reference=original, num_inputs=2))
    assert same.verdict == "pass", same.findings
    return planted, report


def test_perturbed_weight_caught_against_the_original_and_localized(world_models, tmp_path):
    planted, report = _validate_perturbed_copy(world_models["simple-cv/deeplabv3"], tmp_path)
    assert report.pair("cpu:reference").verdict == "fail" and report.verdict == "fail"
    assert report.localization is not None and report.localization.runner == "reference"
    op_type, outputs = _culprit(report)
    assert op_type in WEIGHT_OPS and outputs == [planted]


def test_perturbed_weight_behind_a_saturated_softmax_caught_in_the_log_domain(
    world_models, tmp_path
):
    """The keyword spotter's softmax is one-hot to within 1e-6 on these inputs: the perturbed
    bias moves its probabilities by less than the value bound, and its logits by nats."""
    original = world_models["mltk/keyword_spotting_pacman_v3.float32"]
    planted, report = _validate_perturbed_copy(original, tmp_path)
    out = report.pair("cpu:reference").outputs[0]
    assert out.kind == "probabilities" and out.verdict == "fail"
    assert out.metrics is not None and out.bound is not None
    assert out.metrics.max_abs <= out.bound  # hidden in the probabilities themselves
    assert out.log_diff is not None and out.log_bound is not None
    assert out.log_diff > 1000 * out.log_bound
    assert _culprit(report)[1] == [planted]


def test_dropped_zero_point_caught_in_the_dequantized_domain(world_models, tmp_path):
    original = world_models["mltk/image_example1"]
    planted = plant_dropped_zero_point(original, tmp_path / "dropped.tflite")
    assert planted is not None
    report = validate(
        tmp_path / "dropped.tflite",
        ValidateOptions(runners=["cpu"], reference=original, num_inputs=2, localize=True),
    )
    assert report.pair("cpu:reference").verdict == "fail"
    _culprit(report)
    tensor = next(t for t in ir.load(tmp_path / "dropped.tflite").main.tensors if t.name == planted)
    assert tensor.producer is not None
    touching = {tensor.producer.index} | {op.index for op in tensor.consumers}
    # the op writing the tensor diverges first; the top culprit writes or reads it (a reader
    # that copies integers without requantizing shifts every value by the lost zero point)
    loc = report.localization
    assert loc is not None and loc.first_divergent is not None
    assert loc.first_divergent.op_index == tensor.producer.index
    assert loc.culprits[0].op_index in touching


def test_same_grid_reference_holds_a_copy_to_one_step_not_to_the_inputs_noise(
    world_models, tmp_path
):
    """Against a ``.tflite`` with the same quantized inputs and outputs, the CPU runs two integer
    computations on identical integers: a healthy re-export passes with 0 steps, and a lost zero
    point that moves the output 26 steps fails. The model moves ~12 steps when its input moves
    one step, so the int8 contract (8 x that noise) let it through."""
    original = world_models["mltk/keyword_spotting_with_transfer_learning"]
    copy = tmp_path / "re-export.tflite"
    copy.write_bytes(ir.dumps(ir.load(original)))
    healthy = validate(copy, ValidateOptions(runners=["cpu"], reference=original, num_inputs=2))
    (out,) = healthy.pair("cpu:reference").outputs
    assert out.tolerance.precision == "int8-same-grid"
    assert out.verdict == "pass" and out.steps == 0
    assert out.bound_steps == NOISE_FACTOR["int8-same-grid"]  # the factor times one step
    planted = plant_dropped_zero_point(original, tmp_path / "dropped.tflite")
    assert planted is not None
    report = validate(
        tmp_path / "dropped.tflite",
        ValidateOptions(runners=["cpu"], reference=original, num_inputs=2, localize=True),
    )
    (out,) = report.pair("cpu:reference").outputs
    assert out.verdict == "fail" and out.steps is not None and out.steps > 2 * out.bound_steps
    assert "int8" in report.sensitivity and "int8-same-grid" in report.sensitivity
    assert report.sensitivity["int8"][out.name]["max_abs"] * NOISE_FACTOR["int8"] > out.steps
    _culprit(report)


def test_reference_values_put_on_the_models_own_grid(world_models, tmp_path):
    """Localizing against a ``.tflite`` reference that quantizes a tensor differently: the op
    that writes it is the culprit, and its reader (a CONV_2D that requantizes correctly) gets the
    reference's real values on its own grid, its error marked as inherited from the clipping."""
    from tflkit.validation.localize import localize

    original = world_models["mltk/image_example1"]
    model = ir.load(original)
    writer = next(op for op in model.main.ops if op.type == "CONV_2D" and op.index > 2)
    (reader,) = writer.outputs[0].consumers
    assert reader.type == "CONV_2D"
    tensor = writer.outputs[0]
    assert int(tensor.quantization.zeroPoint[0]) != 0
    tensor.quantization.zeroPoint = np.zeros_like(np.asarray(tensor.quantization.zeroPoint))
    data = ir.dumps(model)
    _, _, ins, _ = entry_point(model)
    feed = make_input_sets(model, count=1, kind="realistic").feeds[0]
    loc = localize(data, feed, inputs=ins, runner="reference", reference=original.read_bytes())
    assert loc.culprits and loc.culprits[0].op_index == writer.index
    assert loc.first_divergent is not None and loc.first_divergent.op_index == writer.index
    by_index = {r.op_index: r for r in loc.ops}
    assert by_index[reader.index].off_grid and not by_index[writer.index].off_grid
