"""Fixed-point pass manager: apply rules until nothing changes, and say why rules did not fire.

Each sweep walks every subgraph that runs as a graph of its own (:func:`running_subgraphs`: the
main one and each signature's, so an LLM's ``decode`` as well as its ``prefill``; not the
decomposition subgraphs of composites nor control-flow bodies), asks the gate (the static GPU
checker, when wired) which of its ops the target rejects, then walks its ops once and lets the
first op rule whose pattern, gate and ``match`` agree rewrite the op (a rule with
``ungated = True``, constant folding, passes the gate on ops the target accepts too). Then each
model pass that matches the model rewrites it as a whole. Sweeps repeat until one changes
nothing.

A rule must never need to fire again on what it produced with nothing gained: when a rule is
about to rewrite an op it created itself, and that op looks exactly like the one it replaced
(same type, version, input and output types and shapes), the rewrite cannot converge and
:class:`RewriteLoop` (a bug in tflkit, exit 3) stops it at once. The step limit is the last
guard, and reaching it is the same error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tflkit.ir import graph_edits
from tflkit.ir.builder import OpBuilder
from tflkit.ir.graph import Model, Op, Subgraph
from tflkit.jsonable import plain_fields
from tflkit.rewriter.rule import ModelPass, OpRewrite, Rule

#: Maps ``id(op)`` to the target's rejection reasons for that op (ops absent: accepted).
RejectedOps = dict[int, list[str]]
#: Asked once per sweep; returns None when no checker is available (rule patterns decide).
Gate = Callable[[Subgraph], RejectedOps | None]

#: Constant folding takes one step per op of constants (BirdNET 2.4: 99 of its 157 steps), so
#: the limit leaves room for a few hundred folds in a large model besides the other rules.
DEFAULT_MAX_STEPS = 2000


class RewriteLoop(RuntimeError):
    """A rule does not converge (an internal error: a bug in the rule, not in the model)."""


@dataclass
class Firing:
    """One rewrite: which rule, on which op (index in its subgraph before the rewrite), at
    which step."""

    rule: str
    op_type: str
    op_index: int
    op_outputs: list[str]
    step: int
    #: The op was created by an earlier firing of the same rule.
    on_own_output: bool = False
    #: Index of the op's subgraph when the rule fired (0: the main graph).
    subgraph: int = 0
    #: The signature whose subgraph that is (``decode``), None when no signature names it.
    signature: str | None = None


#: id(op) -> (the op, the rule that created it, fingerprint of the op that rule replaced).
_Lineage = dict[int, tuple[Op, str, tuple[Any, ...]]]


def fingerprint(op: Op) -> tuple[Any, ...]:
    """What a rule sees of an op, names aside: type, version, tensor types and shapes."""

    def sig(t: Any) -> Any:
        return None if t is None else (t.type, t.shape, t.shape_signature, t.is_constant)

    return (
        op.type,
        op.version,
        tuple(sig(t) for t in op.inputs),
        tuple(sig(t) for t in op.outputs),
    )


@dataclass
class Skip:
    """A rule that matched an op's type but did not fire, and why."""

    rule: str
    op_type: str
    op_index: int
    op_outputs: list[str]
    reason: str
    subgraph: int = 0
    signature: str | None = None


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
            f"{s.op_type} #{_where(s.subgraph, s.op_index)} ({', '.join(s.op_outputs)}): {s.reason}"
            for s in self.skipped
            if s.rule == rule and (tensor_name is None or tensor_name in s.op_outputs)
        ]

    def to_json(self) -> dict[str, Any]:
        return plain_fields(self)


def running_subgraphs(model: Model) -> list[Subgraph]:
    """The subgraphs that run as graphs of their own, in index order: the main one and every
    signature's (roles ``main`` and ``signature`` of ``compat.static.subgraph_roles``)."""
    from tflkit.compat.static import subgraph_roles

    roles = subgraph_roles(model)
    return [sg for i, sg in enumerate(model.subgraphs) if roles.get(i) in ("main", "signature")]


def signature_key(subgraph: Subgraph) -> str | None:
    """The key of the (first) signature whose subgraph is ``subgraph``, else None."""
    model = subgraph.model
    signatures = model.signatures if model is not None else []
    return next((s.key for s in signatures if s.subgraph is subgraph), None)


def _where(subgraph: int, op_index: int) -> str:
    """``3`` for op 3 of the main graph, ``1:3`` for op 3 of subgraph 1."""
    return str(op_index) if subgraph == 0 else f"{subgraph}:{op_index}"


