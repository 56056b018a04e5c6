"""fp16 weights (a FLOAT16 constant behind a DEQUANTIZE) read by SELECT / SELECT_V2 (then/else),
CONCATENATION, PACK (any input) and ONE_HOT (on/off values) on the GPU: computed wrong. The
static table says so (``WRONG_RESULT``), rule ``fp16_constant_operands`` fixes it, and BirdNET
2.4's fp16 metadata model, rewritten by default, agrees with the CPU on the GPU.

Measured on LiteRT 2.3's GPU accelerator (lavapipe): such an operand of SELECT, CONCATENATION or
PACK makes the fp32 shader invalid WGSL (``var true_val : vec4<f32> = vec4<f16>(...)``); the op
never runs, the app gets stale values and no error; fp16 precision is right. ONE_HOT reads an
fp16 on/off value's bits as a float32 in fp32 and zeros in fp16 (wrong in both, no log line).
Broadcast conditions, scalar operands, float32 constants and int8 weights are right, and so are
fp16 weights read by elementwise ops, PRELU, PADV2, FULLY_CONNECTED and BATCH_MATMUL.
``tests/compat_models.py`` ``VALUE_CASES`` holds the wrong forms and their right neighbours
(placement cannot judge them; this file compares values).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.compat_models import VALUE_CASES, CompatCase
from tflkit import ir
from tflkit.cli.main import main
from tflkit.compat.static import analyze
from tflkit.gpu.probe import run_jobs
from tflkit.ir.builder import OpBuilder
from tflkit.ir.feeds import random_feed
from tflkit.rewriter.example import graph_model
from tflkit.rewriter.passes import run_passes
from tflkit.rewriter.rules import catalog
from tflkit.rewriter.run import checker_gate, rewrite_model
from tflkit.rewriter.verify import run_cpu, verify

RULE = next(r for r in catalog() if r.name == "fp16_constant_operands")
#: This file's value cases (``VALUE_CASES`` holds other ops' too).
FAMILIES = ("select", "concat", "pack", "one_hot")
CASES = [c for c in VALUE_CASES if c.name.startswith(FAMILIES)]
SELECTS = [c for c in CASES if c.name.startswith("select")]
#: Wrong forms wrong in fp16 too, without a log line (ONE_HOT reads the fp16 bits as float32).
BOTH_PRECISIONS = ("one_hot",)
#: Relative error (of the output's peak) above which the GPU computed something else: the
#: wrong forms are off by their whole peak (stale values), fp16 rounding is 1e-3 of it.
WRONG = 0.05
#: The accelerator's log line for the shader it cannot compile.
WGSL_ERROR = "Error while parsing WGSL"
BIRDNET = "BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16"


# --- the static table -----------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_static_verdict_of_each_value_case(case: CompatCase) -> None:
    model = case.build()
    verdict = analyze(model, "litert-gpu").verdicts[case.target_op % len(model.main.ops)]
    assert verdict.ok == case.expect_ok, verdict.rejections
    if not case.expect_ok:
        (rejection,) = verdict.rejections
        assert rejection.code == "WRONG_RESULT" and not rejection.fatal
        assert "is fp16 weights" in rejection.message


@pytest.mark.parametrize(
    "name",
    ["select_v2_fp16_scalars", "concat_fp16_channels", "pack_fp16_axis0", "one_hot_fp16_off"],
)
def test_check_advises_the_rule(name: str) -> None:
    from tflkit.compat.check import check_report
    from tflkit.rewriter.advice import Advisor

    case = next(c for c in CASES if c.name == name)
    model = case.build()
    target = model.main.ops[-1].type
    report = check_report(model, advise=Advisor())
    (op,) = [o for o in report.ops if o.type == target]
    assert op.status == "rejected" and [r.code for r in op.reasons] == ["WRONG_RESULT"]
    assert op.fix is not None and (op.fix.rule, op.fix.kind) == (RULE.name, "rule"), op.fix


# --- what the GPU computes ------------------------------------------------------------------


def _parted(data: bytes, feed: dict, job) -> bool:
    """The GPU's output parts from the CPU's by more than :data:`WRONG` of its peak."""
    assert job.status == "ok" and job.fully_accelerated, (job.status, job.error)
    assert job.outputs is not None
    _, cpu = run_cpu(data, feed)
    (want,) = cpu.values()
    (got,) = job.outputs.values()
    return float(np.abs(got.reshape(want.shape) - want).max()) > WRONG * float(np.abs(want).max())


@pytest.mark.gpu
@pytest.mark.parametrize("enforce_f32", [True, False], ids=["fp32", "fp16"])
def test_value_cases_on_the_gpu(gpu: str, enforce_f32: bool) -> None:
    """Every form runs on the GPU (placed, not refused); in fp32 each wrong SELECT,
    CONCATENATION or PACK form's shader does not compile and its output parts from the CPU's by
    its peak, and each wrong ONE_HOT form parts in both precisions without a log line; the
    neighbours are right, and so is every other form in fp16. If a wrong form turns right,
    LiteRT fixed it: revisit the table."""
    models = [ir.dumps(case.build()) for case in CASES]
    feeds = [random_feed(ir.load(m).main.inputs, 0) for m in models]
    jobs = run_jobs(models, feeds, enforce_f32=enforce_f32)
    seen, expected = {}, {}
    for case, data, feed, job in zip(CASES, models, feeds, jobs, strict=True):
        seen[case.name] = (not _parted(data, feed, job), WGSL_ERROR in job.log)
        both = case.name.startswith(BOTH_PRECISIONS)
        right = case.expect_ok or not (enforce_f32 or both)
        expected[case.name] = (right, not right and not both)
    assert seen == expected


@pytest.mark.gpu
def test_rewritten_value_cases_are_right_on_the_gpu(gpu: str) -> None:
    """The default rewrite of every wrong form computes on the GPU what the CPU computes, in
    fp32 and fp16 (ONE_HOT's too), with no shader rejected."""
    wrong = [c for c in CASES if not c.expect_ok]
    models = []
    for case in wrong:
        model = case.build()
        result = run_passes(model, list(catalog().defaults()), gate=checker_gate("litert-gpu"))
        assert [f.rule for f in result.fired] == [RULE.name], case.name
        models.append(ir.dumps(model))
    feeds = [random_feed(ir.load(m).main.inputs, 0) for m in models]
    for enforce_f32 in (True, False):
        jobs = run_jobs(models, feeds, enforce_f32=enforce_f32)
        for case, data, feed, job in zip(wrong, models, feeds, jobs, strict=True):
            assert not _parted(data, feed, job), (case.name, enforce_f32)
            assert WGSL_ERROR not in job.log, (case.name, enforce_f32)


# --- the rule: exact, non-finite values included ---------------------------------------------


def _select_with(values: np.ndarray) -> ir.Model:
    """``where(x > 0, x, values)`` with ``values`` fp16 weights."""

    def body(b: OpBuilder, x: ir.Tensor) -> ir.Tensor:
        half = b.const(values.astype(np.float16), "fill_fp16")
        fill = b.DEQUANTIZE(half, shape=list(values.shape), dtype=np.float32, name="fill")
        keep = b.GREATER(x, np.array(0.0, np.float32), dtype=np.bool_, name="keep")
        return b.SELECT_V2(keep, x, fill, dtype=np.float32)

    return graph_model([(values.shape, np.float32)], body)


def test_rewrite_is_bit_identical_for_inf_nan_and_signed_zero() -> None:
    """fp16 -> fp32 widening is exact, so masks of -inf stay -inf (a MUL by 1 would not: the
    CPU's MUL clamps inf to the float32 maximum)."""
    values = np.array([[-np.inf, np.inf, np.nan, -0.0, 65504.0, 6e-8, -1.5, 0.0]], np.float32)
    model = _select_with(values)
    before = ir.dumps(model)
    result = run_passes(model, list(catalog().defaults()), gate=checker_gate("litert-gpu"))
    assert [f.rule for f in result.fired] == [RULE.name]
    assert [op.type for op in model.main.ops] == ["GREATER", "SELECT_V2"]
    feed = {"x0": np.full(values.shape, -1.0, np.float32)}  # every element from the fill
    _, want = run_cpu(before, feed)
    _, got = run_cpu(ir.dumps(model), feed)
    (w,), (g,) = want.values(), got.values()
    assert w.tobytes() == g.tobytes() == values.astype(np.float16).astype(np.float32).tobytes()
    assert verify(before, ir.dumps(model), RULE.contract, seeds=(0, 1, 2)).ok


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rule_fixes_exactly_the_wrong_value_cases(case: CompatCase) -> None:
    """The default rewrite fires on each wrong form (once) and on none of its neighbours; the
    result is bit-identical on the CPU and the checker accepts every op."""
    model = case.build()
    before = ir.dumps(model)
    result = run_passes(model, list(catalog().defaults()), gate=checker_gate("litert-gpu"))
    assert [f.rule for f in result.fired] == ([] if case.expect_ok else [RULE.name])
    assert [v for v in analyze(model, "litert-gpu").verdicts if not v.ok] == []
    if not case.expect_ok:
        assert "DEQUANTIZE" not in [op.type for op in model.main.ops]
    verdict = verify(before, ir.dumps(model), RULE.contract, seeds=(0, 1, 2))
    assert verdict.ok and all(o.identical for o in verdict.outputs), verdict.problem


def test_rule_leaves_large_fp16_operands_to_the_cpu() -> None:
    """Beyond fold_constants' bound the float32 copy would grow the model: the op stays
    rejected, with the reason in the trace."""
    model = _select_with(np.zeros((1, 32, 64), np.float32))  # 2,048 values: 8 KiB as float32
    result = run_passes(model, list(catalog().defaults()), gate=checker_gate("litert-gpu"))
    assert result.fired == []
    (reason,) = result.why_not(RULE.name)
    assert "would add 8192 bytes" in reason, reason


# --- BirdNET 2.4's fp16 metadata model, end to end -------------------------------------------


@pytest.mark.gpu
def test_birdnet_fp16_rewritten_agrees_with_the_cpu_on_the_gpu(
    gpu: str, real_models: list[Path], tmp_path: Path, capsys
) -> None:
    """19 of 56 ops on the GPU before (the two SELECT_V2 of fp16 flags outside the partition,
    so on the CPU); the default rewrite puts all 59 on the GPU (strided_slice_masks and
    expand_dims_to_reshape), and without this rule the fp32 GPU output parted from the CPU's
    by 1 (a sigmoid); with it, within 1.2e-6 (measured), as the original."""
    (source,) = [p for p in real_models if p.stem == BIRDNET]
    outcome = rewrite_model(source.read_bytes())
    fired = [f.rule for f in outcome.passes.fired]
    assert fired.count(RULE.name) == 2, fired
    assert outcome.verification is not None and outcome.verification.ok
    left = [v for v in analyze(outcome.model, "litert-gpu").verdicts if not v.ok]
    assert left == []
    path = tmp_path / "birdnet.gpu.tflite"
    path.write_bytes(ir.dumps(outcome.model))
    args = ["validate", str(path), "-r", "cpu", "-r", "gpu-fp32", "-n", "2"]
    code = main([*args, "--input-kind", "random", "--json"])
    report = json.loads(capsys.readouterr().out)
    runners = {r["runner"]: r for r in report["runners"]}
    assert runners["gpu-fp32"]["status"] == "ok", runners["gpu-fp32"]
    (pair,) = report["comparisons"]
    assert code == 0 and pair["verdict"] == "pass", pair["outputs"][0]["reasons"]


@pytest.mark.gpu
def test_the_gpu_runner_says_the_shader_was_rejected(gpu: str) -> None:
    """A model whose shader WebGPU rejects "runs" with stale outputs: validate's GPU runner
    reports a run error naming the rejection instead of comparing stale values (fp16 is fine)."""
    from tflkit.delegates.litert_gpu import LiteRTGpuRunner
    from tflkit.gpu.log import parse_gpu_log

    case = next(c for c in SELECTS if c.name == "select_v2_fp16_else")
    data = ir.dumps(case.build())
    feed = random_feed(ir.load(data).main.inputs, 0)
    fp32 = LiteRTGpuRunner(data, enforce_f32=True).infer([feed])
    assert fp32.status == "run_error", (fp32.status, fp32.error)
    assert fp32.error is not None and "WebGPU rejected a shader" in fp32.error
    assert WGSL_ERROR in fp32.error
    fp16 = LiteRTGpuRunner(data).infer([feed])
    assert fp16.status == "ok", (fp16.status, fp16.error)
    line = "E0000 00:00:1.0   1 environment.cc:105] Validation error: Error while parsing WGSL: x"
    assert parse_gpu_log(line).invalid_program == "Validation error: Error while parsing WGSL: x"
    assert parse_gpu_log("I0000 00:00:1.0   1 x.cc:1] fine").invalid_program is None
