"""The rule harness: every rule x example of the one catalogue is a test.

CPU part (runs everywhere): the static checker rejects the example's target op before; the rule
fires exactly once (default rules through the checker's gate, as ``rewrite`` runs them; opt-in
rules when named); nothing it targets is left; the model is sound, reloads and keeps its
interface; outputs match within the rule's contract (bit-identical for exact rules) against the
original on the CPU interpreter, or against the example's numpy reference when the original has
no CPU kernel; the static checker accepts every op of the result (but the example's stated
residual); a second pass changes nothing.

int8 part: the same rule on a full-int8 variant of each example. The rule fires, keeps scales
and zero points on every tensor it creates and the outputs stay bit-identical; or, for a rule
named in ``INT8_REFUSED`` (it rewrites float math or a float-only op version), its ``check``
refuses with the reason stated there and nothing fires.

GPU part (marker ``gpu``): the real accelerator rejected, failed or crashed on the original and
takes every op of the rewritten model (except an example's stated residual).
"""

from __future__ import annotations

import numpy as np
import pytest

from tflkit import ir
from tflkit.compat import static
from tflkit.compat.reasons import Reason
from tflkit.gpu.probe import probe, run_jobs
from tflkit.ir.feeds import random_feed
from tflkit.rewriter.contract import combine
from tflkit.rewriter.example import int8_variant
from tflkit.rewriter.passes import PassResult, run_passes
from tflkit.rewriter.rule import Example, ModelPass, OpRewrite, OwnProof, Rule
from tflkit.rewriter.rules import catalog
from tflkit.rewriter.run import checker_gate
from tflkit.rewriter.verify import compare, run_cpu, verify

TARGET = "litert-gpu"
CASES = [(rule, example) for rule in catalog() for example in rule.examples()]
IDS = [f"{rule.name}-{example.name}" for rule, example in CASES]
INT8_CASES = [(r, e) for r, e in CASES if e.reference is None]
INT8_IDS = [f"{r.name}-{e.name}" for r, e in INT8_CASES]
QUANTIZED_TYPES = ("INT8", "UINT8", "INT16")
#: The rules whose ``check`` refuses the int8 variant of their examples, with the end of the
#: reason it gives for each target op; every other rule must fire on it.
INT8_REFUSED = {
    "arg_min_to_arg_max": "input is not float32",
    "relu_0_to_1": "input is INT8, not float32",
    "softmax_beta": "input is INT8, not float32",
    "log_softmax": "input is INT8, not float32",
    "l2_normalization": "input is INT8, not float32",
    "batch_matmul_const_lhs": "operands are not float32",
    "fully_connected_const_input": "needs float32 rank-2 input and weights",
    "rank5_reduce": "not float32 or dynamic shape",
    "int8_pointwise_float_weights": "input is INT8, not float32 (not the hybrid form)",
    "depthwise_int8_scale_per_channel": "only the hybrid (float activation) kernel reads the "
    "scale wrong",
    "transpose_conv_version": (
        "not a float32 TRANSPOSE_CONV (quantized forms need their own version)"
    ),
}


def test_one_catalogue_with_examples_for_every_rule() -> None:
    rules = list(catalog())
    assert len({r.name for r in rules}) == len(rules)
    assert [r.name for r in rules if not r.examples()] == []
    assert all(isinstance(r, OpRewrite | ModelPass) for r in rules)
    defaults = catalog().defaults()
    assert not any(catalog().is_opt_in(r) for r in defaults)
    opt_in = {r.name for r in rules if catalog().is_opt_in(r)}
    assert opt_in == {"erf_approx", "streaming_state"}  # flagged in the catalogue, nowhere else
    assert set(catalog().names()) - set(defaults.names()) == opt_in


def test_every_rule_code_is_a_reason() -> None:
    """A rule gated on a code the checker never gives would never fire behind the checker."""
    wrong = {
        r.name: [c for c in r.codes if not isinstance(c, Reason)]
        for r in catalog()
        if any(not isinstance(c, Reason) for c in r.codes)
    }
    assert wrong == {}
    # a gated rule with neither would address any rejection: only the ungated fold has none
    silent = [r.name for r in catalog() if not (r.codes or r.reasons)]
    assert silent == ["fold_constants"] and catalog().get("fold_constants").ungated


