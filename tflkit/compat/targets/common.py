"""Building blocks of the constraint tables: ``OpRule``, ``Target`` and shared predicates.

A predicate takes an ``OpSignature`` and returns a ``Rejection`` or None. Factories below build
the common ones (``runtime_inputs(1)``, ``const_input(1)``...); op-specific ones live next to the
table that uses them. Shape logic follows the GPU delegate's own convention of mapping a tensor
of rank 1 to 4 onto BHWC: ``[n] -> (n,1,1,1)``, ``[a,b] -> (a,1,1,b)``, ``[a,b,c] -> (a,1,b,c)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature

Check = Callable[[OpSignature], "Rejection | None"]

FLOATS = frozenset({"FLOAT32", "FLOAT16"})
INTS = frozenset({"INT8", "INT16", "INT32"})
UINTS = frozenset({"UINT8", "UINT16", "UINT32"})
#: Fused activations the GPU delegate implements (SIGN_BIT, code 5, is the one it does not).
GPU_ACTIVATIONS = frozenset({0, 1, 2, 3, 4})
ACTIVATION_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}


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


# --- BHWC mapping ---------------------------------------------------------------------------


def bhwc(shape: tuple[int, ...]) -> tuple[int, int, int, int] | None:
    """The delegate's BHWC view of a rank 1-4 shape, or None for other ranks."""
    r = len(shape)
    if r == 1:
        return (shape[0], 1, 1, 1)
    if r == 2:
        return (shape[0], 1, 1, shape[1])
    if r == 3:
        return (shape[0], 1, shape[1], shape[2])
    if r == 4:
        return (shape[0], shape[1], shape[2], shape[3])
    return None


