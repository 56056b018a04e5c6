"""One-op models for every op type with a fused activation option x every fused activation.

Used by ``bench/fused_activations.py`` (CPU against GPU, by value) and
``tests/test_fused_activations.py``. Inputs are seeded random normals, so every activation
changes the output (negative values, values beyond +-1 and +-6). Measured by
``PYTHONPATH=. python bench/fused_activations.py`` (table in ``docs/compat-rules.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tests.compat_models import ACT, F32, Net, opts
from tflkit import ir

ACTIVATIONS = {
    "NONE": ACT.NONE,
    "RELU": ACT.RELU,
    "RELU_N1_TO_1": ACT.RELU_N1_TO_1,
    "RELU6": ACT.RELU6,
    "TANH": ACT.TANH,
    "SIGN_BIT": ACT.SIGN_BIT,
}


def _weights(shape: tuple[int, ...]) -> np.ndarray:
    return (np.random.default_rng(7).standard_normal(shape) * 2).astype(F32)


def _conv(n: Net, act: int) -> ir.Tensor:
    options = opts("Conv2DOptionsT", strideH=1, strideW=1, fusedActivationFunction=act)
    x = n.input((1, 8, 8, 4))
    w, b = _weights((8, 3, 3, 4)), np.zeros(8, F32)
    return n.op("CONV_2D", x, w, b, options=options, shape=(1, 6, 6, 8))


def _depthwise(n: Net, act: int) -> ir.Tensor:
    options = opts(
        "DepthwiseConv2DOptionsT",
        strideH=1,
        strideW=1,
        depthMultiplier=1,
        fusedActivationFunction=act,
    )
    x = n.input((1, 8, 8, 4))
    w, b = _weights((1, 3, 3, 4)), np.zeros(4, F32)
    return n.op("DEPTHWISE_CONV_2D", x, w, b, options=options, shape=(1, 6, 6, 4))


def _fc(n: Net, act: int) -> ir.Tensor:
    options = opts("FullyConnectedOptionsT", fusedActivationFunction=act)
    x, w = n.input((1, 16)), _weights((8, 16))
    return n.op("FULLY_CONNECTED", x, w, None, options=options, shape=(1, 8))


def _binary(op: str, cls: str) -> Callable[[Net, int], ir.Tensor]:
    def build(n: Net, act: int) -> ir.Tensor:
        x, y = n.input((1, 4, 4, 8)), n.input((1, 4, 4, 8), name="y")
        return n.op(op, x, y, options=opts(cls, fusedActivationFunction=act))

    return build


def _pool(op: str) -> Callable[[Net, int], ir.Tensor]:
    def build(n: Net, act: int) -> ir.Tensor:
        options = opts(
            "Pool2DOptionsT",
            strideW=2,
            strideH=2,
            filterWidth=2,
            filterHeight=2,
            fusedActivationFunction=act,
        )
        return n.op(op, n.input((1, 8, 8, 4)), options=options, shape=(1, 4, 4, 4))

    return build


def _concat(n: Net, act: int) -> ir.Tensor:
    x, y = n.input((1, 4, 4, 8)), n.input((1, 4, 4, 8), name="y")
    options = opts("ConcatenationOptionsT", axis=3, fusedActivationFunction=act)
    return n.op("CONCATENATION", x, y, options=options, shape=(1, 4, 4, 16))


OPS: dict[str, Callable[[Net, int], ir.Tensor]] = {
    "CONV_2D": _conv,
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": _fc,
    "ADD": _binary("ADD", "AddOptionsT"),
    "SUB": _binary("SUB", "SubOptionsT"),
    "MUL": _binary("MUL", "MulOptionsT"),
    "DIV": _binary("DIV", "DivOptionsT"),
    "AVERAGE_POOL_2D": _pool("AVERAGE_POOL_2D"),
    "MAX_POOL_2D": _pool("MAX_POOL_2D"),
    "CONCATENATION": _concat,
}


@dataclass(frozen=True)
class Form:
    """One op type with one fused activation."""

    op: str
    activation: str

    @property
    def name(self) -> str:
        return f"{self.op.lower()}_{self.activation.lower()}"

    def build(self) -> ir.Model:
        net = Net(self.name)
        return net.done(OPS[self.op](net, ACTIVATIONS[self.activation]))


def feed_for(data: bytes) -> dict[str, np.ndarray]:
    """One seeded input per graph input: normals times 4, so every activation clips some."""
    rng = np.random.default_rng(0)
    return {
        t.name: (rng.standard_normal(t.shape) * 4).astype(F32) for t in ir.load(data).main.inputs
    }


FORMS = [Form(op, act) for op in OPS for act in ACTIVATIONS]
FORM_BY_NAME = {f.name: f for f in FORMS}
#: Op types whose CPU kernel refuses a fused activation other than these (Prepare fails).
CPU_TAKES = {
    "FULLY_CONNECTED": {"NONE", "RELU", "RELU_N1_TO_1", "RELU6"},
    "CONCATENATION": {"NONE"},
}


def cpu_runs(form: Form) -> bool:
    return form.activation in CPU_TAKES.get(form.op, ACTIVATIONS)
