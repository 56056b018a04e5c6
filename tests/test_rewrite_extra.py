"""Rules whose original models cannot run on the CPU interpreter, so the generated harness cannot
compare them: ERF (custom ``Erf`` / ``FlexErf``: no kernel) and BROADCAST_TO version 1 (no kernel
for that version). The original's outputs come from a float32 numpy evaluation of its graph
(erf correctly rounded to float32); the rewritten model runs on the real CPU interpreter and the
real GPU accelerator.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tflkit import ir
from tflkit.compat.probe import probe
from tflkit.rewriter.example import graph_model, i32, scale
from tflkit.rewriter.passes import run_passes
from tflkit.rewriter.rule import Example, Rule
from tflkit.rewriter.rules import DEFAULT_RULES
from tflkit.rewriter.rules.gelu import ERF_RULES, ERF_TYPES
from tflkit.rewriter.verify import compare, run_cpu

CASES = [(rule, example) for rule in ERF_RULES for example in rule.examples()]
IDS = [f"{rule.name}-{example.name}" for rule, example in CASES]
_ERF = np.vectorize(math.erf, otypes=[np.float64])


def reference(model: ir.Model, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The model's outputs computed op by op in float32 with numpy (ops of the examples only)."""
    values = {id(t): feed[t.name].astype(np.float32) for t in model.main.inputs}

    def value(tensor: ir.Tensor) -> np.ndarray:
        return tensor.data.astype(np.float32) if tensor.is_constant else values[id(tensor)]

    for op in model.main.ops:
        args = [value(t) for t in op.inputs]
        if op.type in ERF_TYPES:
            out = _ERF(args[0].astype(np.float64)).astype(np.float32)
        elif op.type in ("ADD", "MUL", "DIV"):
            out = {"ADD": np.add, "MUL": np.multiply, "DIV": np.divide}[op.type](*args)
        else:
            raise AssertionError(f"no reference for {op.type}")
        values[id(op.outputs[0])] = out.astype(np.float32)
    return {t.name: values[id(t)] for t in model.main.outputs}


def _seeded(model: ir.Model, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        t.name: (3.0 * rng.standard_normal(t.shape)).astype(np.float32) for t in model.main.inputs
    }


@pytest.mark.parametrize(("rule", "example"), CASES, ids=IDS)
def test_erf_rule_on_cpu(rule: Rule, example: Example) -> None:
    model = example.build()
    original = ir.load(ir.dumps(model))
    with pytest.raises(RuntimeError, match=r"Erf|Select TensorFlow"):
        run_cpu(ir.dumps(original))
    result = run_passes(model, ERF_RULES)
    assert [f.rule for f in result.fired] == [rule.name]
    assert ir.verify_model(model) == []
    after = ir.dumps(model)
    reloaded = ir.load(after)
    assert not [op.type for op in reloaded.main.ops if op.type in ERF_TYPES]
    assert [t.name for t in reloaded.main.outputs] == [t.name for t in original.main.outputs]
    assert [t.name for t in reloaded.main.inputs] == [t.name for t in original.main.inputs]
    for seed in (0, 1, 2):
        feed = _seeded(original, seed)
        expected = reference(original, feed)
        _, got = run_cpu(after, feed)
        for name, old in expected.items():
            check = compare(name, old, got[name], rule.contract)
            assert check.ok, (check, rule.contract.describe())
    assert run_passes(reloaded, ERF_RULES).fired == []
    assert ir.dumps(reloaded) == after


@pytest.mark.gpu
@pytest.mark.parametrize(("rule", "example"), CASES, ids=IDS)
def test_erf_rule_on_gpu(rule: Rule, example: Example, gpu: str) -> None:
    model = example.build()
    old = probe(ir.dumps(model), locate_crash=False)
    assert old.status == "compile_error", old.log_text[-800:]
    run_passes(model, ERF_RULES)
    new = probe(ir.dumps(model), locate_crash=False)
    assert new.status == "ok", new.log_text[-800:]
    assert new.log.rejections == []
    assert not new.log.ops_on_cpu


def _broadcast_v1() -> ir.Model:
    def body(b, x):
        return scale(b, b.BROADCAST_TO(scale(b, x, 2.0), i32(2, 3, 4), shape=(2, 3, 4), version=1))

    return graph_model([((1, 4), np.float32)], body)


def test_broadcast_to_v1_on_cpu() -> None:
    model = _broadcast_v1()
    with pytest.raises(ValueError, match="BROADCAST_TO' version '1'"):
        run_cpu(ir.dumps(model))
    fired = [f.rule for f in run_passes(model, DEFAULT_RULES).fired]
    assert fired == ["broadcast_to_tile"]
    feed = {"x0": np.random.default_rng(0).standard_normal((1, 4)).astype(np.float32)}
    _, got = run_cpu(ir.dumps(model), feed)
    (out,) = got.values()
    assert np.array_equal(out, np.broadcast_to(feed["x0"] * np.float32(2.0), (2, 3, 4)))


@pytest.mark.gpu
def test_broadcast_to_v1_on_gpu(gpu: str) -> None:
    model = _broadcast_v1()
    assert probe(ir.dumps(model), locate_crash=False).status == "compile_error"
    run_passes(model, DEFAULT_RULES)
    new = probe(ir.dumps(model), locate_crash=False)
    assert new.status == "ok", new.log_text[-800:]
    assert new.log.rejections == [] and not new.log.ops_on_cpu
