"""The rule contract: what a rewrite rule declares and the helpers rules share.

Two kinds of rule, like onnxscript's rewriter and its passes:

* an :class:`OpRewrite` rewrites one op at a time: the op types and accelerator reasons it fixes,
  a ``pattern`` that selects candidate ops, a ``match`` that returns a :class:`Match` carrying
  what it found (or a failure with the reason, shown in the trace), a ``rewrite`` of that match
  built with the IR's :class:`~tflkit.ir.builder.OpBuilder`, its numeric :class:`Contract`,
  and example models the test harness turns into tests;
* a :class:`ModelPass` rewrites the model as a whole (every op of resource-variable state at
  once), may change its interface, and carries its own proof and report.

A rule whose proof is not the default one-shot comparison with the original on the builtin
CPU kernels is an :class:`OwnProof` (every model pass is one). Whether a rule runs by default
or only when named is said by the catalogue (``tflkit.rewriter.rules``), not by the rule.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from tflkit.compat.reasons import Reason
from tflkit.ir import schema
from tflkit.ir.graph import Model, Op, Tensor
from tflkit.rewriter.contract import EXACT, Contract

if TYPE_CHECKING:
    from tflkit.ir.builder import OpBuilder
    from tflkit.rewriter.verify import Verification


@dataclass(frozen=True)
class Example:
    """A model that exercises a rule, built with the IR (no TensorFlow)."""

    name: str
    build: Callable[[], Model]
    #: Op types allowed to stay on the CPU after the rewrite (e.g. an int64 CAST at the edge).
    residual: tuple[str, ...] = ()
    #: For originals the CPU interpreter cannot run: their outputs computed another way
    #: (``model, inputs by name -> outputs by name``), e.g. ``example.numpy_reference``.
    reference: Callable[[Model, dict[str, Any]], dict[str, Any]] | None = None
    #: Why the example has no full-int8 variant (the CPU interpreter has no int8 kernel for
    #: its op); None: the harness runs the rule on ``example.int8_variant`` of it too.
    no_int8: str | None = None


class Match:
    """What a rule's ``match`` found: the op and its bindings (the tensors and ops the rewrite
    needs, found once), or a failure saying why the op cannot be rewritten.

    True when it matched; ``match["x"]`` reads a binding.
    """

    __slots__ = ("bindings", "op", "reason")

    def __init__(self, op: Op | None, reason: str | None = None, **bindings: Any) -> None:
        self.op = op
        self.reason = reason
        self.bindings: dict[str, Any] = bindings

    @classmethod
    def fail(cls, reason: str) -> Match:
        """No match, and why (shown in the rewrite trace and in ``check``'s fix hints)."""
        return cls(None, reason)

    @classmethod
    def unless(cls, op: Op, problem: str | None, **bindings: Any) -> Match:
        """A match of ``op`` when ``problem`` is None, else a failure for that reason."""
        return cls(op, None, **bindings) if problem is None else cls.fail(problem)

    def __bool__(self) -> bool:
        return self.reason is None

    def __getitem__(self, name: str) -> Any:
        return self.bindings[name]

    def __repr__(self) -> str:
        if self.reason is not None:
            return f"Match.fail({self.reason!r})"
        return f"Match({self.op!r}, {', '.join(self.bindings)})"


class Rule:
    """What every rule declares: its name, what it fixes, its contract and its examples."""

    #: Unique name, used by ``--rule NAME`` and in reports.
    name: ClassVar[str] = ""
    #: One line saying what the rule does.
    summary: ClassVar[str] = ""
    #: Op types the rule rewrites (an op rule's default ``pattern``; the ops a model pass
    #: answers for in ``check``'s fix hints).
    fixes: ClassVar[tuple[str, ...]] = ()
    #: ``pattern`` may accept an op of any type, not only of ``fixes`` (constant folding): the
    #: catalogue's index then offers the rule for every op type.
    any_op_type: ClassVar[bool] = False
    #: Static checker reason codes the rule fixes.
    codes: ClassVar[tuple[Reason, ...]] = ()
    #: Accelerator log messages (substrings) of the rejections the rule fixes.
    reasons: ClassVar[tuple[str, ...]] = ()
    contract: ClassVar[Contract] = EXACT

    def examples(self) -> tuple[Example, ...]:
        """Models on which the rule must fire exactly once."""
        return ()

    def runtime_check(
        self, original: bytes, rewritten: bytes, seeds: tuple[int, ...]
    ) -> str | None:
        """A proof obligation beyond the CPU comparison, run once the comparison held (e.g.
        against a runtime kernel the rewrite stops using); None when there is none or it holds,
        else why the rewrite must not be trusted."""
        return None

    def addresses(self, rejection_reasons: Sequence[str]) -> bool:
        """Whether one of the target's rejection reasons for an op is one this rule fixes.

        A reason is ``"CODE: message"`` (static checker) or an accelerator log message.
        """
        if not self.codes and not self.reasons:
            return True
        for reason in rejection_reasons:
            code = reason.split(":", 1)[0].strip()
            if code in self.codes or any(text in reason for text in self.reasons):
                return True
        return False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class OpRewrite(Rule):
    """A rule that rewrites one op at a time; subclasses set the class attributes and override
    ``match`` and ``rewrite``."""

    #: Input positions that must be present (not omitted) for the rule to look at an op.
    required_inputs: ClassVar[tuple[int, ...]] = (0,)
    #: How many outputs the ops the rule rewrites have.
    num_outputs: ClassVar[int | None] = 1
    #: The rule may fire on ops the target accepts too (constant folding: an op of constants
    #: costs a kernel launch and a partition boundary wherever it runs); others only fix
    #: rejected ops when the pass manager is gated by the checker.
    ungated: ClassVar[bool] = False

    def pattern(self, op: Op) -> bool:
        """True for ops this rule is about (cheap, type-level).

        Total: any op, however malformed (no inputs, omitted inputs, no outputs), gets an
        answer. Subclasses extend it with ``super().pattern(op) and ...``; ``match`` is only
        asked about ops the pattern accepted.
        """
        return op.type in self.fixes and well_formed(op, self.required_inputs, self.num_outputs)

    def match(self, op: Op) -> Match:
        """A :class:`Match` of ``op`` with what the rewrite needs, or ``Match.fail(reason)``."""
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        """Build the replacement before ``match.op`` with ``b`` and retire the op (see
        ``replace``)."""
        raise NotImplementedError


class OwnProof(ABC):
    """A rule whose ``verify_rewrite`` is the proof, not the default one-shot comparison with
    the original on the builtin CPU kernels: a rule that changes the interface, or one that
    changes what the builtin kernels compute by design (a wrong decomposition repaired, proven
    against a runtime kernel). ``rewrite`` runs every fired rule's proof."""

    @abstractmethod
    def verify_rewrite(
        self, original: bytes, rewritten: bytes, contract: Contract, seeds: tuple[int, ...]
    ) -> Verification:
        """The proof that ``rewritten`` keeps what ``original`` computes, within ``contract``."""


class ModelPass(Rule, OwnProof):
    """A rewrite of the model as a whole (e.g. every op of resource-variable state at once),
    which may change its interface: it carries its own proof and says what the app must know
    (``report_records``, listed under ``report_key`` in the rewrite report)."""

    #: The key under which the rewrite report (JSON) lists ``report_records``.
    report_key: ClassVar[str] = ""

    def anchors(self, model: Model) -> list[Op]:
        """The main graph's ops the pass fixes, in execution order (the trace names the first
        when the pass fires, and each when it cannot)."""
        return [op for op in model.main.ops if op.type in self.fixes]

    @abstractmethod
    def match_model(self, model: Model) -> Match:
        """A match of ``model`` (its op: the first anchor) when the pass can rewrite it, else
        ``Match.fail(reason)``."""

    @abstractmethod
    def run(self, match: Match) -> None:
        """Rewrite the model ``match_model`` matched, in place."""

    def report_records(self, model: Model) -> list[dict[str, Any]]:
        """What the app must know once the pass ran on ``model`` (JSON-ready records)."""
        return []

    def report_lines(self, records: Sequence[dict[str, Any]]) -> list[str]:
        """``report_records`` for a terminal: a heading line, then one line per record."""
        return []


# --- helpers shared by rules ------------------------------------------------------------------
def well_formed(op: Op, required: Sequence[int], num_outputs: int | None = 1) -> bool:
    """``op`` has the ``required`` inputs present and ``num_outputs`` outputs (None: at least
    one)."""
    inputs = op.inputs
    if any(i >= len(inputs) or inputs[i] is None for i in required):
        return False
    return len(op.outputs) == num_outputs if num_outputs is not None else bool(op.outputs)


def replace(op: Op, new_outputs: Sequence[Tensor]) -> None:
    """Retire ``op``: its readers read ``new_outputs``; graph outputs keep their tensor names.

    A fresh replacement (no readers yet) of a quantized output gets that output's scales and
    zero points: it holds the same values, so it must hold them in the same encoding (a
    quantized STRIDED_SLICE, say, copies raw values into an output whose scale may differ from
    its input's).
    """
    subgraph = op.subgraph
    assert subgraph is not None
    old_outputs = list(op.outputs)
    subgraph.remove_op(op)
    for old, new in zip(old_outputs, new_outputs, strict=True):
        if old.is_quantized and new.type == old.type and not new.consumers:
            new.quantization = copy.deepcopy(old.quantization)
        pinned = old.is_observable
        subgraph.replace_all_uses_with(old, new)
        if pinned:
            name = old.name
            old.name = subgraph.unique_name(f"{name}/replaced")
            new.name = name
            if new.quantization is None:
                new.quantization = old.quantization


def is_float(tensor: Tensor | None) -> bool:
    return (
        tensor is not None and tensor.type == schema.TensorType.FLOAT32 and not tensor.is_quantized
    )


def const_ints(tensor: Tensor | None) -> list[int] | None:
    """The values of a constant integer tensor as a flat list, else None."""
    if tensor is None or not tensor.is_constant or tensor.data is None:
        return None
    if tensor.dtype is None or tensor.dtype.kind not in "iu":
        return None
    return [int(v) for v in tensor.data.reshape(-1)]


def reshape(b: OpBuilder, x: Tensor, shape: Sequence[int], name: str = "reshape") -> Tensor:
    """A RESHAPE of ``x`` to a static ``shape`` (shape given as an int32 constant too)."""
    import numpy as np

    dims = [int(d) for d in shape]
    options = schema.fb.ReshapeOptionsT()
    options.newShape = dims
    return b.RESHAPE(x, np.array(dims, np.int32), shape=dims, options=options, name=name)
