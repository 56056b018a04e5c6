"""Fixed-point pass manager: apply rules until nothing changes, and say why rules did not fire.

Each sweep asks the gate (the static GPU checker, when wired) which ops the target rejects, then
walks the main subgraph's ops once and lets the first rule whose pattern, gate and ``check``
agree rewrite the op. Sweeps repeat until one changes nothing or the step limit is reached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tflkit.ir.builder import OpBuilder
from tflkit.ir.graph import Model, Op, Subgraph
from tflkit.rewriter.rule import Rule

#: Maps ``id(op)`` to the target's rejection reasons for that op (ops absent: accepted).
RejectedOps = dict[int, list[str]]
#: Asked once per sweep; returns None when no checker is available (rule patterns decide).
Gate = Callable[[Subgraph], RejectedOps | None]

DEFAULT_MAX_STEPS = 1000


@dataclass
class Firing:
    """One rewrite: which rule, on which op (index before the rewrite), at which step."""

    rule: str
    op_type: str
    op_index: int
    op_outputs: list[str]
    step: int


@dataclass
class Skip:
    """A rule that matched an op's type but did not fire, and why."""

    rule: str
    op_type: str
    op_index: int
    op_outputs: list[str]
    reason: str


@dataclass
class PassResult:
    """What a run of the pass manager did."""

    fired: list[Firing] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    sweeps: int = 0
    converged: bool = True

    @property
    def steps(self) -> int:
        return len(self.fired)

    def why_not(self, rule: str, tensor_name: str | None = None) -> list[str]:
        """Why ``rule`` did not fire (on the op producing ``tensor_name``, if given)."""
        return [
            f"{s.op_type} #{s.op_index} ({', '.join(s.op_outputs)}): {s.reason}"
            for s in self.skipped
            if s.rule == rule and (tensor_name is None or tensor_name in s.op_outputs)
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "fired": [asdict(f) for f in self.fired],
            "skipped": [asdict(s) for s in self.skipped],
            "sweeps": self.sweeps,
            "converged": self.converged,
        }


def run_passes(
    model: Model,
    rules: Sequence[Rule],
    *,
    gate: Gate | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> PassResult:
    """Rewrite ``model.main`` in place with ``rules`` until a fixed point (or ``max_steps``)."""
    subgraph = model.main
    result = PassResult()
    while True:
        rejected = gate(subgraph) if gate is not None else None
        result.sweeps += 1
        skips: dict[tuple[str, int], Skip] = {}
        changed = False
        for op in list(subgraph.ops):
            if op.subgraph is not subgraph:
                continue  # retired by an earlier rewrite in this sweep
            if result.steps >= max_steps:
                result.converged = False
                break
            firing = _try_rules(op, rules, rejected, skips, result.steps)
            if firing is not None:
                result.fired.append(firing)
                changed = True
        result.skipped = list(skips.values())
        if not changed or not result.converged:
            break
    if result.fired:
        model.remove_unused()
    return result


def _try_rules(
    op: Op,
    rules: Sequence[Rule],
    rejected: RejectedOps | None,
    skips: dict[tuple[str, int], Skip],
    step: int,
) -> Firing | None:
    index = op.index
    outputs = [t.name for t in op.outputs]
    for rule in rules:
        if not rule.pattern(op):
            continue
        reason = _gate_reason(rule, op, rejected)
        if reason is None:
            reason = rule.check(op)
        if reason is not None:
            skips[(rule.name, id(op))] = Skip(rule.name, op.type, index, outputs, reason)
            continue
        subgraph = op.subgraph
        assert subgraph is not None
        builder = OpBuilder(subgraph, before=op, prefix=f"{outputs[0] if outputs else op.type}")
        rule.rewrite(op, builder)
        if op.subgraph is not None:
            raise RuntimeError(f"rule {rule.name} did not retire the {op.type} op it rewrote")
        return Firing(rule.name, op.type, index, outputs, step)
    return None


def _gate_reason(rule: Rule, op: Op, rejected: RejectedOps | None) -> str | None:
    if rejected is None:
        return None
    reasons = rejected.get(id(op))
    if not reasons:
        return "the target accepts this op"
    if not rule.addresses(reasons):
        return f"the target rejects it for another reason: {'; '.join(reasons)}"
    return None
