"""A reference that names, types or quantizes its inputs and outputs unlike the model it checks.

The model a user validates is often not the one the reference was: an int8 model against its
float32 twin (``serving_default_input_1:0`` int8 against ``input_1`` float32), a re-converted
model whose tensors got new names, a Keras source of a model with int8 inputs. The reference
must then get the same values in its own terms, and give back values the comparator can put
beside the model's:

- inputs are matched by name, else by position when the counts agree (shapes compatible), and
  converted to the reference's type: a quantized value is dequantized with the model's
  (scale, zero point); a float put on a quantized reference input with the reference's;
- outputs are matched the same way (else by unique shape), and a quantized reference output on
  another grid than the model's output is dequantized with its own quantization, so the
  comparator sees float values; on the same grid it stays integer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .protocol import Feed, Runner, RunResult

__all__ = ["Port", "ReferenceIo", "convert", "match_ports", "real_values"]


@dataclass(frozen=True)
class Port:
    """One input or output of a model: name, dtype, shape (-1: dynamic), (scale, zero point)."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    quant: tuple[float, int] | None = None

    @property
    def quantized(self) -> bool:
        return self.quant is not None and self.dtype.kind in "iu"


def convert(value: np.ndarray, source: Port, target: Port) -> np.ndarray:
    """``value`` (of ``source``'s type) as ``target`` holds the same real numbers."""
    value = np.asarray(value)
    if source.quantized and target.quantized and source.quant == target.quant:
        return value.astype(target.dtype)
    real = value
    if source.quantized:
        assert source.quant is not None
        scale, zero = source.quant
        real = (value.astype(np.float64) - zero) * scale
    if target.quantized:
        assert target.quant is not None
        scale, zero = target.quant
        info = np.iinfo(target.dtype)
        grid = np.round(np.asarray(real, np.float64) / scale) + zero
        return np.clip(grid, info.min, info.max).astype(target.dtype)
    if target.dtype.kind == "f" or real.dtype.kind == target.dtype.kind:
        return np.asarray(real).astype(target.dtype)
    return value.astype(target.dtype)


def real_values(
    arrays: Mapping[str, np.ndarray], quant: Mapping[str, tuple[float, int]]
) -> dict[str, np.ndarray]:
    """``arrays`` with those named in ``quant`` (scale, zero point) as the float32 real values
    they stand for: what a float source is fed for an int8 input, and an int8 output compared
    with a float source."""
    real = Port("", np.dtype(np.float32), ())
    return {
        name: convert(v, Port(name, np.asarray(v).dtype, np.shape(v), quant[name]), real)
        if name in quant
        else v
        for name, v in arrays.items()
    }


def _compatible(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or x < 0 or y < 0 for x, y in zip(a, b, strict=True))


def match_ports(
    model: Sequence[Port], reference: Sequence[Port], what: str = "inputs"
) -> dict[str, Port]:
    """The reference port beside each model port: by name, else by position (counts agree,
    shapes compatible), else by shape when every shape is unique."""
    by_name = {p.name: p for p in reference}
    if {p.name for p in model} <= set(by_name):
        return {p.name: by_name[p.name] for p in model}
    if len(model) == len(reference) and all(
        _compatible(m.shape, r.shape) for m, r in zip(model, reference, strict=True)
    ):
        return {m.name: r for m, r in zip(model, reference, strict=True)}
    found = {m.name: [r for r in reference if _compatible(m.shape, r.shape)] for m in model}
    if all(len(rs) == 1 for rs in found.values()):
        return {name: rs[0] for name, rs in found.items()}
    raise ValueError(
        f"cannot match the model's {what} {[(p.name, p.shape) for p in model]} to the "
        f"reference's {[(p.name, p.shape) for p in reference]} by name, position or shape"
    )


class ReferenceIo:
    """Wraps the reference runner: feeds it in its own terms, gives back the model's terms.

    ``reference_inputs``/``reference_outputs`` None: the reference's own are unknown (a
    framework model takes floats and names its inputs as the model does).
    """

    def __init__(
        self,
        inner: Runner,
        *,
        model_inputs: Sequence[Port],
        model_outputs: Sequence[Port],
        reference_inputs: Sequence[Port] | None = None,
        reference_outputs: Sequence[Port] | None = None,
    ):
        self.inner = inner
        self.name = inner.name
        self.model_inputs = list(model_inputs)
        self.model_outputs = list(model_outputs)
        self.reference_outputs = None if reference_outputs is None else list(reference_outputs)
        if reference_inputs is None:  # a framework model: inputs named as the model's, in float
            reference_inputs = [
                Port(p.name, np.dtype(np.float32) if p.quantized else p.dtype, p.shape)
                for p in model_inputs
            ]
        self.feeds_to = match_ports(self.model_inputs, list(reference_inputs))
        self.outputs_from = (
            {}
            if self.reference_outputs is None
            else match_ports(self.model_outputs, self.reference_outputs, "outputs")
        )

    @property
    def adapted(self) -> bool:
        """Whether anything is renamed or converted (else the wrapper is not needed)."""
        inputs = all(
            p.name == r.name and p.dtype == r.dtype and (not r.quantized or p.quant == r.quant)
            for p in self.model_inputs
            for r in [self.feeds_to[p.name]]
        )
        outputs = self.reference_outputs is None or [
            (p.name, p.dtype, p.quant) for p in self.reference_outputs
        ] == [(p.name, p.dtype, p.quant) for p in self.model_outputs]
        return not (inputs and outputs)

    def describe(self) -> str:
        """One line: how the model's inputs and outputs meet the reference's."""
        parts = []
        for p in self.model_inputs:
            r = self.feeds_to[p.name]
            what = [] if r.name == p.name else [f"-> {r.name}"]
            if p.quantized and not r.quantized:
                what.append(f"dequantized to {r.dtype.name}")
            elif r.quantized and (not p.quantized or p.quant != r.quant):
                what.append(f"quantized to the reference's {r.dtype.name} grid")
            if what:
                parts.append(f"input {p.name} " + " ".join(what))
        for p in self.model_outputs:
            r = self.outputs_from.get(p.name)
            if r is None:
                continue
            what = [] if r.name == p.name else [f"<- {r.name}"]
            if r.quantized and r.quant != p.quant:
                what.append("dequantized with the reference's own grid")
            if what:
                parts.append(f"output {p.name} " + " ".join(what))
        return "; ".join(parts)

    def activate(self) -> None:
        self.inner.activate()

    def deactivate(self) -> None:
        self.inner.deactivate()

    def infer(self, feeds: Sequence[Feed]) -> RunResult:
        ports = {p.name: p for p in self.model_inputs}
        theirs = [
            {self.feeds_to[n].name: convert(v, ports[n], self.feeds_to[n]) for n, v in f.items()}
            for f in feeds
        ]
        result = self.inner.infer(theirs)
        if not result.ok:
            return result
        if self.reference_outputs is None:  # a framework runner matches its outputs itself
            self._note(result)
            return result
        sources = self.outputs_from
        real = Port("", np.dtype(np.float64), ())
        result.outputs = [
            {
                mine.name: (
                    produced[theirs_.name]
                    if not theirs_.quantized or theirs_.quant == mine.quant
                    else convert(produced[theirs_.name], theirs_, real)
                )
                for mine in self.model_outputs
                for theirs_ in [sources[mine.name]]
            }
            for produced in result.outputs
        ]
        self._note(result)
        return result

    def _note(self, result: RunResult) -> None:
        how = self.describe()
        if how:
            result.notes.append(f"the reference's inputs and outputs differ: {how}")
