"""SELECT / SELECT_V2 on the GPU: the broadcast forms are right; fp16 weights as an operand are
not. The static table says so (``WRONG_RESULT``), rule ``select_fp16_constant`` fixes it, and
BirdNET 2.4's fp16 metadata model, rewritten by default, agrees with the CPU on the GPU.

Measured on LiteRT 2.3's GPU accelerator (lavapipe): a then/else operand that is fp16 weights (a
FLOAT16 constant behind a DEQUANTIZE) makes the fp32 SELECT shader invalid WGSL (``var true_val
: vec4<f32> = vec4<f16>(...)``); the op never runs, the app gets stale values and no error.
Broadcast conditions, scalar operands, float32 constants and int8 weights are right, and so is
fp16 precision. ``tests/compat_models.py`` ``VALUE_CASES`` holds the wrong forms and their right
neighbours (placement cannot judge them; this file compares values).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.compat_models import VALUE_CASES, CompatCase
from tflkit import ir
from tflkit.cli.main import main
from tflkit.compat.static import check
from tflkit.gpu.probe import run_jobs
from tflkit.ir.builder import OpBuilder
from tflkit.ir.feeds import random_feed
from tflkit.rewriter.example import graph_model
from tflkit.rewriter.passes import run_passes
from tflkit.rewriter.rules import catalog
from tflkit.rewriter.run import checker_gate, rewrite_model
from tflkit.rewriter.verify import run_cpu, verify

RULE = next(r for r in catalog() if r.name == "select_fp16_constant")
SELECTS = [c for c in VALUE_CASES if c.name.startswith("select")]
#: Relative error (of the output's peak) above which the GPU computed something else: the
#: wrong forms are off by their whole peak (stale values), fp16 rounding is 1e-3 of it.
WRONG = 0.05
#: The accelerator's log line for the shader it cannot compile.
WGSL_ERROR = "Error while parsing WGSL"
BIRDNET = "BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16"


# --- the static table -----------------------------------------------------------------------


@pytest.mark.parametrize("case", SELECTS, ids=[c.name for c in SELECTS])
def test_static_verdict_of_each_value_case(case: CompatCase) -> None:
    model = case.build()
    verdict = check(model, "litert-gpu").verdicts[case.target_op % len(model.main.ops)]
    assert verdict.ok == case.expect_ok, verdict.rejections
    if not case.expect_ok:
        (rejection,) = verdict.rejections
        assert rejection.code == "WRONG_RESULT" and not rejection.fatal
        assert "is fp16 weights" in rejection.message


def test_check_advises_the_rule() -> None:
    from tflkit.compat.check import check_model
    from tflkit.rewriter.advice import Advisor

    case = next(c for c in SELECTS if c.name == "select_v2_fp16_scalars")
    report = check_model(case.build(), advise=Advisor())
    (op,) = [o for o in report.ops if o.type == "SELECT_V2"]
    assert op.status == "rejected" and [r.code for r in op.reasons] == ["WRONG_RESULT"]
    assert op.fix is not None and (op.fix.rule, op.fix.kind) == (RULE.name, "rule"), op.fix


# --- what the GPU computes ------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("enforce_f32", [True, False], ids=["fp32", "fp16"])
def test_value_cases_on_the_gpu(gpu: str, enforce_f32: bool) -> None:
    """Every form runs on the GPU (placed, not refused); in fp32 each wrong form's shader does
    not compile and its output parts from the CPU's by its peak; its neighbours are right, and
    so is every form in fp16. If a wrong form turns right, LiteRT fixed it: revisit the table."""
    models = [ir.dumps(case.build()) for case in SELECTS]
    feeds = [random_feed(ir.load(m).main.inputs, 0) for m in models]
    jobs = run_jobs(models, feeds, enforce_f32=enforce_f32)
    seen = {}
    for case, data, feed, job in zip(SELECTS, models, feeds, jobs, strict=True):
        assert job.status == "ok" and job.fully_accelerated, (case.name, job.status, job.error)
        assert job.outputs is not None
        _, cpu = run_cpu(data, feed)
        (want,) = cpu.values()
        (got,) = job.outputs.values()
        parted = float(np.abs(got.reshape(want.shape) - want).max())
        seen[case.name] = (parted <= WRONG * float(np.abs(want).max()), WGSL_ERROR in job.log)
    for case in SELECTS:
        right = case.expect_ok or not enforce_f32
        assert seen[case.name] == (right, not right), (case.name, seen)


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
    left = [v for v in check(outcome.model, "litert-gpu").verdicts if not v.ok]
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
