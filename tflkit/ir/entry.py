"""Entry points of a model: a signature's (or, without signatures, the main subgraph's) inputs
and outputs, keyed by the names a feed uses (signature names, or tensor names for a model
without signatures)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tflkit.errors import UsageError
from tflkit.ir.graph import Model, Subgraph, Tensor
from tflkit.jsonable import plain

__all__ = ["IoSpec", "entry_point"]


@dataclass(frozen=True)
class IoSpec:
    """One input or output of an entry point: the feed name, its tensor and concrete shape."""

    name: str
    tensor: Tensor
    shape: tuple[int, ...]

    @property
    def dtype(self) -> np.dtype:
        dtype = self.tensor.dtype
        if dtype is None:
            raise UsageError(f"{self.name}: tensors of type {self.tensor.type_name} not supported")
        return np.dtype(dtype)

    @property
    def quant(self) -> tuple[float, int] | None:
        """(scale, zero point) of a per-tensor quantized tensor."""
        return self.tensor.scale_zero_point

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "tensor": self.tensor.name,
            "dtype": self.dtype.name,
            "shape": list(self.shape),
        }
        if self.tensor.is_dynamic:
            data["shape_signature"] = list(self.tensor.shape_signature or ())
        if self.quant is not None:
            data["scale"], data["zero_point"] = self.quant
        return plain(data)


def entry_point(
    model: Model, signature: str | None = None
) -> tuple[str | None, Subgraph, dict[str, Tensor], dict[str, Tensor]]:
    """(signature key or None, subgraph, inputs by feed name, outputs by name).

    Without signatures the main subgraph's tensors are named by their tensor names (that is what
    both the Interpreter and the GPU accelerator call them).
    """
    if model.signatures:
        if signature is None:
            chosen = model.signatures[0]
        else:
            try:
                chosen = model.signature(signature)
            except KeyError as exc:
                raise UsageError(str(exc.args[0])) from None
        return chosen.key, chosen.subgraph, dict(chosen.inputs), dict(chosen.outputs)
    if signature is not None:
        raise UsageError(f"the model has no signatures, so --signature {signature!r} is unknown")
    main = model.main
    return None, main, {t.name: t for t in main.inputs}, {t.name: t for t in main.outputs}
