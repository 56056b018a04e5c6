"""BATCH_MATMUL with a runtime operand broadcast over the other's batch: wrong on the GPU, the
static table says so (``WRONG_RESULT``), rule ``batch_matmul_broadcast`` fixes it; and the pass
manager walks every signature, so the default rewrite fixes ``decode`` too.

Measured on LiteRT 2.3's GPU accelerator (lavapipe), fp32 and fp16 alike: the op is placed on
the GPU and batches 1.. come back as zeros. ``tests/compat_models.py`` ``VALUE_CASES`` holds the
wrong forms and their right neighbours (placement cannot judge them: the agreement test does
not see them, this file compares values).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.cli import run_tflkit
from tests.compat_models import VALUE_CASES, CompatCase
from tflkit import ir
from tflkit.compat.static import analyze
from tflkit.gpu.probe import run_jobs
from tflkit.ir.feeds import random_feed
from tflkit.rewriter.example import graph_model, options, scale
from tflkit.rewriter.passes import run_passes
from tflkit.rewriter.rules import catalog
from tflkit.rewriter.run import checker_gate, histogram, rewrite_model
from tflkit.rewriter.verify import run_cpu
from tflkit.validation.steps import steps_report

RULE = next(r for r in catalog() if r.name == "batch_matmul_broadcast")
#: This file's value cases (``VALUE_CASES`` holds other ops' too).
MATMULS = [c for c in VALUE_CASES if c.name.startswith("batch_matmul")]
#: Relative error (of the output's peak) above which the GPU computed something else. The wrong
#: forms are off by their whole peak (zeros); fp16 rounding is 1e-3 of it (measured 5.5e-4).
WRONG = 0.05


# --- the static table -----------------------------------------------------------------------


@pytest.mark.parametrize("case", MATMULS, ids=[c.name for c in MATMULS])
def test_static_verdict_of_each_value_case(case: CompatCase) -> None:
    model = ir.load(ir.dumps(case.build()))
    verdict = analyze(model, "litert-gpu").verdicts[case.target_op % len(model.main.ops)]
    assert verdict.ok == case.expect_ok, verdict.rejections
    if not case.expect_ok:
        (rejection,) = verdict.rejections
        assert rejection.code == "WRONG_RESULT" and not rejection.fatal
        assert "returns zeros or wrong values for the others" in rejection.message


def test_check_advises_the_rule() -> None:
    from tflkit.compat.check import check_report
    from tflkit.rewriter.advice import Advisor

    case = next(c for c in MATMULS if c.name == "batch_matmul_broadcast_rhs")
    report = check_report(case.build(), advise=Advisor())
    (op,) = [o for o in report.ops if o.type == "BATCH_MATMUL"]
    assert op.status == "rejected" and [r.code for r in op.reasons] == ["WRONG_RESULT"]
    assert op.fix is not None and (op.fix.rule, op.fix.kind) == (RULE.name, "rule"), op.fix


# --- what the GPU computes ------------------------------------------------------------------


def _numpy(model: ir.Model, feed: dict[str, np.ndarray]) -> np.ndarray:
    (op,) = model.main.ops
    x, y = feed["x"], feed["y"]
    if op.options is not None and op.options.adjY:
        y = np.swapaxes(y, -1, -2)
    return np.matmul(x, y)


@pytest.mark.gpu
@pytest.mark.parametrize("enforce_f32", [True, False], ids=["fp32", "fp16"])
def test_value_cases_on_the_gpu(gpu: str, enforce_f32: bool) -> None:
    """Each wrong form runs on the GPU (placed, not refused) and computes batch 0 only; each
    neighbour is right. If a wrong form turns right, LiteRT fixed it: revisit the table."""
    models = [case.build() for case in MATMULS]
    feeds = [random_feed(m.main.inputs, 0) for m in models]
    jobs = run_jobs([ir.dumps(m) for m in models], feeds, enforce_f32=enforce_f32)
    seen = {}
    for case, model, feed, job in zip(MATMULS, models, feeds, jobs, strict=True):
        assert job.status == "ok" and job.fully_accelerated, (case.name, job.status, job.error)
        assert job.outputs is not None
        want = _numpy(model, feed)
        (got,) = job.outputs.values()
        got = got.reshape(want.shape)
        peak = float(np.abs(want).max())
        flat_want = want.reshape(-1, *want.shape[-2:])
        flat_got = got.reshape(flat_want.shape)
        right = float(np.abs(got - want).max()) <= WRONG * peak
        first = float(np.abs(flat_got[0] - flat_want[0]).max()) <= WRONG * peak
        seen[case.name] = (right, first, not np.any(flat_got[1:]))
    for case in MATMULS:
        expected = (True, True, False) if case.expect_ok else (False, True, True)
        assert seen[case.name] == expected, (case.name, seen)


def _gpu_vs_cpu(data: bytes) -> float:
    """Max abs of the GPU's (fp32) output against the CPU's, relative to the CPU's peak."""
    model = ir.load(data)
    feed = random_feed(model.main.inputs, 0)
    _, want = run_cpu(data, feed)
    (job,) = run_jobs([data], [feed], enforce_f32=True)
    assert job.status == "ok" and job.fully_accelerated and job.outputs is not None, job.error
    worst = 0.0
    for key, tensor in model.signatures[0].outputs.items():
        expected = want[tensor.name]
        got = job.outputs[key].reshape(expected.shape)
        worst = max(worst, float(np.abs(got - expected).max() / np.abs(expected).max()))
    return worst


