"""The ``inline_composite`` rule: its bookkeeping on small IR models, and its proof on the real LLM
corpus (``tests/corpus/llm_build.py``: litert-torch 0.10 exports with ``prefill_8`` and
``decode`` signatures whose RMS norms, group norms and attention are STABLEHLO_COMPOSITE ops).

On the corpus, ``tflkit rewrite --rule inline_composite`` (the CLI) must verify bit-identical on
both signatures, the result must be bit-identical to the original per signature on LiteRT's
reference kernels, and it must compile and run on the real GPU accelerator, which dies
(SIGSEGV) compiling the original. XNNPACK is the exception the proof names: it runs Gemma's
multi-query ``odml.scaled_dot_product_attention`` composite with a kernel of its own that
differs from the decomposition (docs/llm.md); on the inlined graph it agrees with the reference.
So ``--rule inline_composite`` alone on Gemma is refused; the default rewrite repairs the
decomposition first (rule ``attention_key_transpose``, ``tests/test_rule_attention_fix.py``) and
writes it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.cli import run_tflkit
from tflkit import ir
from tflkit.ir.builder import OpBuilder
from tflkit.ir.feeds import random_feed
from tflkit.ir.graph import Op, OpCode
from tflkit.rewriter.contract import EXACT
from tflkit.rewriter.example import graph_model, options, scale
from tflkit.rewriter.rules.composite import (
    COMPOSITE,
    InlineComposite,
    composite,
    inline_all,
    nested_example,
    rms_norm_body,
    rms_norm_example,
)
from tflkit.rewriter.verify import run_cpu, verify
from tflkit.validation.steps import cpu_call, steps_report

fb = ir.schema.fb
RULE = InlineComposite()
#: Gemma (RMS norm, multi-query attention) and Phi-2 (group norm, partial rotary)
ARCHS = ("gemma", "phi2")


# --- the transform on small models ---------------------------------------------------------------


def _composites(model: ir.Model) -> list[Op]:
    return [op for op in model.iter_ops() if op.type == COMPOSITE]


def test_inlines_every_signature_and_drops_the_decompositions():
    model = rms_norm_example()
    before = ir.dumps(model)
    assert len(model.subgraphs) == 4 and len(_composites(model)) == 2
    assert inline_all(model) == 2
    assert _composites(model) == [] and [sg.name for sg in model.subgraphs] == ["main", "decode"]
    assert ir.verify_model(model) == []
    verdict = verify(before, ir.dumps(model), EXACT)
    assert verdict.ok and {o.name for o in verdict.outputs} >= {"decode:out0"}, verdict


def test_nested_and_shared_decompositions_are_inlined_and_removed():
    model = nested_example()
    before = ir.dumps(model)
    # the outer composite's body holds two composites sharing one decomposition subgraph
    assert [len(sg.ops) for sg in model.subgraphs[1:]] == [3, 6]
    assert inline_all(model) == 1
    assert _composites(model) == [] and len(model.subgraphs) == 1
    assert [op.type for op in model.main.ops].count("RSQRT") == 2
    assert verify(before, ir.dumps(model), EXACT).ok


def _two_composites() -> ir.Model:
    """``a`` (decomposition subgraph 1) then ``b`` (subgraph 2) in the main graph."""
    shape = (1, 2, 8)
    weight = np.linspace(0.5, 1.5, 8, dtype=np.float32)

    def body(b: OpBuilder, x):
        model = b.subgraph.model
        first, second = rms_norm_body(model, shape), rms_norm_body(model, shape)
        y = composite(b, [scale(b, x, 2.0), b.const(weight, "w")], first, "test.a")
        return scale(b, composite(b, [y, b.const(weight, "w2")], second, "test.b"))

    return graph_model([(shape, np.float32)], body)


def test_removing_a_subgraph_renumbers_the_references_left():
    model = _two_composites()
    before = ir.dumps(model)
    assert inline_all(model, "test.a") == 1
    (left,) = _composites(model)
    assert left.options2.name == b"test.b" and left.options2.decompositionSubgraphIndex == 1
    assert len(model.subgraphs) == 2
    assert verify(before, ir.dumps(model), EXACT).ok


def test_control_flow_references_are_renumbered_too():
    model = _two_composites()
    spare = model.add_subgraph("while_body")  # index 3, named by a WHILE of the main graph
    spare.inputs = spare.outputs = [spare.new_tensor("x", (1,), np.float32)]
    x = model.main.new_tensor("loop_x", (1,), np.float32)
    looped = model.main.new_tensor("loop_y", (1,), np.float32)
    loop = options("WhileOptions", condSubgraphIndex=3, bodySubgraphIndex=3)
    model.main.add_op(Op(OpCode.builtin("WHILE"), [x], [looped], options=loop))
    inline_all(model, "test.a")
    assert (loop.condSubgraphIndex, loop.bodySubgraphIndex) == (2, 2)
    assert model.subgraphs[2] is spare


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda m, op: None, None),
        (lambda m, op: setattr(op.options2, "decompositionSubgraphIndex", 0), "contains itself"),
        (lambda m, op: setattr(op.options2, "decompositionSubgraphIndex", 9), "does not exist"),
        (lambda m, op: m.subgraphs[1].outputs.append(m.subgraphs[1].inputs[0]), "number"),
        (lambda m, op: setattr(m.subgraphs[1].inputs[0], "shape", (1, 4, 8)), "shape"),
    ],
)
def test_check_says_why_a_composite_cannot_be_inlined(edit, reason):
    model = rms_norm_example()
    op = _composites(model)[0]
    edit(model, op)
    assert RULE.pattern(op)
    problem = RULE.match(op).reason
    assert (problem is None) if reason is None else (reason in problem), problem


def test_entry_subgraph_as_decomposition_is_refused():
    model = rms_norm_example()
    op = _composites(model)[0]
    op.options2.decompositionSubgraphIndex = 2  # the decode signature's subgraph
    assert "entry subgraph" in RULE.match(op).reason


# --- the real LLM corpus, through the CLI --------------------------------------------------------


@pytest.fixture(scope="module")
def rewritten(llm_corpus, tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """arch -> (the CLI's output model, its ``--json`` report) of ``--rule inline_composite``
    alone. Gemma's is refused (XNNPACK's own attention kernel and the converter's decomposition
    differ; the default run, which repairs the decomposition first, writes it) and written
    with --force."""
    folder = tmp_path_factory.mktemp("inlined")
    done = {}
    for arch in ARCHS:
        out = folder / f"{arch}.tflite"
        args = ("rewrite", str(llm_corpus / f"{arch}.tflite"), "-o", str(out), "--json")
        run = run_tflkit(*args, "--rule", "inline_composite")
        if arch == "gemma":
            assert run.returncode == 1 and not out.exists(), run.stderr[-2000:]
            assert "(use --force to write anyway)" in run.stderr
            assert "rule attention_key_transpose" in run.stderr  # the default run's repair
            run = run_tflkit(*args, "--rule", "inline_composite", "--force")
        assert run.returncode == 0, run.stderr[-2000:]
        done[arch] = (out, json.loads(run.stdout))
    return done


@pytest.mark.parametrize("arch", ARCHS)
def test_cli_rewrite_inlines_both_signatures_bit_identical(arch, rewritten):
    path, report = rewritten[arch]
    assert report["written"] and [f["rule"] for f in report["fired"]] == ["inline_composite"] * 2
    verdict = report["verification"]
    assert verdict["contract"] == "exact (bit-identical)", verdict
    if arch == "gemma":  # the copy is exact; the decomposition is not what XNNPACK computes
        assert not verdict["ok"] and verdict["problem"].startswith("XNNPACK's own kernels for")
        assert "odml.scaled_dot_product_attention" in verdict["problem"], verdict["problem"]
    else:
        assert verdict["ok"] and verdict["problem"] is None, verdict
    names = {o["name"] for o in verdict["outputs"]}
    assert "decode:logits" in names and any(not n.startswith("decode:") for n in names)
    assert all(o["identical"] for o in verdict["outputs"])
    model = ir.load(path)
    assert _composites(model) == []
    assert [sg.name for sg in model.subgraphs] == ["prefill_8", "decode"]
    assert [s.key for s in model.signatures] == ["prefill_8", "decode"]


def _signature_diffs(original: bytes, new: bytes, old_kernels: str, new_kernels: str) -> dict:
    """Signature -> max abs over its outputs, on seeded random inputs (2 seeds)."""
    model = ir.load(original)
    old, fresh = cpu_call(original, old_kernels), cpu_call(new, new_kernels)
    worst = {}
    for sig in model.signatures:
        for seed in (0, 1):
            by_tensor = random_feed(list(sig.inputs.values()), seed)
            feed = {name: by_tensor[t.name] for name, t in sig.inputs.items()}
            a, b = old(sig.key, feed), fresh(sig.key, feed)
            diff = max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in a)
            worst[sig.key] = max(worst.get(sig.key, 0.0), diff)
    return worst


@pytest.mark.parametrize("arch", ARCHS)
def test_reference_kernels_see_the_same_model_and_xnnpack_the_finding(arch, llm_corpus, rewritten):
    original = (llm_corpus / f"{arch}.tflite").read_bytes()
    new = rewritten[arch][0].read_bytes()
    same = _signature_diffs(original, new, "reference", "reference")
    assert same == {"prefill_8": 0.0, "decode": 0.0}, same
    # XNNPACK on the inlined graph computes the decomposition, as the reference kernels do
    inlined_xnnpack = _signature_diffs(original, new, "reference", "xnnpack")
    assert max(inlined_xnnpack.values()) < 1e-5, inlined_xnnpack
    exported_xnnpack = _signature_diffs(original, original, "reference", "xnnpack")
    if arch == "gemma":  # XNNPACK's own MQA attention kernel is other math (measured ~1)
        assert min(exported_xnnpack.values()) > 0.1, exported_xnnpack
    else:
        assert max(exported_xnnpack.values()) < 1e-5, exported_xnnpack


@pytest.mark.gpu
@pytest.mark.parametrize("arch", ARCHS)
def test_inlined_graphs_compile_and_run_on_the_gpu(arch, gpu, rewritten):
    report = steps_report(rewritten[arch][0].read_bytes(), arch, 2, runners=("cpu", "gpu-fp32"))
    run = report.runs["gpu-fp32"]
    assert run["status"] == "ok", run  # the original dies with SIGSEGV at its first composite
    assert run["executed"]["software_adapter"] is True and run["executed"]["stage"] == "done"
    assert [s["step"] for s in run["per_step"]] == [0, 1]
    assert all(np.isfinite(s["max_abs"]) for s in run["per_step"])
    assert set(run["executed"]["cpu_fallback"]) <= {"GATHER_ND", "BROADCAST_TO", "RESHAPE"}
    if arch == "gemma":
        # the GPU parts from both CPUs on Gemma's inlined graph (~0.7, fp32 and fp16 alike;
        # docs/llm.md): not this rule's doing (the reference kernels agree bit for bit)
        assert run["tokens"] == report.cpu_tokens, run["per_step"]
    else:
        assert all(s["max_abs"] < 1e-4 for s in run["per_step"]), run["per_step"]
        assert run["first_part"] is None


def test_run_cpu_of_the_example_matches_numpy():
    """The example's decomposition is the RMS norm it claims to be."""
    model = rms_norm_example()
    inputs, outputs = run_cpu(ir.dumps(model))
    x = inputs["x0"].astype(np.float64) * 3.0
    w = np.linspace(0.5, 1.5, 16)
    expected = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w
    assert np.abs(outputs[model.main.outputs[0].name] - expected).max() < 1e-5


