"""Gemma's three-way disagreement, explained, and ``validate --steps N --localize``.

The PyTorch model llm_build.py exports is the ground truth (``tests/corpus/llm_torch_reference``):

- XNNPACK on the graph as exported (it runs the attention composite with its own kernel)
  matches PyTorch; the composite's decomposition, which the reference kernels, the fp16
  emulation and every runtime that inlines it compute, is wrong for gemma's one KV head:
  litert-torch 0.10 writes K's transpose ``[1, T, 1, D] -> [1, 1, D, T]`` as a RESHAPE.
- LiteRT 2.3's GPU accelerator (lavapipe) computes only the first batch of a BATCH_MATMUL
  whose second operand is a 2-D tensor broadcast over the first's batch (gemma's probs x V);
  the other batches come back as zeros. :func:`broadcast_rhs_batch_matmul` is the minimal
  model; ``validate --steps --localize`` names that op on the real graph.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.cli import run_tflkit
from tests.corpus.llm_torch_reference import reference_logits
from tflkit import ir
from tflkit.gpu.probe import run_jobs
from tflkit.ir import schema
from tflkit.ir.builder import OpBuilder
from tflkit.ir.graph import SignatureDef
from tflkit.report.steps_report import steps_lines
from tflkit.rewriter.rules.attention import repair_attention
from tflkit.rewriter.rules.composite import inline_all
from tflkit.validation.localize import localize
from tflkit.validation.steps import cpu_call, kv_program, prompt_tokens, run_steps, steps_report

fb = schema.fb
STEPS = 2


@pytest.fixture(scope="module")
def gemma(llm_corpus: Path) -> bytes:
    return (llm_corpus / "gemma.tflite").read_bytes()


@pytest.fixture(scope="module")
def gemma_inlined(gemma: bytes) -> bytes:
    model = ir.load(gemma)
    assert inline_all(model) > 0
    return ir.dumps(model)


def _max_abs(got: list[np.ndarray], want: list[np.ndarray]) -> list[float]:
    return [float(np.abs(a - b).max()) for a, b in zip(got, want, strict=True)]


def test_pytorch_sides_with_xnnpack_and_the_decomposition_is_wrong(gemma):
    program = kv_program(ir.load(gemma))
    prompt = prompt_tokens(program)
    cpu, tokens = run_steps(cpu_call(gemma), program, prompt, STEPS)
    truth = reference_logits("gemma", prompt, STEPS, tokens)
    assert [int(t.argmax()) for t in truth] == tokens
    assert max(_max_abs(cpu, truth)) < 1e-5  # measured 1.2e-6
    ref = run_steps(cpu_call(gemma, "reference"), program, prompt, STEPS, tokens)[0]
    assert min(_max_abs(ref, truth)) > 0.5  # measured 1.4 and 0.82 (logits up to 3.5)
    fixed = ir.load(gemma)
    assert repair_attention(fixed) == 3  # prefill's layer 0, decode's layers 0 and 1
    data = ir.dumps(fixed)
    ref = run_steps(cpu_call(data, "reference"), program, prompt, STEPS, tokens)[0]
    assert max(_max_abs(ref, truth)) < 1e-5  # measured 1.4e-6


def broadcast_rhs_batch_matmul(
    lhs: tuple[int, ...] = (4, 1, 32), rhs: tuple[int, ...] = (32, 16), *, constant: bool = False
) -> tuple[bytes, dict[str, np.ndarray], np.ndarray]:
    """One BATCH_MATMUL of ``x [lhs]`` and ``y [rhs]`` (an input, or a constant), its seeded
    feed and numpy's answer: with ``rhs`` of fewer batch dimensions than ``lhs`` (or batch 1),
    ``y`` is broadcast over ``x``'s batch, the way gemma's attention multiplies the 4 heads'
    probabilities by the one KV head's values."""
    rng = np.random.default_rng(0)
    x_value = rng.standard_normal(lhs).astype(np.float32)
    y_value = rng.standard_normal(rhs).astype(np.float32)
    want = np.matmul(x_value, y_value)
    model = ir.Model()
    graph = model.add_subgraph("main")
    x = graph.new_tensor("x", lhs, np.float32)
    graph.inputs = [x]
    feed = {"x": x_value}
    y: ir.Tensor | np.ndarray = y_value
    if not constant:
        y = graph.new_tensor("y", rhs, np.float32)
        graph.inputs.append(y)
        feed["y"] = y_value
    out = OpBuilder(graph).BATCH_MATMUL(
        x, y, options=fb.BatchMatMulOptionsT(), shape=want.shape, name="out"
    )
    graph.outputs = [out]
    model.signatures.append(
        SignatureDef("serving_default", graph, {t.name: t for t in graph.inputs}, {"out": out})
    )
    return ir.dumps(model), feed, want