def run_passes(
    model: Model,
    rules: Sequence[Rule],
    *,
    gate: Gate | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> PassResult:
    """Rewrite ``model``'s :func:`running_subgraphs` in place with ``rules`` until a fixed
    point.

    Raises :class:`RewriteLoop` when a rule would rewrite its own output into itself again, or
    after ``max_steps`` rewrites.
    """
    result = PassResult()
    lineage: _Lineage = {}
    op_rules = [r for r in rules if isinstance(r, OpRewrite)]
    model_passes = [r for r in rules if isinstance(r, ModelPass)]
    while True:
        result.sweeps += 1
        skips: dict[tuple[str, int], Skip] = {}
        changed = False
        for subgraph in running_subgraphs(model):
            if not any(sg is subgraph for sg in model.subgraphs):
                continue  # removed by an earlier rewrite in this sweep
            rejected = gate(subgraph) if gate is not None else None
            changed |= _sweep(subgraph, op_rules, rejected, skips, result, lineage, max_steps)
        for model_pass in model_passes:
            _check_steps(result, max_steps)
            changed |= _run_model_pass(model, model_pass, skips, result)
        result.skipped = list(skips.values())
        if not changed:
            break
    if result.fired:
        graph_edits.remove_unused(model)
    return result


def _sweep(
    subgraph: Subgraph,
    rules: Sequence[OpRewrite],
    rejected: RejectedOps | None,
    skips: dict[tuple[str, int], Skip],
    result: PassResult,
    lineage: _Lineage,
    max_steps: int,
) -> bool:
    """Walk ``subgraph``'s ops once; True when a rule fired."""
    changed = False
    for op in list(subgraph.ops):
        if op.subgraph is not subgraph:
            continue  # retired by an earlier rewrite in this sweep
        _check_steps(result, max_steps)
        firing = _try_rules(op, rules, rejected, skips, result.steps, lineage)
        if firing is not None:
            result.fired.append(firing)
            changed = True
    return changed


def _check_steps(result: PassResult, max_steps: int) -> None:
    """Raise :class:`RewriteLoop` once ``max_steps`` rewrites were made."""
    if result.steps >= max_steps:
        result.converged = False
        counts = Counter(f.rule for f in result.fired).most_common(1)
        raise RewriteLoop(
            f"the rewrite did not converge in {max_steps} steps (rule "
            f"{counts[0][0]} fired {counts[0][1]} times)"
        )


def _run_model_pass(
    model: Model, model_pass: ModelPass, skips: dict[tuple[str, int], Skip], result: PassResult
) -> bool:
    """Run ``model_pass`` when it matches ``model``; True when it did. The trace names its
    first anchor op when it fires, and each anchor when it cannot."""
    anchors = model_pass.anchors(model)
    if not anchors:
        return False
    where = (0, signature_key(model.main))
    match = model_pass.match_model(model)
    if not match:
        assert match.reason is not None
        for op in anchors:
            outputs = [t.name for t in op.outputs]
            skip = Skip(model_pass.name, op.type, op.index, outputs, match.reason, *where)
            skips[(model_pass.name, id(op))] = skip
        return False
    anchor = match.op
    assert anchor is not None
    outputs = [t.name for t in anchor.outputs]
    step = result.steps
    firing = Firing(model_pass.name, anchor.type, anchor.index, outputs, step, False, *where)
    model_pass.run(match)
    result.fired.append(firing)
    return True


def _try_rules(
    op: Op,
    rules: Sequence[OpRewrite],
    rejected: RejectedOps | None,
    skips: dict[tuple[str, int], Skip],
    step: int,
    lineage: _Lineage,
) -> Firing | None:
    index = op.index
    outputs = [t.name for t in op.outputs]
    origin = lineage.get(id(op))
    subgraph = op.subgraph
    assert subgraph is not None
    where = (subgraph.index, signature_key(subgraph))
    for rule in rules:
        if not rule.pattern(op):
            continue
        reason = _gate_reason(rule, op, rejected)
        match = rule.match(op) if reason is None else None
        if match is not None and not match:
            reason = match.reason
        if match is None or reason is not None:
            assert reason is not None
            skips[(rule.name, id(op))] = Skip(rule.name, op.type, index, outputs, reason, *where)
            continue
        own = origin is not None and origin[0] is op and origin[1] == rule.name
        before = fingerprint(op)
        if own and origin is not None and origin[2] == before:
            raise RewriteLoop(
                f"rule {rule.name} does not converge: it would rewrite the {op.type} op "
                f"{index} it produced into the same op again"
            )
        builder = OpBuilder(subgraph, before=op, prefix=f"{outputs[0] if outputs else op.type}")
        rule.rewrite(match, builder)
        if op.subgraph is not None:
            raise RewriteLoop(f"rule {rule.name} did not retire the {op.type} op it rewrote")
        for new in builder.created:
            lineage[id(new)] = (new, rule.name, before)
        return Firing(rule.name, op.type, index, outputs, step, own, *where)
    return None


def _gate_reason(rule: OpRewrite, op: Op, rejected: RejectedOps | None) -> str | None:
    if rejected is None or rule.ungated:
        return None  # an ungated rule (constant folding) gains on accepted ops too
    reasons = rejected.get(id(op))
    if not reasons:
        return "the target accepts this op"
    if not rule.addresses(reasons):
        return f"the target rejects it for another reason: {'; '.join(reasons)}"
    return None