def test_check_advises_the_rule_for_a_composite_without_gpu_kernel(tmp_path):
    path = tmp_path / "composite.tflite"
    ir.save(rms_norm_example(), path)
    report = json.loads(run_tflkit("check", str(path), "--json").stdout)
    (op,) = [o for o in report["ops"] if o["type"] == COMPOSITE and o["subgraph"] == 0]
    assert "has no GPU implementation" in op["why"], op
    assert op["fix"]["rule"] == "inline_composite" and op["fix"]["kind"] == "rule", op


def test_check_names_the_crash_at_an_odml_composite_and_its_default_fix(llm_corpus):
    """The static table knows LiteRT 2.3's accelerator dies on litert-torch's ``odml.*``
    composites: each is a fatal CRASH whose fix is the default rewrite."""
    report = json.loads(run_tflkit("check", str(llm_corpus / "qwen.tflite"), "--json").stdout)
    composites = [o for o in report["ops"] if o["type"] == COMPOSITE]
    assert composites and not report["compiles"]
    for op in composites:
        assert "kills it while compiling" in op["why"], op
        assert op["fix"] == {"rule": "inline_composite", "summary": RULE.summary, "kind": "rule"}


@pytest.mark.gpu
def test_check_probe_agrees_the_accelerator_crashes_at_the_composite(gpu, llm_corpus):
    """The probe dies at qwen's first odml.rms_norm, as the table says, and names the rule."""
    report = json.loads(
        run_tflkit("check", str(llm_corpus / "qwen.tflite"), "--probe", "--json").stdout
    )
    crash = report["probe"]["crash"]
    assert crash is not None and crash["op_type"] == "STABLEHLO_COMPOSITE odml.rms_norm", crash
    assert "; fix: rule inline_composite" in report["summary"], report["summary"]
    assert report["probe"]["model_agrees"] is True
    (op,) = [o for o in report["ops"] if (o["subgraph"], o["index"]) == (0, crash["op_index"])]
    assert op["fix"] == {"rule": "inline_composite", "summary": RULE.summary, "kind": "rule"}