def _run(rule: Rule, model: ir.Model) -> PassResult:
    """Rewrite as ``tflkit rewrite`` does: defaults behind the checker; opt-in rules by name."""
    if catalog().is_opt_in(rule):
        return run_passes(model, list(catalog().select([rule.name])))
    return run_passes(model, list(catalog().defaults()), gate=checker_gate(TARGET))


def _rejected_types(model: ir.Model) -> set[str]:
    """Main-graph op types the checker rejects for the GPU, or names as computed wrong by the
    CPU's kernels (CPU_WRONG_RESULT: what a CPU-side rule fixes)."""
    verdicts = static.op_verdicts(model, TARGET)
    rejected = {v.op_type for v in verdicts if not v.ok and v.subgraph_index == 0}
    cpu_wrong = [
        i.op_index
        for i in static.model_issues(model, TARGET, list(verdicts))
        if i.code == Reason.CPU_WRONG_RESULT and i.subgraph_index == 0 and i.op_index is not None
    ]
    return rejected | {model.main.ops[i].type for i in cpu_wrong}


def _outputs_match(example: Example, before: bytes, after: bytes, contract) -> None:
    if example.reference is None:
        verdict = verify(before, after, contract, seeds=(0, 1, 2))
        assert verdict.ok, verdict.problem
        if contract.exact:
            assert all(o.identical for o in verdict.outputs)
        return
    original = ir.load(before)
    with pytest.raises((RuntimeError, ValueError)):
        run_cpu(before)  # why the example needs a reference
    for seed in (0, 1, 2):
        feed = random_feed(original.main.inputs, seed)
        expected = example.reference(original, feed)
        _, got = run_cpu(after, feed)
        for name, old in expected.items():
            check = compare(name, old, got[name], contract)
            assert check.ok, (check, contract.describe())


def _same_interface(rule: Rule, original: ir.Model, new: ir.Model) -> None:
    """Inputs and outputs keep their names; a rule that adds state appends after them."""
    for kind in ("inputs", "outputs"):
        old_names = [t.name for t in getattr(original.main, kind)]
        new_names = [t.name for t in getattr(new.main, kind)]
        if isinstance(rule, ModelPass):
            assert new_names[: len(old_names)] == old_names
        else:
            assert new_names == old_names


@pytest.mark.parametrize(("rule", "example"), CASES, ids=IDS)
def test_rule_on_cpu(rule: Rule, example: Example) -> None:
    model = example.build()
    before = ir.dumps(model)
    assert _rejected_types(model) & set(rule.fixes), "the checker must reject the target op"
    result = _run(rule, model)
    fired = [f.rule for f in result.fired]
    assert fired.count(rule.name) == 1, (fired, result.why_not(rule.name))
    assert not any(f.on_own_output for f in result.fired)
    assert ir.verify_model(model) == []
    after = ir.dumps(model)
    reloaded = ir.load(after)
    if isinstance(rule, OpRewrite):
        leftovers = [op.type for op in reloaded.main.ops if rule.pattern(op) and rule.match(op)]
    else:
        leftovers = [op.type for op in rule.anchors(reloaded) if rule.match_model(reloaded)]
    assert leftovers == []
    original = ir.load(before)
    _same_interface(rule, original, reloaded)
    contract = combine([r.contract for r in catalog() if r.name in fired])
    if isinstance(rule, OwnProof):  # state made explicit, a decomposition repaired
        verdict = rule.verify_rewrite(before, after, contract, (0,))
        assert verdict.ok, verdict
    else:
        _outputs_match(example, before, after, contract)
    assert _rejected_types(reloaded) <= set(example.residual)
    again = _run(rule, reloaded)
    assert again.fired == []
    assert ir.dumps(reloaded) == after


