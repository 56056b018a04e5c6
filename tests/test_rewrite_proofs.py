"""Every fired rule's own proof runs, and any one failing stops the write.

Two rules with proofs of their own fire on one model: the first (an exact rewrite) proves the
model within the rules' combined contract; the second scales by 1.001 under a loose contract
while its own proof demands bit-identical outputs, so it fails on the real CPU interpreter.
Running only the first proof would write the model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tflkit import ir
from tflkit.ir.builder import OpBuilder
from tflkit.rewriter.contract import EXACT, Contract, bound
from tflkit.rewriter.example import graph_model, options
from tflkit.rewriter.rule import Match, OpRewrite, OwnProof, replace
from tflkit.rewriter.ruleset import RuleSet
from tflkit.rewriter.run import rewrite_file
from tflkit.rewriter.verify import Verification, verify

F32 = np.float32


class _AbsAsMaximum(OpRewrite, OwnProof):
    """ABS(x) -> MAXIMUM(x, x * -1): exact; proven by the CPU comparison within the contract."""

    name = "abs_as_maximum"
    fixes = ("ABS",)

    def __init__(self) -> None:
        self.proofs: list[bool] = []

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        x = match.op.inputs[0]
        negated = b.MUL(x, np.array(-1.0, F32), options=options("MulOptions"))
        replace(match.op, [b.MAXIMUM(x, negated)])

    def verify_rewrite(
        self, original: bytes, rewritten: bytes, contract: Contract, seeds: tuple[int, ...]
    ) -> Verification:
        verdict = verify(original, rewritten, contract, seeds=seeds)
        self.proofs.append(verdict.ok)
        return verdict


class _NegScaled(OpRewrite, OwnProof):
    """NEG(x) -> x * -1.001: within its stated contract, but its own proof asks for bits."""

    name = "neg_scaled"
    fixes = ("NEG",)
    contract = bound(1.0, 0.01, "scaled on purpose")

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        scale = np.array(-1.001, F32)
        replace(match.op, [b.MUL(match.op.inputs[0], scale, options=options("MulOptions"))])

    def verify_rewrite(
        self, original: bytes, rewritten: bytes, contract: Contract, seeds: tuple[int, ...]
    ) -> Verification:
        return verify(original, rewritten, EXACT, seeds=seeds)


def test_second_failing_proof_stops_the_write(tmp_path: Path) -> None:
    src, dst = tmp_path / "abs_neg.tflite", tmp_path / "out.tflite"
    ir.save(graph_model([((1, 8), F32)], lambda b, x: b.NEG(b.ABS(x))), src)
    first = _AbsAsMaximum()
    rules = RuleSet([first, _NegScaled()])
    outcome, written = rewrite_file(
        src, dst, rule_names=["abs_as_maximum", "neg_scaled"], rules=rules
    )
    assert sorted(f.rule for f in outcome.passes.fired) == ["abs_as_maximum", "neg_scaled"]
    assert first.proofs == [True]  # the first proof ran and held...
    verification = outcome.verification
    assert verification is not None and not verification.ok  # ...the second did not
    assert verification.contract == EXACT.describe()
    assert not written and not dst.exists()


def test_every_holding_proof_lets_the_write_through(tmp_path: Path) -> None:
    src, dst = tmp_path / "abs.tflite", tmp_path / "out.tflite"
    ir.save(graph_model([((1, 8), F32)], lambda b, x: b.ABS(x)), src)
    first = _AbsAsMaximum()
    outcome, written = rewrite_file(src, dst, rule_names=["abs_as_maximum"], rules=RuleSet([first]))
    assert first.proofs == [True] and outcome.verification is not None
    assert outcome.verification.ok and written and dst.exists()