def test_inline_composite_alone_on_gemma_is_refused_by_the_xnnpack_check(llm_corpus):
    """Without ``attention_key_transpose`` the wrong decomposition is inlined as it is, and the
    rule's own check against XNNPACK's attention kernel refuses it (in process: the CLI's
    refusal is the ``rewritten`` fixture's)."""
    from tflkit.rewriter.run import rewrite_model

    data = (llm_corpus / "gemma.tflite").read_bytes()
    outcome = rewrite_model(data, rule_names=["inline_composite"])
    verdict = outcome.verification
    assert verdict is not None and not verdict.ok
    assert verdict.problem.startswith("XNNPACK's own kernels for"), verdict.problem
    default = rewrite_model(data)
    assert default.verification is not None and default.verification.ok, default.verification
    assert "attention_key_transpose" in {f.rule for f in default.passes.fired}


def test_default_rewrite_inlines_the_odml_composites(tmp_path, llm_corpus):
    """No ``--rule`` needed: the default run, gated by the static verdicts, inlines them."""
    out = tmp_path / "phi2.inlined.tflite"
    done = run_tflkit("rewrite", str(llm_corpus / "phi2.tflite"), "-o", str(out), "--json")
    assert done.returncode == 0, done.stderr
    rewritten = ir.load(out)
    assert not [op for op in rewritten.iter_ops() if op.type == COMPOSITE]
    assert len(rewritten.subgraphs) == 2


def test_a_decomposition_returning_its_input_keeps_the_interface():
    """An identity composite feeding a graph output: the output gets a copy of the input (a
    RESHAPE), and both keep their names."""
    shape = (1, 8)

    def body(b: OpBuilder, x):
        model = b.subgraph.model
        identity = model.add_subgraph("identity.impl")
        identity.inputs = identity.outputs = [identity.new_tensor("x", shape, np.float32)]
        return composite(b, [scale(b, x)], identity.index, "test.identity")

    model = graph_model([(shape, np.float32)], body)
    before = ir.dumps(model)
    names = [t.name for t in (*model.main.inputs, *model.main.outputs)]
    assert inline_all(model) == 1 and len(model.subgraphs) == 1
    assert [t.name for t in (*model.main.inputs, *model.main.outputs)] == names
    assert [op.type for op in model.main.ops] == ["MUL", "RESHAPE"]
    assert verify(before, ir.dumps(model), EXACT).ok
