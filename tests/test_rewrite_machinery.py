"""Pass manager, trace, verification, shape fixing and the ``tflkit rewrite`` command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tflkit import ir
from tflkit.cli.main import main
from tflkit.delegates.litert_cpu import computed_shapes
from tflkit.errors import UsageError
from tflkit.ir.builder import OpBuilder
from tflkit.ir.shapes import fix_input_shapes
from tflkit.rewriter import run as rewrite_run
from tflkit.rewriter.contract import EXACT, bound
from tflkit.rewriter.passes import RewriteLoop, run_passes
from tflkit.rewriter.rule import Example, Match, OpRewrite, Rule, replace
from tflkit.rewriter.rules import catalog
from tflkit.rewriter.rules.activation import LogSoftmax, SoftmaxBeta
from tflkit.rewriter.ruleset import RuleSet
from tflkit.rewriter.run import rewrite_model
from tflkit.rewriter.verify import verify

F32 = np.float32
DEFAULTS = list(catalog().defaults())


def _example(rule: Rule) -> ir.Model:
    return rule.examples()[0].build()


def test_trace_says_why_a_rule_did_not_fire() -> None:
    from tflkit.rewriter.example import graph_model, options

    model = graph_model(
        [((2, 4), np.int32)],
        lambda b, x: b.ARG_MIN(
            x,
            np.array([1], np.int32),
            shape=(2,),
            dtype=np.int32,
            options=options("ArgMinOptions", outputType=2),
        ),
    )
    result = run_passes(model, DEFAULTS)
    assert result.fired == []
    assert result.why_not("arg_min_to_arg_max") == ["ARG_MIN #0 (ex/arg_min): input is not float32"]


def test_gate_limits_rewrites_to_rejected_ops() -> None:
    model = _example(LogSoftmax())
    accepted = run_passes(model, DEFAULTS, gate=lambda sg: {})
    assert accepted.fired == []
    assert "the target accepts this op" in accepted.why_not("log_softmax")[0]
    target = next(op for op in model.main.ops if op.type == "LOG_SOFTMAX")
    other = run_passes(model, DEFAULTS, gate=lambda sg: {id(target): ["INT64 tensor"]})
    assert other.fired == [] and "another reason" in other.why_not("log_softmax")[0]
    fixed = run_passes(
        model, DEFAULTS, gate=lambda sg: {id(target): ["Operation is not supported."]}
    )
    assert [f.rule for f in fixed.fired] == ["log_softmax"]


class _Flip(OpRewrite):
    """A rule that never converges: NEG -> NEG(NEG(NEG))."""

    name = "flip"
    fixes = ("NEG",)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        replace(match.op, [b.NEG(b.NEG(b.NEG(match.op.inputs[0])))])


class _NegToAbs(OpRewrite):
    name = "neg_to_abs"
    fixes = ("NEG",)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        replace(match.op, [b.ABS(match.op.inputs[0])])


class _AbsToNeg(OpRewrite):
    name = "abs_to_neg"
    fixes = ("ABS",)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        replace(match.op, [b.NEG(match.op.inputs[0])])


def test_a_rule_rewriting_its_own_output_into_itself_is_an_internal_error() -> None:
    from tflkit.rewriter.example import graph_model

    model = graph_model([((1, 4), F32)], lambda b, x: b.NEG(x))
    with pytest.raises(RewriteLoop, match="rule flip does not converge"):
        run_passes(model, [_Flip()])


def test_step_limit_stops_rules_that_undo_each_other() -> None:
    from tflkit.rewriter.example import graph_model

    model = graph_model([((1, 4), F32)], lambda b, x: b.NEG(x))
    with pytest.raises(RewriteLoop, match="did not converge in 6 steps"):
        run_passes(model, [_NegToAbs(), _AbsToNeg()], max_steps=6)


def test_runaway_rule_is_exit_3_with_a_short_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tflkit.rewriter.example import graph_model

    src = tmp_path / "neg.tflite"
    ir.save(graph_model([((1, 4), F32)], lambda b, x: b.NEG(x)), src)
    monkeypatch.setattr(rewrite_run, "catalog", lambda: RuleSet([_Flip()]))
    assert main(["rewrite", str(src), "-o", str(tmp_path / "out.tflite"), "--rule", "flip"]) == 3
    err = capsys.readouterr().err
    assert "rule flip does not converge" in err and len(err) < 300, err
    assert not (tmp_path / "out.tflite").exists()


def test_verify_refuses_beyond_contract() -> None:
    model = _example(SoftmaxBeta())
    before = ir.dumps(model)
    run_passes(model, DEFAULTS)
    after = ir.dumps(model)
    assert not verify(before, after, EXACT).ok  # not bit-identical: exact would refuse
    assert verify(before, after, bound(1e-6, 1e-5)).ok
    assert not verify(before, ir.dumps(_example(LogSoftmax())), EXACT).ok  # other outputs


def test_fix_dynamic_batch() -> None:
    from tflkit.rewriter.example import graph_model, options

    model = graph_model(
        [((1, 8), F32)],
        lambda b, x: b.FULLY_CONNECTED(
            x, np.ones((4, 8), F32), None, shape=(1, 4), options=options("FullyConnectedOptions")
        ),
    )
    x, y = model.main.inputs[0], model.main.outputs[0]
    x.shape_signature, y.shape_signature = (-1, 8), (-1, 4)
    changed = fix_input_shapes(model, {"x0": [3, 8]}, infer=computed_shapes)
    assert x.shape == (3, 8) and y.shape == (3, 4) and not x.is_dynamic and not y.is_dynamic
    assert set(changed) >= {"x0", y.name}
    with pytest.raises(UsageError):
        fix_input_shapes(model, {"x0": [3, 9]}, infer=computed_shapes)
    with pytest.raises(UsageError):
        fix_input_shapes(model, {"nope": [1]}, infer=computed_shapes)


def test_forced_rule_and_unknown_rule() -> None:
    data = ir.dumps(_example(LogSoftmax()))
    default = rewrite_model(data)
    assert default.gated_by_checker  # the static checker chose the ops to rewrite
    assert [f.rule for f in default.passes.fired] == ["log_softmax"]
    outcome = rewrite_model(data, rule_names=["log_softmax"])
    assert [f.rule for f in outcome.passes.fired] == ["log_softmax"]
    assert outcome.verification is not None and outcome.verification.ok
    with pytest.raises(UsageError):
        rewrite_model(data, rule_names=["no_such_rule"])


def _write(tmp_path: Path, rule: Rule) -> Path:
    path = tmp_path / "in.tflite"
    model = _example(rule)
    model.set_metadata("min_runtime_version", b"1.5.0")
    ir.save(model, path)
    return path


def test_cli_rewrites_keeps_interface_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _write(tmp_path, LogSoftmax())
    original = src.read_bytes()
    out = tmp_path / "out.tflite"
    assert main(["rewrite", str(src), "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["written"] and [f["rule"] for f in report["fired"]] == ["log_softmax"]
    assert report["histogram_before"]["LOG_SOFTMAX"] == 1
    assert "LOG_SOFTMAX" not in report["histogram_after"]
    assert report["verification"]["ok"]
    assert src.read_bytes() == original
    old, new = ir.load(original), ir.load(out)
    assert new.metadata_entry("min_runtime_version").buffer.tobytes() == b"1.5.0"
    sig_old, sig_new = old.signatures[0], new.signatures[0]
    assert sig_new.key == sig_old.key
    assert {k: t.name for k, t in sig_new.inputs.items()} == {
        k: t.name for k, t in sig_old.inputs.items()
    }
    assert {k: t.name for k, t in sig_new.outputs.items()} == {
        k: t.name for k, t in sig_old.outputs.items()
    }
    assert main(["rewrite", str(src), "-o", str(src)]) == 2
    assert src.read_bytes() == original
    assert main(["rewrite", str(src), "-o", str(out), "--rule", "bogus"]) == 2


def test_cli_refuses_beyond_contract_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stricter (exact) contract on softmax_beta makes verification refuse to write."""

    class Tight(SoftmaxBeta):
        contract = EXACT

    src = tmp_path / "in.tflite"
    ir.save(_example(SoftmaxBeta()), src)
    out = tmp_path / "out.tflite"
    tight = RuleSet(Tight() if r.name == "softmax_beta" else r for r in catalog())
    monkeypatch.setattr(rewrite_run, "catalog", lambda: tight)
    assert main(["rewrite", str(src), "-o", str(out)]) == 1
    assert not out.exists()
    assert "differ beyond the contract" in capsys.readouterr().err
    assert main(["rewrite", str(src), "-o", str(out), "--force"]) == 0
    assert out.exists()


def test_examples_are_proper_examples() -> None:
    for rule in catalog():
        for example in rule.examples():
            assert isinstance(example, Example)
            assert ir.verify_model(example.build()) == []


def test_fix_input_shapes_that_cannot_run_is_a_usage_error() -> None:
    from tflkit.rewriter.example import graph_model, i32

    model = graph_model([((1, 8), F32)], lambda b, x: b.RESHAPE(x, i32(1, 8), shape=(1, 8)))
    model.main.inputs[0].shape_signature = (-1, 8)
    with pytest.raises(UsageError, match="does not run with --input-shape x0=3,8"):
        fix_input_shapes(model, {"x0": [3, 8]}, infer=computed_shapes)