@pytest.mark.parametrize(("rule", "example"), INT8_CASES, ids=INT8_IDS)
def test_rule_on_int8_variant(rule: Rule, example: Example) -> None:
    if example.no_int8 is not None:
        with pytest.raises((RuntimeError, ValueError)):  # the stated reason still holds
            run_cpu(ir.dumps(int8_variant(example.build())))
        return
    model = int8_variant(example.build())
    before = ir.dumps(model)
    run_cpu(before)  # the variant is a working int8 model
    old_tensors = {id(t) for t in model.main.tensors}
    result = run_passes(model, list(catalog().select([rule.name])))
    reasons = result.why_not(rule.name)
    if rule.name in INT8_REFUSED:
        assert result.fired == [], "fires on int8: take it out of INT8_REFUSED"
        expected = f": {INT8_REFUSED[rule.name]}"
        assert reasons and all(r.endswith(expected) for r in reasons), reasons
        return
    assert [f.rule for f in result.fired] == [rule.name], reasons
    assert ir.verify_model(model) == []
    created = [t for t in model.main.tensors if id(t) not in old_tensors]
    unquantized = [t.name for t in created if t.type_name in QUANTIZED_TYPES and not t.is_quantized]
    assert unquantized == []
    after = ir.dumps(model)
    if isinstance(rule, OwnProof):
        verdict = rule.verify_rewrite(before, after, rule.contract, (0,))
    else:
        verdict = verify(before, after, rule.contract, seeds=(0, 1, 2))
    assert verdict.ok, verdict.problem
    assert all(o.identical for o in verdict.outputs), verdict.outputs
    assert all(np.dtype(o.dtype).kind in "iu" for o in verdict.outputs)


def test_int8_refusals_name_rules_with_int8_examples() -> None:
    """``INT8_REFUSED`` names only rules that have an int8 variant to refuse."""
    with_int8 = {r.name for r, e in INT8_CASES if e.no_int8 is None}
    assert set(INT8_REFUSED) <= with_int8, set(INT8_REFUSED) - with_int8


def _gpu_parts_from_cpu(data: bytes, share: float = 1e-3) -> bool:
    """The GPU (fp32) output differs from the CPU's by more than ``share`` of its peak (a
    ``WRONG_RESULT`` form: taken by the accelerator, computed wrong)."""
    model = ir.load(data)
    feed = random_feed(model.main.inputs, 0)
    _, want = run_cpu(data, feed)
    (job,) = run_jobs([data], [feed], enforce_f32=True)
    assert job.status == "ok" and job.outputs is not None, (job.status, job.error)
    pairs = [(job.outputs[k], want[t.name]) for k, t in model.signatures[0].outputs.items()]
    return any(
        float(np.abs(got.reshape(w.shape) - w).max()) > share * float(np.abs(w).max())
        for got, w in pairs
    )


@pytest.mark.gpu
@pytest.mark.parametrize(("rule", "example"), CASES, ids=IDS)
def test_rule_on_gpu(rule: Rule, example: Example, gpu: str) -> None:
    model = example.build()
    old = probe(ir.dumps(model), locate_crash=False)
    targets = set(rule.fixes)
    refused = old.status != "ok" or targets & {r.op_type for r in old.log.rejections}
    # taken, but computed wrong (by the GPU, or by the CPU it is compared with): they part
    wrong = bool({Reason.WRONG_RESULT, Reason.CPU_WRONG_RESULT} & set(rule.codes))
    assert (wrong and _gpu_parts_from_cpu(ir.dumps(model))) or refused, old.log_text[-800:]
    _run(rule, model)
    new = probe(ir.dumps(model), locate_crash=False)
    assert new.status == "ok", new.log_text[-800:]
    rejected = {r.op_type for r in new.log.rejections}
    assert rejected <= set(example.residual), new.log.rejections
    if not example.residual:
        assert not new.log.ops_on_cpu
    if wrong:  # within 1e-3 of the peak, or the rule's own contract (a hybrid kernel's rounding)
        assert not _gpu_parts_from_cpu(ir.dumps(model), max(1e-3, rule.contract.peak_rel))