@pytest.mark.gpu
@pytest.mark.parametrize("example", RULE.examples(), ids=[e.name for e in RULE.examples()])
def test_rule_examples_are_wrong_before_and_right_after_on_the_gpu(gpu: str, example) -> None:
    """The harness's GPU part asks that the accelerator refuse the original; this one is taken
    and computed wrong, so its proof is by values: wrong before, exact (fp32) after."""
    model = example.build()
    assert _gpu_vs_cpu(ir.dumps(model)) > 0.5  # measured 0.57-1.1 of the peak
    result = run_passes(model, list(catalog().defaults()), gate=checker_gate("litert-gpu"))
    assert [f.rule for f in result.fired] == [RULE.name]
    assert _gpu_vs_cpu(ir.dumps(model)) < 1e-6  # measured 0 on every example


# --- the pass manager walks every signature (job A) ------------------------------------------


def _two_signatures() -> ir.Model:
    """``serving_default`` (subgraph 0) and a ``decode`` subgraph, each with a LOG_SOFTMAX (no
    GPU kernel; rule log_softmax)."""
    model = graph_model([((1, 8), np.float32)], lambda b, x: b.LOG_SOFTMAX(scale(b, x)))
    graph = model.add_subgraph("decode")
    x = graph.new_tensor("x", (1, 8), np.float32)
    from tflkit.ir.builder import OpBuilder

    b = OpBuilder(graph, prefix="decode")
    out = b.LOG_SOFTMAX(scale(b, x, 2.0), options=options("LogSoftmaxOptions"))
    graph.inputs, graph.outputs = [x], [out]
    model.signatures.append(ir.SignatureDef("decode", graph, {"x": x}, {"logits": out}))
    return model


def test_default_rules_fire_in_every_signature() -> None:
    model = _two_signatures()
    assert histogram(model)["LOG_SOFTMAX"] == 2  # both graphs that run, summed
    outcome = rewrite_model(ir.dumps(model))
    fired = [(f.rule, f.subgraph, f.signature) for f in outcome.passes.fired]
    assert fired == [("log_softmax", 0, "serving_default"), ("log_softmax", 1, "decode")]
    assert "LOG_SOFTMAX" not in histogram(outcome.model)
    assert outcome.verification is not None and outcome.verification.ok
    assert {o.name for o in outcome.verification.outputs} >= {"decode:logits"}


# --- gemma, end to end through the CLI --------------------------------------------------------


@pytest.fixture(scope="module")
def gemma_rewritten(llm_corpus: Path, tmp_path_factory) -> tuple[Path, dict]:
    """``tflkit rewrite gemma.tflite`` with the default rules (attention_key_transpose repairs
    the converter's one-KV-head attention first): written and proven."""
    out = tmp_path_factory.mktemp("gemma") / "gemma.gpu.tflite"
    done = run_tflkit("rewrite", str(llm_corpus / "gemma.tflite"), "-o", str(out), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    return out, json.loads(done.stdout)


def test_gemma_default_rewrite_fixes_decode_too(gemma_rewritten) -> None:
    path, report = gemma_rewritten
    fired = {}
    for f in report["fired"]:
        key = (f["rule"], f["signature"])
        fired[key] = fired.get(key, 0) + 1
    # probs [4 heads, 1, 32] x V [32, 16] of the one KV head: layer 0 in prefill (layer 1 is
    # pruned there), both layers in decode
    assert fired[(RULE.name, "prefill_8")] == 1 and fired[(RULE.name, "decode")] == 2, fired
    assert fired[("broadcast_to_tile", "decode")] == 2, fired  # a default rule, in decode
    assert all(
        f["subgraph"] == (0 if f["signature"] == "prefill_8" else 1) for f in report["fired"]
    )
    model = ir.load(path)
    assert [s.key for s in model.signatures] == ["prefill_8", "decode"]
    left = [
        v
        for v in analyze(model, "litert-gpu").verdicts
        if any(r.code == "WRONG_RESULT" for r in v.rejections)
    ]
    assert left == []
    assert report["histogram_after"]["BATCH_MATMUL"] == 6  # 3 attentions x (Q K^T, P V)


@pytest.mark.gpu
def test_gemma_decode_agrees_with_the_cpu_on_the_gpu(gpu: str, gemma_rewritten) -> None:
    """Before the rule the GPU parts by 0.88-1.3 per step (batches 1-3 of P x V zero); after
    it, within 1e-6 of the CPU on the same rewritten graph (measured 6.9e-7 to 9.5e-7)."""
    path, _ = gemma_rewritten
    report = steps_report(path.read_bytes(), "gemma", 2, runners=("cpu", "gpu-fp32"))
    run = report.runs["gpu-fp32"]
    assert run["status"] == "ok" and run["first_part"] is None, run["per_step"]
    assert all(s["max_abs"] < 1e-5 for s in run["per_step"]), run["per_step"]
    assert run["tokens"] == report.cpu_tokens
