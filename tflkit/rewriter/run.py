"""``rewrite``: fix shapes, apply rules to a fixed point, verify on the CPU, write atomically."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tflkit import ir
from tflkit.compat.check import dynamic_input_advice
from tflkit.compat.check import dynamic_inputs as entry_dynamic_inputs
from tflkit.delegates.litert_cpu import computed_shapes
from tflkit.errors import ModelLoadError, TflkitError, UsageError
from tflkit.ir.graph import Model, Subgraph
from tflkit.ir.shapes import by_tensor_name, fix_input_shapes
from tflkit.ir.structure import verify_bytes
from tflkit.proc.cpu_smoke import ensure_cpu_safe
from tflkit.rewriter.contract import Contract, combine
from tflkit.rewriter.passes import (
    DEFAULT_MAX_STEPS,
    Gate,
    PassResult,
    RejectedOps,
    run_passes,
    running_subgraphs,
)
from tflkit.rewriter.rule import ModelPass, OwnProof, Rule
from tflkit.rewriter.rules import catalog
from tflkit.rewriter.ruleset import RuleSet
from tflkit.rewriter.shapes import default_input_shapes
from tflkit.rewriter.verify import Verification, verify


class RewriteRefused(TflkitError):
    """The rewritten model's outputs differ beyond the rules' contracts (use --force)."""

    exit_code = 1


@dataclass
class RewriteOutcome:
    """Everything one rewrite did, before anything is written."""

    original: bytes
    rewritten: bytes
    model: Model
    passes: PassResult
    contract: Contract
    verification: Verification | None
    shape_fixes: list[str] = field(default_factory=list)
    #: Inputs still dynamic after the rewrite, by the names users see (signature names).
    dynamic_inputs: list[str] = field(default_factory=list)
    rules_used: list[str] = field(default_factory=list)
    gated_by_checker: bool = False
    #: What fired model passes tell the app (``ModelPass.report_records``), by ``report_key``.
    rule_records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Dynamic batches fixed without ``--input-shape``: input name -> the stored shape used.
    default_shapes: dict[str, list[int]] = field(default_factory=dict)
    #: ``--input-shape`` to pass for the inputs still dynamic, with the stored numbers.
    dynamic_advice: str = ""

    @property
    def changed(self) -> bool:
        return self.original != self.rewritten


def histogram(model: Model) -> dict[str, int]:
    """Op type -> count, summed over the subgraphs that run as graphs of their own (the main
    one and every signature's: ``running_subgraphs``; not composites' decompositions)."""
    ops = (op.type for sg in running_subgraphs(model) for op in sg.ops)
    return dict(sorted(Counter(ops).items()))


def checker_gate(target: str) -> Gate | None:
    """A gate backed by the static GPU checker, or None when no checker is installed.

    The pass manager asks it once per sweep for each subgraph it walks (the main one and every
    signature's), so ``decode`` is gated by the same table as ``prefill``."""
    try:
        from tflkit.compat import static
    except ImportError:
        return None

    def gate(subgraph: Subgraph) -> RejectedOps:
        rejected: RejectedOps = {}
        for op in subgraph.ops:
            found = static.check_op(op, target)
            if found:
                rejected[id(op)] = [f"{r.code}: {r.message}" for r in found]
        return rejected

    return gate


def rewrite_model(
    data: bytes,
    *,
    rule_names: Sequence[str] = (),
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    inputs: Mapping[str, np.ndarray] | None = None,
    target: str = "litert-gpu",
    use_checker: bool = True,
    max_steps: int = DEFAULT_MAX_STEPS,
    seeds: Sequence[int] = (0, 1),
    check: bool = True,
    label: str | None = None,
    fix_dynamic_batch: bool = True,
    rules: RuleSet | None = None,
) -> RewriteOutcome:
    """Rewrite model bytes; ``rule_names`` forces those rules on every op they match.

    ``label`` names the model in error messages (e.g. its path). ``fix_dynamic_batch``: when
    every dynamic input ``input_shapes`` leaves open is a batch stored as 1
    (:func:`default_input_shapes`), fix it to its stored shape. ``rules``: the catalogue to
    draw from (default: :func:`~tflkit.rewriter.rules.catalog`).
    """
    model = ir.load(data, label=label)
    broken = ir.verify_model(model)
    if broken:  # the input's own problem (exit 2), not a rule's
        raise ModelLoadError(f"{label or '<bytes>'}: invalid model: {broken[0][:300]}")
    defaults = default_input_shapes(model, input_shapes) if fix_dynamic_batch else {}
    shapes = {**(input_shapes or {}), **defaults}
    try:
        shape_fixes = fix_input_shapes(model, shapes, infer=computed_shapes) if shapes else []
    except UsageError:
        if not defaults:
            raise
        # the stored batch does not run: leave it dynamic, say which --input-shape to pass
        defaults, shapes = {}, dict(input_shapes or {})
        shape_fixes = fix_input_shapes(model, shapes, infer=computed_shapes) if shapes else []
    # The original runs at the same shapes: the CPU interpreter names inputs by tensor name.
    tensor_shapes = by_tensor_name(model, shapes) if shapes else None
    still = entry_dynamic_inputs(model)
    known = catalog() if rules is None else rules
    chosen = known.select(rule_names) if rule_names else known.defaults()
    gate = None if rule_names or not use_checker else checker_gate(target)
    passes = run_passes(model, list(chosen), gate=gate, max_steps=max_steps)
    fired = [r for r in chosen if r.name in {f.rule for f in passes.fired}]
    contract = combine([r.contract for r in fired])
    rewritten = ir.dumps(model) if (passes.fired or shape_fixes) else data
    problems = ir.verify_model(model)
    if problems:  # a bug in a rule, not a problem of the input: an internal error (exit 3)
        raise RuntimeError(f"rewrite produced an invalid model: {problems[0][:200]}")
    verification = None
    if check and rewritten != data:
        verification = _prove(fired, data, rewritten, contract, seeds, inputs, tensor_shapes)
    if verification is not None and verification.ok:
        _runtime_checks(fired, data, rewritten, seeds, verification)
    records = {r.report_key: r.report_records(model) for r in fired if isinstance(r, ModelPass)}
    return RewriteOutcome(
        data,
        rewritten,
        model,
        passes,
        contract,
        verification,
        shape_fixes,
        [d.name for d in still],
        [r.name for r in chosen],
        gate is not None,
        records,
        defaults,
        dynamic_input_advice(still),
    )


def _prove(
    fired: Sequence[Rule],
    original: bytes,
    rewritten: bytes,
    contract: Contract,
    seeds: Sequence[int],
    inputs: Mapping[str, np.ndarray] | None,
    input_shapes: Mapping[str, Sequence[int]] | None,
) -> Verification:
    """The proof of the rewrite: every fired rule's own proof (state made explicit, a
    decomposition fixed), the first that fails deciding; else the default one-shot comparison
    with the original on the CPU."""
    provers = [r for r in fired if isinstance(r, OwnProof)]
    if not provers:
        return verify(
            original, rewritten, contract, seeds=seeds, inputs=inputs, input_shapes=input_shapes
        )
    first = None
    for rule in provers:
        verification = rule.verify_rewrite(original, rewritten, contract, tuple(seeds))
        if not verification.ok:
            return verification
        first = first or verification
    assert first is not None
    return first


def _runtime_checks(
    fired: Sequence[Rule],
    original: bytes,
    rewritten: bytes,
    seeds: Sequence[int],
    verification: Verification,
) -> None:
    """The fired rules' own proof obligations (:meth:`Rule.runtime_check`); the first that
    fails fails ``verification``."""
    for rule in fired:
        problem = rule.runtime_check(original, rewritten, tuple(seeds))
        if problem is not None:
            verification.ok, verification.problem = False, problem
            return


def rewrite_file(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    force: bool = False,
    **kwargs: object,
) -> tuple[RewriteOutcome, bool]:
    """Rewrite ``source`` into ``destination`` (never the same file); returns (outcome, written).

    Nothing is written when verification fails and ``force`` is not set, or when nothing
    changed (no rule fired, no shape was fixed): ``outcome.changed`` tells the two apart.
    """
    src, dst = Path(source), Path(destination)
    if dst.exists() and src.exists() and os.path.samefile(src, dst):
        raise UsageError(f"refusing to overwrite the input model {src}; choose another -o path")
    try:
        data = src.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {src}: {exc.strerror or exc}") from None
    verify_bytes(data, str(src))  # a sound file first, then the CPU interpreter in a child
    ensure_cpu_safe(data, str(src))
    outcome = rewrite_model(data, label=str(src), **kwargs)  # type: ignore[arg-type]
    verification = outcome.verification
    if verification is not None and not verification.ok and not force:
        return outcome, False
    if not outcome.changed:  # nothing to do: no byte-identical copy posing as a result
        return outcome, False
    ir.save(outcome.model, dst)
    return outcome, True
