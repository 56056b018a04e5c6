"""What a target is (``Target``, one ``OpRule`` per op type) and the checks every op gets.

A target file (``litert_gpu.py``, ``tflite_gpu.py``) is a table: op type -> ``OpRule``. The
predicates its rows list live in ``tflkit.compat.predicates``, by family. The checks here apply to
every op whatever its row says (rank and type of every tensor, empty and variable tensors, the
fused activation, a data-dependent output shape); ``compat/static.py`` runs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tflkit.compat.predicates.activations import ACTIVATION_NAMES, GPU_ACTIVATIONS
from tflkit.compat.predicates.operands import Check
from tflkit.compat.predicates.shapes import fmt_shape
from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature


@dataclass(frozen=True)
class OpRule:
    """What one target requires of one op type.

    ``in_dtypes``/``out_dtypes`` replace the target's allowed types for runtime tensors;
    ``extra_in_dtypes``/``extra_out_dtypes`` add to them. ``activation`` names the option
    holding a fused activation, checked against ``activations``. ``checks`` run in order.
    """

    max_version: int | None = None
    in_dtypes: frozenset[str] | None = None
    out_dtypes: frozenset[str] | None = None
    extra_in_dtypes: frozenset[str] = frozenset()
    extra_out_dtypes: frozenset[str] = frozenset()
    activation: str | None = None
    activations: frozenset[int] = GPU_ACTIVATIONS
    checks: tuple[Check, ...] = ()
    #: True when the op never reaches the generic tensor checks (decided by its own checks).
    skip_tensor_checks: bool = False


@dataclass(frozen=True)
class Target:
    """One GPU runtime: its op table and the behaviours around it."""

    name: str
    title: str
    rules: Mapping[str, OpRule]
    custom_rules: Mapping[str, OpRule]
    #: Allowed types of runtime (non-constant) tensors, before per-op additions.
    in_dtypes: frozenset[str]
    out_dtypes: frozenset[str]
    max_rank: int = 4
    #: Ops that TFLite evaluates while loading when every input is constant: they never reach
    #: the delegate, whatever the delegate would say about them.
    const_folded: frozenset[str] = frozenset()
    #: The runtime has no Flex delegate: a Flex op makes the model fail to load at all.
    flex_fatal: bool = True
    #: A custom op without a registered CPU kernel makes the model fail to load.
    unknown_custom_fatal: bool = True
    #: The runtime refuses models with variable tensors (stateful LSTM/RNN state).
    variable_tensors_fatal: bool = False
    #: How many supported partitions the delegate takes by default (None: all of them). The
    #: classic GPU delegate takes only the largest one unless the app raises the limit.
    max_partitions: int | None = None
    #: Evidence behind the table, shown in reports and docs.
    provenance: str = ""
    extra: Mapping[str, object] = field(default_factory=dict)


# --- generic tensor checks -----------------------------------------------------------------


def allowed_dtypes(rule: OpRule, target: Target) -> tuple[frozenset[str], frozenset[str]]:
    ins = (rule.in_dtypes if rule.in_dtypes is not None else target.in_dtypes) | (
        rule.extra_in_dtypes
    )
    outs = (rule.out_dtypes if rule.out_dtypes is not None else target.out_dtypes) | (
        rule.extra_out_dtypes
    )
    return ins, outs


def tensor_rejections(sig: OpSignature, rule: OpRule, target: Target) -> list[Rejection]:
    """The delegate's check over every tensor of a node: rank, then type of runtime tensors.

    Rank applies to every tensor, constants included; the type check only to tensors computed
    at runtime (constants and variables are exempt).
    """
    ins, outs = allowed_dtypes(rule, target)
    found: list[Rejection] = []
    for group, allowed, is_input in ((sig.inputs, ins, True), (sig.outputs, outs, False)):
        for i, t in enumerate(group):
            if t is None:
                continue
            index = i if is_input else None
            if t.rank > target.max_rank:
                which = f"{'Input' if is_input else 'Output'} {i} ({t.name})"
                found.append(
                    reject(
                        Reason.RANK,
                        sig.op_type,
                        f"{which} has shape {fmt_shape(t.shape)}.",
                        input_index=index,
                    )
                )
                return found
            if t.is_runtime and t.dtype not in allowed:
                which = f"{'Input' if is_input else 'Output'} {i} ({t.name})"
                found.append(
                    reject(
                        Reason.DTYPE,
                        sig.op_type,
                        f"{which} is {t.dtype}.",
                        input_index=index,
                    )
                )
                return found
    return found


def empty_tensor(sig: OpSignature) -> Rejection | None:
    """A tensor with a zero dimension (measured: the accelerator dies building its kernel)."""
    for group in (sig.inputs, sig.outputs):
        for t in group:
            if t is not None and t.is_runtime and 0 in t.shape:
                why = f"{t.name} has shape {fmt_shape(t.shape)}: an empty tensor."
                return reject(Reason.CRASH, sig.op_type, why, fatal=True)
    return None


def variable_tensor(sig: OpSignature) -> Rejection | None:
    t = next((t for _, t in sig.present_inputs if t.is_variable), None)
    if t is None:
        return None
    return reject(Reason.VARIABLE_TENSOR, sig.op_type, f"{t.name} is a variable.", fatal=True)


def activation_rejection(sig: OpSignature, rule: OpRule) -> Rejection | None:
    if rule.activation is None:
        return None
    value = sig.option(rule.activation, 0)
    if value in rule.activations:
        return None
    name = ACTIVATION_NAMES.get(value, str(value))
    return reject(Reason.FUSED_ACTIVATION, sig.op_type, f"The fused activation is {name}.")


# --- shape-defining inputs (a TFLite core rule, the same for every static-shape delegate) ------

#: Inputs whose runtime values decide the output shape: when one of them is not a constant,
#: TFLite makes the output a dynamic tensor, and a delegate that needs static shapes fails.
SHAPE_DEFINING_INPUTS: Mapping[str, tuple[int, ...]] = {
    "RESHAPE": (1,),
    "TILE": (1,),
    "PAD": (1,),
    "PADV2": (1,),
    "MIRROR_PAD": (1,),
    "SPLIT": (0,),
    "SPLIT_V": (1, 2),
    "MEAN": (1,),
    "SUM": (1,),
    "REDUCE_MAX": (1,),
    "REDUCE_MIN": (1,),
    "REDUCE_PROD": (1,),
    "REDUCE_ANY": (1,),
    "REDUCE_ALL": (1,),
    "TRANSPOSE": (1,),
    "STRIDED_SLICE": (1, 2, 3),
    "TOPK_V2": (1,),
    "RESIZE_BILINEAR": (1,),
    "RESIZE_NEAREST_NEIGHBOR": (1,),
    "BROADCAST_TO": (1,),
    "FILL": (0,),
    "RANGE": (0, 1, 2),
    "EXPAND_DIMS": (1,),
    "ARG_MAX": (1,),
    "ARG_MIN": (1,),
    "ONE_HOT": (1,),
    "SPACE_TO_BATCH_ND": (1, 2),
    "BATCH_TO_SPACE_ND": (1, 2),
    "TRANSPOSE_CONV": (0,),
    "SPARSE_TO_DENSE": (1,),
}
#: Ops whose output size depends on the data itself.
ALWAYS_DYNAMIC = frozenset({"WHERE", "UNIQUE", "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5"})
#: Producers whose outputs TFLite computes while preparing the graph (shape is static).
STATIC_PRODUCERS = frozenset({"SHAPE"})


def data_dependent_shape(sig: OpSignature) -> Rejection | None:
    """A fatal DYNAMIC_SHAPE rejection when the op's output shape depends on runtime data."""
    if sig.op_type in ALWAYS_DYNAMIC:
        return reject(
            Reason.DYNAMIC_SHAPE, sig.op_type, "Its output size depends on the data.", fatal=True
        )
    for index in SHAPE_DEFINING_INPUTS.get(sig.op_type, ()):
        t = sig.input(index)
        if t is None or t.is_const or t.producer in STATIC_PRODUCERS:
            continue
        source = f"op {t.producer}" if t.producer else "a graph input"
        return reject(
            Reason.DYNAMIC_SHAPE,
            sig.op_type,
            f"Input {index} ({t.name}) comes from {source}.",
            input_index=index,
            fatal=True,
        )
    return None
