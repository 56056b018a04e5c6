"""The generated rule harness: every rule x example is a test.

CPU part: the rule fires exactly once, nothing it targets is left, the model is sound and
reloads, CPU outputs match within the rule's contract (bit-identical for exact rules), and a
second pass changes nothing. GPU part (marker ``gpu``): the real accelerator rejected or crashed
on the original, and takes every op of the rewritten model (except an example's stated residual).
"""

from __future__ import annotations

import pytest

from tflkit import ir
from tflkit.compat.probe import probe
from tflkit.rewriter.passes import run_passes
from tflkit.rewriter.rule import Example, Rule, combine
from tflkit.rewriter.rules import DEFAULT_RULES
from tflkit.rewriter.verify import verify

CASES = [(rule, example) for rule in DEFAULT_RULES for example in rule.examples()]
IDS = [f"{rule.name}-{example.name}" for rule, example in CASES]


def test_catalog_is_large_and_every_rule_has_an_example() -> None:
    assert len(DEFAULT_RULES) >= 25
    assert len({r.name for r in DEFAULT_RULES}) == len(DEFAULT_RULES)
    assert [r.name for r in DEFAULT_RULES if not r.examples()] == []


def _rewrite(rule: Rule, example: Example) -> tuple[bytes, bytes, ir.Model, list[str]]:
    model = example.build()
    before = ir.dumps(model)
    result = run_passes(model, DEFAULT_RULES)
    return before, ir.dumps(model), model, [f.rule for f in result.fired]


@pytest.mark.parametrize(("rule", "example"), CASES, ids=IDS)
def test_rule_on_cpu(rule: Rule, example: Example) -> None:
    before, after, model, fired = _rewrite(rule, example)
    assert fired.count(rule.name) == 1, fired
    assert ir.verify_model(model) == []
    reloaded = ir.load(after)
    leftovers = [op.type for op in reloaded.main.ops if rule.pattern(op) and not rule.check(op)]
    assert leftovers == []
    original = ir.load(before)
    assert [t.name for t in reloaded.main.outputs] == [t.name for t in original.main.outputs]
    assert [t.name for t in reloaded.main.inputs] == [t.name for t in original.main.inputs]
    contract = combine([r.contract for r in DEFAULT_RULES if r.name in fired])
    verdict = verify(before, after, contract, seeds=(0, 1, 2))
    assert verdict.ok, verdict.problem
    if contract.exact:
        assert all(o.identical for o in verdict.outputs)
    again = run_passes(reloaded, DEFAULT_RULES)
    assert again.fired == []
    assert ir.dumps(reloaded) == after


@pytest.mark.gpu
@pytest.mark.parametrize(("rule", "example"), CASES, ids=IDS)
def test_rule_on_gpu(rule: Rule, example: Example, gpu: str) -> None:
    before, after, _, _ = _rewrite(rule, example)
    old = probe(before, locate_crash=False)
    targets = set(rule.fixes)
    assert old.crashed or targets & {r.op_type for r in old.log.rejections}, old.log_text[-800:]
    new = probe(after, locate_crash=False)
    assert new.status == "ok", new.log_text[-800:]
    rejected = {r.op_type for r in new.log.rejections}
    assert rejected <= set(example.residual), new.log.rejections
    if not example.residual:
        assert not new.log.ops_on_cpu
