"""A ``.tflite`` given as ``validate --reference``: the model the validated one replaces.

Loaded once, it answers what ``validate`` asks of it: whether it computes on the model's own
8-bit grid (a rewritten or re-exported copy: class ``int8-same-grid``), whether it is quantized
(then a float model is held to the int8 contract against it), what real values its inputs cover
(the range for float inputs the model states none for), the grid step of its inputs (its
one-step noise), its inputs and outputs as the adapter of :mod:`tflkit.delegates.reference_io`
sees them, and its CPU runner.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tflkit import ir
from tflkit.delegates.litert_cpu import LiteRTCpuRunner
from tflkit.delegates.reference_io import Port, convert, match_ports
from tflkit.errors import UsageError
from tflkit.ir.entry import IoSpec, entry_point
from tflkit.validation.inputs import (
    input_real_ranges,
    is_quantized,
    quantize_step,
)

__all__ = ["TfliteReference", "io_ports"]


def io_ports(tensors: Mapping[str, ir.Tensor]) -> list[Port]:
    """The inputs or outputs of an entry point as the reference adapter sees them."""
    return [
        Port(name, spec.dtype, tuple(t.shape_signature or t.shape), spec.quant)
        for name, t in tensors.items()
        for spec in [IoSpec(name, t, t.shape)]
    ]


@dataclass
class TfliteReference:
    """The reference model's bytes, graph and entry point (its first signature, else its main
    subgraph's tensors)."""

    data: bytes
    model: ir.Model
    inputs: dict[str, ir.Tensor]
    outputs: dict[str, ir.Tensor]

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TfliteReference:
        data = ir.serde.read_model_bytes(path)[0]
        model = ir.load(data, label=str(path))
        _, _, inputs, outputs = entry_point(model, None)
        return cls(data, model, inputs, outputs)

    @property
    def quantized(self) -> bool:
        return is_quantized(self.model)

    def ports(self) -> tuple[list[Port], list[Port]]:
        return io_ports(self.inputs), io_ports(self.outputs)

    def runner(self, kernels: str = "xnnpack", signature: str | None = None) -> LiteRTCpuRunner:
        return LiteRTCpuRunner(self.data, kernels=kernels, signature=signature, name="reference")

    def same_grid(self, model: ir.Model, signature: str | None = None) -> bool:
        """Its inputs and outputs have ``model``'s names, types and quantization (some of them
        quantized): another computation on the same 8-bit grid."""
        try:
            ours = entry_point(model, signature)
            theirs = entry_point(self.model, signature)
        except UsageError:
            return False

        def grid(tensors: Mapping[str, ir.Tensor]) -> dict[str, tuple[object, ...]]:
            return {n: (t.type_name, IoSpec(n, t, t.shape).quant) for n, t in tensors.items()}

        return all(
            grid(a) == grid(b) and any(q is not None for _, q in grid(a).values())
            for a, b in ((ours[2], theirs[2]), (ours[3], theirs[3]))
        )

    def _beside(self, ours: Mapping[str, ir.Tensor]) -> dict[str, Port]:
        """Its input beside each of ``ours`` (:func:`match_ports`); {} when they do not match
        (its runner then says why)."""
        try:
            return match_ports(io_ports(ours), io_ports(self.inputs))
        except ValueError:
            return {}

    def ranges_for(self, ours: Mapping[str, ir.Tensor]) -> dict[str, tuple[float, float]]:
        """The real values its inputs cover (a quantized model's grid), by the names of
        ``ours``: the range for inputs the validated model states none for."""
        ranges = input_real_ranges(self.model)
        return {
            name: found
            for name, port in self._beside(ours).items()
            if (found := ranges.get(port.name)) is not None
        }

    def steps_for(self, ours: Mapping[str, ir.Tensor]) -> dict[str, float]:
        """The grid step a QUANTIZE op of its own puts each float input on, by our names."""
        return {
            name: step
            for name, port in self._beside(ours).items()
            if (step := quantize_step(self.inputs[port.name])) is not None
        }

    def feed_for(
        self, ours: Mapping[str, ir.Tensor], feed: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """One input set of the validated model in its names and types."""
        port = {p.name: p for p in io_ports(ours)}
        beside = match_ports(list(port.values()), io_ports(self.inputs))
        return {beside[n].name: convert(v, port[n], beside[n]) for n, v in feed.items()}