@pytest.mark.gpu
def test_gpu_batch_matmul_with_a_broadcast_operand_computes_only_batch_0(gpu):
    """Measured, LiteRT 2.3 on lavapipe, fp32 and fp16 alike: batches 1.. come back as zeros
    when the second operand is a tensor broadcast over the batch; a constant one, or one with
    the full batch, is right. If this starts failing, LiteRT fixed it: revisit the check rule."""
    cases = {
        "2-D rhs": broadcast_rhs_batch_matmul(),
        "batch-1 rhs": broadcast_rhs_batch_matmul(rhs=(1, 32, 16)),
        "2 rows": broadcast_rhs_batch_matmul(lhs=(4, 2, 32)),
        "constant rhs": broadcast_rhs_batch_matmul(constant=True),
        "full batch rhs": broadcast_rhs_batch_matmul(rhs=(4, 32, 16)),
        "batch 1": broadcast_rhs_batch_matmul(lhs=(1, 1, 32)),
    }
    jobs = run_jobs([m for m, _, _ in cases.values()], [f for _, f, _ in cases.values()])
    jobs += run_jobs([cases["2-D rhs"][0]], [cases["2-D rhs"][1]], enforce_f32=True)
    outcome = {}
    for name, job in zip([*cases, "2-D rhs fp32"], jobs, strict=True):
        assert job.status == "ok" and job.fully_accelerated, (name, job.status, job.error)
        want = cases[name.replace(" fp32", "")][2]
        got = job.outputs["out"]
        outcome[name] = (
            np.allclose(got, want, atol=0.05 * np.abs(want).max()),
            np.allclose(got[0], want[0], atol=0.05 * np.abs(want).max()),
            not np.any(got[1:]),
        )
    for broken in ("2-D rhs", "batch-1 rhs", "2 rows", "2-D rhs fp32"):
        assert outcome[broken] == (False, True, True), (broken, outcome)
    for fine in ("constant rhs", "full batch rhs", "batch 1"):
        assert outcome[fine][0], (fine, outcome)
    # and localization on the minimal model names the op
    data, feed, _ = broadcast_rhs_batch_matmul()
    found = localize(data, feed, runner="gpu-fp32", threshold=1e-4)
    assert found.first_divergent is not None
    assert (found.first_divergent.op_index, found.first_divergent.op_type) == (0, "BATCH_MATMUL")


def fold_broadcast_batch_matmul(model: ir.Model) -> int:
    """The GPU-safe form of each BATCH_MATMUL ``x [B, M, K] @ y [K, N]`` with ``y`` a tensor
    and B > 1: ``reshape(reshape(x, [1, B*M, K]) @ y, [B, M, N])`` (the batch folded into the
    rows); returns how many were rewritten. A prototype for a rewrite rule."""
    count = 0
    for graph in model.subgraphs:
        for op in [o for o in graph.ops if o.type == "BATCH_MATMUL"]:
            x, y = op.inputs[0], op.inputs[1]
            if y.is_constant or len(y.shape) != 2 or len(x.shape) != 3 or x.shape[0] == 1:
                continue
            (b, m, k), n = x.shape, y.shape[1]
            build = OpBuilder(graph, before=op, prefix="fold")
            rows = build.RESHAPE(x, np.int32([1, b * m, k]), shape=(1, b * m, k))
            product = build.BATCH_MATMUL(
                rows, y, options=fb.BatchMatMulOptionsT(), shape=(1, b * m, n)
            )
            graph.replace_all_uses_with(
                op.outputs[0], build.RESHAPE(product, np.int32([b, m, n]), shape=(b, m, n))
            )
            graph.remove_op(op)
            count += 1
    return count


@pytest.mark.gpu
def test_steps_localize_names_the_batch_matmul_where_the_gpu_parts(gpu, gemma_inlined):
    report = steps_report(gemma_inlined, "gemma", STEPS, runners=("cpu", "gpu-fp32"), localize=True)
    run = report.runs["gpu-fp32"]
    assert run["status"] == "ok" and run["first_part"]["step"] == 0, run["per_step"]
    found = report.to_json()["localization"]
    assert found == run["first_part"]["localization"]  # in the runner's part too
    assert (found["runner"], found["signature"], found["step"]) == ("gpu-fp32", "decode", 0)
    first = found["first_divergent_op"]
    assert (first["op_type"], first["signature"]) == ("BATCH_MATMUL", "decode"), first
    # probs [4 heads, 1, 32 positions] x V [32, 16] of the one KV head: a tensor, not a constant
    assert [i["shape"] for i in first["inputs"]] == [[4, 1, 32], [32, 16]]
    assert not any(i["constant"] for i in first["inputs"])
    assert first["isolated"]["score"] > 0.5  # batches 1..3 are zeros: the whole peak is off
    assert [op["op_type"] for op in found["culprit_ops"]] == ["BATCH_MATMUL", "BATCH_MATMUL"]
    graph = ir.load(gemma_inlined).signature("decode").subgraph
    assert graph.ops[first["op_index"]].type == "BATCH_MATMUL"  # indices of decode's subgraph
    text = "\n".join(steps_lines(report))
    assert (
        f"first op where it parts: op #{first['op_index']} BATCH_MATMUL [4,1,32] x [32,16]" in text
    )


@pytest.mark.gpu
def test_gemma_fixed_both_ways_agrees_on_the_gpu(gpu, gemma):
    """The two findings explain the whole difference: with the RESHAPE made a TRANSPOSE and the
    broadcast BATCH_MATMUL folded, the GPU agrees with the CPU, which agrees with PyTorch."""
    model = ir.load(gemma)
    repair_attention(model)
    inline_all(model)
    assert fold_broadcast_batch_matmul(model) == 3
    report = steps_report(ir.dumps(model), "gemma fixed", STEPS, runners=("cpu", "gpu-fp32"))
    run = report.runs["gpu-fp32"]
    assert run["status"] == "ok" and run["first_part"] is None, run["per_step"]
    assert all(s["max_abs"] < 1e-5 for s in run["per_step"])  # measured 1.2e-6


def test_validate_steps_localize_says_when_nothing_parted(llm_corpus):
    path = llm_corpus / "qwen.tflite"
    args = ("validate", str(path), "--steps", "2", "-r", "cpu-fp16", "--localize", "--json")
    done = run_tflkit(*args)
    report = json.loads(done.stdout)
    assert report["ok"], done.stdout[-2000:]
    assert "nothing to localize: no GPU runner ran" in report["localization"]["unavailable"]
    done = run_tflkit("validate", str(path), "--steps", "2", "--localize-on", "cpu-fp16")
    assert done.returncode == 2 and "--localize-on with --steps works on gpu-fp32" in done.stderr