def fmt_shape(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def axis_ok(rank: int, axis: int) -> bool:
    """Whether ``axis`` names a dimension of a rank 1-4 tensor (negative counts from the end)."""
    if not 1 <= rank <= 4:
        return False
    return -rank <= axis < rank


# --- input / output counts ----------------------------------------------------------------


def runtime_inputs(*allowed: int) -> Check:
    """The number of non-constant inputs must be one of ``allowed``."""

    def check(sig: OpSignature) -> Rejection | None:
        n = len(sig.runtime_inputs)
        if n in allowed:
            return None
        want = " or ".join(str(a) for a in allowed)
        if n < min(allowed):
            first_const = sig.const_inputs[0][0] if sig.const_inputs else None
            why = f"It has {n} runtime input(s); the delegate needs {want}."
            return reject(Reason.CONST_INPUT, sig.op_type, why, input_index=first_const)
        why = f"It has {n} runtime inputs; the delegate takes {want}."
        return reject(Reason.INPUT_COUNT, sig.op_type, why)

    return check


def const_inputs(*allowed: int) -> Check:
    """The number of constant inputs must be one of ``allowed``."""

    def check(sig: OpSignature) -> Rejection | None:
        consts = sig.const_inputs
        if len(consts) in allowed:
            return None
        want = " or ".join(str(a) for a in allowed)
        if len(consts) > max(allowed):
            why = f"It has {len(consts)} constant input(s); the delegate takes {want}."
            return reject(Reason.CONST_INPUT, sig.op_type, why, input_index=consts[0][0])
        missing = next((i for i, t in sig.runtime_inputs), None)
        why = f"It has {len(consts)} constant input(s); the delegate needs {want}."
        return reject(Reason.NON_CONST_INPUT, sig.op_type, why, input_index=missing)

    return check


def input_count(low: int, high: int | None = None) -> Check:
    """The number of present inputs must lie in ``[low, high]``."""
    high = low if high is None else high

    def check(sig: OpSignature) -> Rejection | None:
        n = len(sig.present_inputs)
        if low <= n <= high:
            return None
        want = str(low) if low == high else f"{low} to {high}"
        return reject(
            Reason.INPUT_COUNT, sig.op_type, f"It has {n} inputs; the delegate takes {want}."
        )

    return check


def no_output(sig: OpSignature) -> Rejection:
    """The rejection of an op without the output a predicate needs (malformed models)."""
    return reject(Reason.INPUT_COUNT, sig.op_type, "It has no output tensor.")


def output_count(n: int) -> Check:
    def check(sig: OpSignature) -> Rejection | None:
        if len(sig.outputs) == n:
            return None
        why = f"It has {len(sig.outputs)} outputs; the delegate takes {n}."
        return reject(Reason.INPUT_COUNT, sig.op_type, why)

    return check


def runtime_input(index: int) -> Check:
    """Input ``index`` must be computed at runtime."""

    def check(sig: OpSignature) -> Rejection | None:
        t = sig.input(index)
        if t is None or not t.is_const:
            return None
        why = f"Input {index} ({t.name}) is a constant."
        return reject(Reason.CONST_INPUT, sig.op_type, why, input_index=index)

    return check


def const_input(index: int, dtypes: frozenset[str] = frozenset({"INT32"})) -> Check:
    """Input ``index`` must be a constant of one of ``dtypes`` (when present)."""

    def check(sig: OpSignature) -> Rejection | None:
        t = sig.input(index)
        if t is None:
            return None
        if not t.is_const:
            why = f"Input {index} ({t.name}) is computed at runtime."
            return reject(Reason.NON_CONST_INPUT, sig.op_type, why, input_index=index)
        if t.dtype not in dtypes:
            want = "/".join(sorted(dtypes))
            why = f"Input {index} ({t.name}) is {t.dtype}; it must be {want}."
            return reject(Reason.DTYPE, sig.op_type, why, input_index=index)
        return None

    return check


# --- options ------------------------------------------------------------------------------


def block_size_above_one(sig: OpSignature) -> Rejection | None:
    size = sig.option("blockSize", 0)
    if size > 1:
        return None
    return reject(Reason.OPTIONS, sig.op_type, f"block_size is {size}; it must be more than 1.")


def _positive_pair(what: str, h_option: str, w_option: str, default: int) -> Check:
    """A check that the options ``h_option`` x ``w_option`` (e.g. strides) are both positive;
    ``what`` is the rejection's sentence, with ``{h}`` and ``{w}``."""

    def check(sig: OpSignature) -> Rejection | None:
        h, w = sig.option(h_option, default), sig.option(w_option, default)
        if h > 0 and w > 0:
            return None
        return reject(Reason.OPTIONS, sig.op_type, what.format(h=h, w=w))

    return check


positive_strides = _positive_pair(
    "Strides are {h}x{w}; they must be positive.", "strideH", "strideW", 0
)
positive_dilations = _positive_pair(
    "Dilations are {h}x{w}; they must be positive.", "dilationHFactor", "dilationWFactor", 1
)
positive_kernel = _positive_pair(
    "Kernel is {h}x{w}; it must be positive.", "filterHeight", "filterWidth", 0
)


# --- tensors ------------------------------------------------------------------------------


def rank_in(index: int, ranks: frozenset[int]) -> Check:
    def check(sig: OpSignature) -> Rejection | None:
        t = sig.input(index)
        if t is None or t.rank in ranks:
            return None
        want = " or ".join(str(r) for r in sorted(ranks))
        why = f"Input {index} ({t.name}) has {t.rank} dimensions; the delegate takes {want}."
        return reject(Reason.SHAPE, sig.op_type, why, input_index=index)

    return check


def same_dtype_in_out(sig: OpSignature) -> Rejection | None:
    src, dst = sig.input(0), sig.outputs[0] if sig.outputs else None
    if src is None or dst is None or src.dtype == dst.dtype:
        return None
    return reject(Reason.DTYPE, sig.op_type, f"Input is {src.dtype} but output is {dst.dtype}.")


def broadcastable(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """numpy-style broadcast compatibility."""
    for x, y in zip(reversed(a), reversed(b), strict=False):
        if x != y and x != 1 and y != 1:
            return False
    return True


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


# --- shared op-specific predicates --------------------------------------------------------


def elementwise_operands(sig: OpSignature) -> Rejection | None:
    """Two-operand elementwise ops: two runtime inputs, or one runtime and one constant."""
    present = sig.present_inputs
    if len(present) != 2:
        return reject(Reason.INPUT_COUNT, sig.op_type, f"It has {len(present)} inputs; it needs 2.")
    if len(sig.runtime_inputs) == 0:
        why = "Both inputs are constants; there is nothing to compute on the GPU."
        return reject(Reason.CONST_INPUT, sig.op_type, why, input_index=0)
    return None


def unary_runtime_input(sig: OpSignature) -> Rejection | None:
    """One-operand ops: exactly one input, computed at runtime."""
    present = sig.present_inputs
    if len(present) == 1 and not present[0][1].is_const:
        return None
    if len(present) == 1:
        why = f"Its input ({present[0][1].name}) is a constant."
        return reject(Reason.CONST_INPUT, sig.op_type, why, input_index=present[0][0])
    return reject(Reason.INPUT_COUNT, sig.op_type, f"It has {len(present)} inputs; it needs 1.")


def identical_inputs_not_allowed(sig: OpSignature) -> Rejection | None:
    a, b = sig.input(0), sig.input(1)
    if a is None or b is None or a.tensor_index < 0 or a.tensor_index != b.tensor_index:
        return None
    why = f"Both inputs are the same tensor ({a.name}); only ADD and MUL accept that."
    return reject(Reason.SHAPE, sig.op_type, why)


def mirror_pad_reflect(sig: OpSignature) -> Rejection | None:
    if sig.op_type != "MIRROR_PAD" or sig.option("mode", 0) == 0:
        return None
    return reject(Reason.OPTIONS, sig.op_type, "Only REFLECT padding is supported, not SYMMETRIC.")


def paddings_4x2_or_3x2(sig: OpSignature) -> Rejection | None:
    pads = sig.input(1)
    if pads is None:
        return reject(Reason.INPUT_COUNT, sig.op_type, "The paddings input is missing.")
    if pads.rank == 2 and pads.shape[1] == 2 and pads.shape[0] in (3, 4):
        return None
    return reject(
        Reason.SHAPE,
        sig.op_type,
        f"Paddings are {fmt_shape(pads.shape)}; the delegate pads 3-D or 4-D tensors only "
        "(paddings 3x2 or 4x2).",
        input_index=1,
    )


def resize_corners(sig: OpSignature) -> Rejection | None:
    if sig.op_type != "RESIZE_BILINEAR":
        return None
    if sig.option("alignCorners", False) and sig.option("halfPixelCenters", False):
        return reject(
            Reason.OPTIONS, sig.op_type, "align_corners and half_pixel_centers are both set."
        )
    return None


def softmax_beta_one(sig: OpSignature) -> Rejection | None:
    beta = sig.option("beta", 0.0)
    if math.isclose(beta, 1.0):
        return None
    return reject(Reason.OPTIONS, sig.op_type, f"beta is {beta}; only 1.0 is supported.")


def fc_weights_format(sig: OpSignature) -> Rejection | None:
    if sig.option("weightsFormat", 0) == 0:
        return None
    return reject(Reason.OPTIONS, sig.op_type, "The weights use the shuffled int8 format.")


def fc_input_not_const(sig: OpSignature) -> Rejection | None:
    t = sig.input(0)
    if t is None or not t.is_const:
        return None
    return reject(
        Reason.CONST_INPUT, sig.op_type, f"Its data input ({t.name}) is a constant.", input_index=0
    )


def fc_keep_num_dims(sig: OpSignature) -> Rejection | None:
    if not sig.option("keepNumDims", False):
        return None
    src, dst = sig.input(0), sig.output(0)
    if dst is None:
        return no_output(sig)
    if src is None or src.rank == dst.rank:
        return None
    why = "keep_num_dims is set but input and output ranks differ."
    return reject(Reason.OPTIONS, sig.op_type, why)


def strided_slice_masks(sig: OpSignature) -> Rejection | None:
    for name, label in (
        ("ellipsisMask", "ellipsis_mask"),
        ("newAxisMask", "new_axis_mask"),
        ("shrinkAxisMask", "shrink_axis_mask"),
    ):
        if sig.option(name, 0):
            return reject(
                Reason.OPTIONS,
                sig.op_type,
                f"{label} is set; the GPU slice keeps every dimension (use begin/end masks and a "
                "RESHAPE instead).",
            )
    if sig.option("offset", False):
        return reject(Reason.OPTIONS, sig.op_type, "offset is set.")
    return None


def depthwise_multiplier(sig: OpSignature) -> Rejection | None:
    """Classic delegate: a depth multiplier above 1 needs a single input channel."""
    mult = sig.option("depthMultiplier", 1)
    src = sig.input(0)
    if mult == 1 or src is None or src.rank != 4 or src.shape[3] == 1:
        return None
    why = f"depth_multiplier is {mult} with {src.shape[3]} input channels."
    return reject(Reason.OPTIONS, sig.op_type, why)
