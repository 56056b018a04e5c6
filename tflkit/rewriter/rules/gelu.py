"""ERF, which has no builtin: a custom ``Erf`` or ``FlexErf`` op neither loads nor compiles here.

``ErfGelu`` finds the exact GELU written by hand around the erf op, in the op orders the
TensorFlow converter leaves unfused (it fuses ``x*0.5*(1+erf(x/sqrt2))`` itself, but not e.g.
``x*(erf(x/sqrt2)+1)*0.5``, ``x*(0.5+0.5*erf(..))`` or ``(x+x*erf(..))*0.5``), and replaces the
whole chain by the GELU builtin (approximate=False), which the GPU takes. ``ErfApprox`` (opt-in)
replaces a bare erf with Abramowitz & Stegun 7.1.26 built from ops the GPU takes.

The original models cannot run on the CPU interpreter (unresolved custom op / no Flex delegate),
so their examples carry a float32 numpy reference of the original graph
(:func:`tflkit.rewriter.example.numpy_reference`) that the rule harness compares against, and
``rewrite`` refuses to write without ``--force`` (it has nothing to verify against).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tflkit.compat.reasons import Reason
from tflkit.ir.graph import Op, Tensor
from tflkit.rewriter.contract import bound
from tflkit.rewriter.example import graph_model, numpy_reference, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, is_float, replace

if TYPE_CHECKING:
    import numpy as np

    from tflkit.ir.builder import OpBuilder

ERF_TYPES = ("Erf", "FlexErf")
#: The custom options TensorFlow writes for CUSTOM ``Erf`` and ``FlexErf`` (a NodeDef).
ERF_CUSTOM_OPTIONS = {
    "Erf": b"T\x00\x01\x03\x01\x01\x01\x00\x04\x02$\x01",
    "FlexErf": b"\x03Erf\x00\x12\x12\x03Erf\x1a\x00*\x07\n\x01T\x12\x020\x012\x00\x00\x02"
    b"\x19\x15\x14\x14\x04(\x01",
}
#: GELU = 0.5*x + 0.5*x*erf(x/sqrt2), as {(power of x, power of erf): coefficient}.
GELU_TERMS = {(1, 0): 0.5, (1, 1): 0.5}
MAX_CHAIN = 6

Poly = dict[tuple[int, int], float]


def _scalar(tensor: Tensor | None) -> float | None:
    import numpy as np

    if tensor is None or not tensor.is_constant or tensor.data is None:
        return None
    if tensor.data.size != 1 or tensor.dtype != np.float32:
        return None
    return float(tensor.data.reshape(-1)[0])


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * abs(b)


def _plain(op: Op) -> bool:
    return not (op.options is not None and getattr(op.options, "fusedActivationFunction", 0))


def _private(tensor: Tensor, reader: Op) -> bool:
    """The tensor is read by ``reader`` alone and is no graph or signature output."""
    return tensor.consumers == [reader] and not tensor.is_observable


def erf_argument(op: Op) -> tuple[Tensor, Op] | None:
    """(x, producer) when the erf reads ``x * (1/sqrt2)`` or ``x / sqrt2``, else None."""
    u = op.inputs[0] if op.inputs else None
    producer = u.producer if u is not None else None
    if producer is None or not _plain(producer) or not _private(u, op):
        return None
    a, c = producer.inputs[:2]
    if producer.type == "MUL":
        for x, k in ((a, c), (c, a)):
            value = _scalar(k)
            if value is not None and _close(value, 1 / math.sqrt(2)) and _scalar(x) is None:
                return x, producer
    if producer.type == "DIV":
        value = _scalar(c)
        if value is not None and _close(value, math.sqrt(2)):
            return a, producer
    return None


def _term(operand: Tensor, x: Tensor, reader: Op) -> tuple[Poly, Op | None] | None:
    """``operand`` as a monomial c*x^k (k <= 1), with the op to drop if it is ``MUL(x, c)``."""
    value = _scalar(operand)
    if value is not None:
        return {(0, 0): value}, None
    if operand is x:
        return {(1, 0): 1.0}, None
    producer = operand.producer
    if producer is None or producer.type != "MUL" or not _plain(producer):
        return None
    if not _private(operand, reader):
        return None
    a, b = producer.inputs[:2]
    for left, right in ((a, b), (b, a)):
        value = _scalar(right)
        if left is x and value is not None:
            return {(1, 0): value}, producer
    return None


def _combine(kind: str, p: Poly, q: Poly) -> Poly:
    out: Poly = {}
    if kind == "ADD":
        for key, value in (*p.items(), *q.items()):
            out[key] = out.get(key, 0.0) + value
    else:
        for (px, pe), pv in p.items():
            for (qx, qe), qv in q.items():
                key = (px + qx, pe + qe)
                out[key] = out.get(key, 0.0) + pv * qv
    return {k: v for k, v in out.items() if v != 0.0}


def _is_gelu(poly: Poly) -> bool:
    return poly.keys() == GELU_TERMS.keys() and all(
        _close(poly[k], v) for k, v in GELU_TERMS.items()
    )


def match_gelu(op: Op) -> tuple[Tensor, list[Op], Op] | None:
    """(x, ops to drop, last op) when ``op`` (an erf) sits in a hand-written exact GELU."""
    found = erf_argument(op)
    if found is None:
        return None
    x, producer = found
    drop = [producer]
    poly: Poly = {(0, 1): 1.0}
    current, tensor = op, op.outputs[0]
    for _ in range(MAX_CHAIN):
        if len(tensor.consumers) != 1 or tensor.is_observable:
            return None
        reader = tensor.consumers[0]
        if reader.type not in ("ADD", "MUL") or not _plain(reader) or len(reader.inputs) != 2:
            return None
        if tuple(reader.outputs[0].shape) != tuple(x.shape):
            return None
        others = [t for t in reader.inputs if t is not tensor]
        if len(others) != 1:
            return None
        term = _term(others[0], x, reader)
        if term is None:
            return None
        poly = _combine(reader.type, poly, term[0])
        if term[1] is not None:
            drop.append(term[1])
        if current is not op:
            drop.append(current)
        current, tensor = reader, reader.outputs[0]
        if _is_gelu(poly):
            return x, drop, current
    return None


def _erf_float(op: Op) -> str | None:
    if not op.inputs or not is_float(op.inputs[0]) or op.inputs[0].is_dynamic:
        return "not a static float32 erf"
    return None


class ErfGelu(OpRewrite):
    name = "erf_gelu"
    summary = "x*0.5*(1+erf(x/sqrt2)) around a custom/flex Erf -> GELU(approximate=False)"
    fixes = ERF_TYPES
    codes = (Reason.CUSTOM_OP, Reason.FLEX_OP)
    contract = bound(1e-6, 1e-6, "GELU kernel vs the float32 erf formula (measured 4.8e-7)")

    def match(self, op: Op) -> Match:
        reason = _erf_float(op)
        if reason is not None:
            return Match.fail(reason)
        found = match_gelu(op)
        if found is None:
            return Match.fail("the erf is not part of x*0.5*(1+erf(x/sqrt2))")
        x, drop, last = found
        return Match(op, x=x, drop=drop, last=last)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op, x, drop, last = match.op, match["x"], match["drop"], match["last"]
        gelu = b.GELU(x, options=options("GeluOptions", approximate=False), name="gelu")
        replace(last, [gelu])
        sg = op.subgraph
        assert sg is not None
        for dead in [op, *drop]:
            if dead.subgraph is sg:
                sg.remove_op(dead)

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def plus_one_half(b: OpBuilder, x: Tensor, erf: Tensor) -> Tensor:
            added = b.ADD(erf, np.array(1.0, np.float32), options=options("AddOptions"))
            return _mul(b, _mul(b, x, added), np.array(0.5, np.float32))

        def half_plus_half(b: OpBuilder, x: Tensor, erf: Tensor) -> Tensor:
            half = _mul(b, erf, np.array(0.5, np.float32))
            return _mul(b, x, b.ADD(half, np.array(0.5, np.float32), options=options("AddOptions")))

        def x_plus_xe(b: OpBuilder, x: Tensor, erf: Tensor) -> Tensor:
            summed = b.ADD(x, _mul(b, x, erf), options=options("AddOptions"))
            return _mul(b, summed, np.array(0.5, np.float32))

        def half_x_first(b: OpBuilder, x: Tensor, erf: Tensor) -> Tensor:
            half_x = _mul(b, x, np.array(0.5, np.float32))
            added = b.ADD(erf, np.array(1.0, np.float32), options=options("AddOptions"))
            return _mul(b, half_x, added)

        return (
            _ref("custom_erf_plus_one_half", _gelu_model("Erf", plus_one_half)),
            _ref("custom_erf_half_plus_half", _gelu_model("Erf", half_plus_half, div=True)),
            _ref("flex_erf_x_plus_xe", _gelu_model("FlexErf", x_plus_xe)),
            _ref("flex_erf_half_x_first", _gelu_model("FlexErf", half_x_first, (2, 4, 4, 8))),
        )


#: Abramowitz & Stegun 7.1.26: erf(a) ~ 1 - t*(a1 + t*(a2 + ...)) * exp(-a^2), t = 1/(1+p*a).
AS_P = 0.3275911
AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


class ErfApprox(OpRewrite):
    name = "erf_approx"
    summary = "bare custom/flex Erf -> SIGN(x)*(1 - poly(t)*EXP(-x*x)) (A&S 7.1.26), opt-in"
    fixes = ERF_TYPES
    codes = (Reason.CUSTOM_OP, Reason.FLEX_OP)
    contract = bound(1e-6, 0.0, "A&S 7.1.26 (|err| <= 1.5e-7) in float32; measured 5.8e-7")

    def match(self, op: Op) -> Match:
        return Match.unless(op, _erf_float(op))

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        x = op.inputs[0]
        a = b.ABS(x, name="erf_abs")
        denom = b.ADD(
            _mul(b, a, np.array(AS_P, np.float32)), np.array(1.0, np.float32), options=_add()
        )
        t = b.DIV(np.ones(x.shape, np.float32), denom, options=options("DivOptions"), name="erf_t")
        poly = _mul(b, t, np.array(AS_A[-1], np.float32))
        for coefficient in reversed(AS_A[:-1]):
            poly = _mul(b, t, b.ADD(poly, np.array(coefficient, np.float32), options=_add()))
        gauss = b.EXP(_mul(b, _mul(b, x, x), np.array(-1.0, np.float32)), name="erf_gauss")
        tail = _mul(b, _mul(b, poly, gauss), np.array(-1.0, np.float32))
        magnitude = b.ADD(tail, np.array(1.0, np.float32), options=_add(), name="erf_magnitude")
        replace(op, [_mul(b, b.SIGN(x, name="erf_sign"), magnitude)])

    def examples(self) -> tuple[Example, ...]:
        return (
            _ref("custom_erf", _erf_model("Erf", (1, 8))),
            _ref("flex_erf", _erf_model("FlexErf", (2, 3, 16))),
        )


def _ref(name: str, build) -> Example:
    """An example whose original has no CPU kernel: compared against numpy's float32 erf."""
    return Example(name, build, reference=numpy_reference)


def _add():
    return options("AddOptions")


def _mul(b: OpBuilder, x: Tensor, y: Tensor | np.ndarray) -> Tensor:
    return b.MUL(x, y, options=options("MulOptions"), name="mul")


def _erf(b: OpBuilder, kind: str, u: Tensor) -> Tensor:
    return b.op(kind, [u], custom_options=ERF_CUSTOM_OPTIONS[kind], name="erf")


def _gelu_model(kind: str, tail, shape: tuple[int, ...] = (1, 16), div: bool = False):
    import numpy as np

    def body(b: OpBuilder, x: Tensor) -> Tensor:
        x = scale(b, x, 2.0)
        if div:
            u = b.DIV(x, np.array(math.sqrt(2), np.float32), options=options("DivOptions"))
        else:
            u = _mul(b, x, np.array(1 / math.sqrt(2), np.float32))
        return scale(b, tail(b, x, _erf(b, kind, u)))

    return lambda: graph_model([(shape, np.float32)], body)


def _erf_model(kind: str, shape: tuple[int, ...]):
    import numpy as np

    return lambda: graph_model(
        [(shape, np.float32)], lambda b, x: scale(b, _erf(b, kind, scale(b, x)))
    )
