"""Op builder used by rewrite rules and tests: ``b = OpBuilder(sg, before=op); b.RESHAPE(x, s)``.

Ops are inserted at one insertion point, in the order they are built. Any upper-case attribute
is an op: ``b.RESHAPE(x, shape_tensor, shape=(1, 10))`` creates a RESHAPE whose output has shape
``(1, 10)``; without ``shape``/``dtype`` the output copies the first input's. numpy arrays given
as inputs become constants (their buffers shared with equal constants).

Quantization follows the data: an op in :data:`MOVES_DATA` (it only moves, copies or selects
elements) whose output has its input's type gets the input's scales and zero points unless
``quantization=`` says otherwise, so a rewrite of a full-int8 model keeps its quantized contract.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tflkit.errors import UsageError
from tflkit.ir import schema
from tflkit.ir.graph import Op, OpCode, Subgraph, Tensor

InputLike = Tensor | np.ndarray | None
OutputSpec = tuple[Sequence[int], Any]

#: Ops whose output elements are input elements (moved, copied, selected or padded with the
#: zero point): a quantized input's scales and zero points hold for the output unchanged.
MOVES_DATA = frozenset(
    {
        "RESHAPE", "TRANSPOSE", "TILE", "STRIDED_SLICE", "SLICE", "GATHER", "GATHER_ND",
        "REVERSE_V2", "PAD", "SQUEEZE", "EXPAND_DIMS", "BROADCAST_TO", "DEPTH_TO_SPACE",
        "SPACE_TO_DEPTH", "CONCATENATION", "PACK", "SPLIT", "UNPACK", "MIRROR_PAD",
    }
)  # fmt: skip


class OpBuilder:
    """Creates tensors and ops in ``subgraph`` at an insertion point."""

    def __init__(
        self,
        subgraph: Subgraph,
        *,
        before: Op | None = None,
        after: Op | None = None,
        prefix: str = "tflkit",
    ) -> None:
        if before is not None and after is not None:
            raise UsageError("give before= or after=, not both")
        self.subgraph = subgraph
        self.prefix = prefix
        self._anchor_before = before
        self._anchor_after = after
        self._inserted = 0
        self.created: list[Op] = []

    def const(
        self, value: Any, name: str = "const", dtype: Any = None, *, like: Tensor | None = None
    ) -> Tensor:
        """A constant tensor holding ``value`` (with ``like``'s quantization, if given)."""
        array = np.asarray(value, dtype=dtype)
        quantization = copy.deepcopy(like.quantization) if like is not None else None
        return self.subgraph.add_constant(array, f"{self.prefix}/{name}", quantization=quantization)

    def tensor(self, shape: Sequence[int], dtype: Any, name: str = "t", **kwargs: Any) -> Tensor:
        """A new non-constant tensor (for outputs built by hand)."""
        return self.subgraph.new_tensor(f"{self.prefix}/{name}", shape, dtype, **kwargs)

    def op(
        self,
        op_type: str,
        inputs: Sequence[InputLike],
        *,
        options: Any = None,
        shape: Sequence[int] | None = None,
        dtype: Any = None,
        outputs: Sequence[OutputSpec | Tensor] | None = None,
        quantization: Any = None,
        version: int = 1,
        custom_options: bytes | None = None,
        name: str | None = None,
    ) -> Any:
        """Build one op; returns its output tensor, or a tuple when it has several."""
        opcode = _opcode(op_type, version)
        label = name or op_type.lower()
        input_tensors = [
            self._as_tensor(value, f"{label}/input{i}") for i, value in enumerate(inputs)
        ]
        if outputs is None:
            first = next((t for t in input_tensors if t is not None), None)
            if shape is None and first is None:
                raise UsageError(f"{op_type}: give shape= and dtype= for an op without inputs")
            out_shape = shape if shape is not None else first.shape
            out_type = dtype if dtype is not None else first.type
            outputs = [(out_shape, out_type)]
        if quantization is None and op_type in MOVES_DATA:
            quantization = _moved_quantization(input_tensors, outputs)
        output_tensors = []
        for i, spec in enumerate(outputs):
            if isinstance(spec, Tensor):
                output_tensors.append(self.subgraph.add_tensor(spec))
                continue
            out_shape, out_type = spec
            suffix = "" if len(outputs) == 1 else f":{i}"
            output_tensors.append(
                self.subgraph.new_tensor(
                    f"{self.prefix}/{label}{suffix}",
                    out_shape,
                    out_type,
                    quantization=copy.deepcopy(quantization),
                )
            )
        op = Op(
            opcode, input_tensors, output_tensors, options=options, custom_options=custom_options
        )
        self._insert(op)
        return output_tensors[0] if len(output_tensors) == 1 else tuple(output_tensors)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if not name.isupper():
            raise AttributeError(name)
        try:
            schema.op_code(name)
        except KeyError:
            raise AttributeError(f"no builtin op {name}") from None

        def build(*inputs: InputLike, **kwargs: Any) -> Any:
            return self.op(name, inputs, **kwargs)

        return build

    def _as_tensor(self, value: InputLike, name: str) -> Tensor | None:
        if value is None or isinstance(value, Tensor):
            return value
        return self.const(value, name)

    def _insert(self, op: Op) -> None:
        if self._anchor_before is not None:
            position = self._anchor_before.index
        elif self._anchor_after is not None:
            position = self._anchor_after.index + 1 + self._inserted
        else:
            position = len(self.subgraph.ops)
        self.subgraph.insert_op(position, op)
        self._inserted += 1
        self.created.append(op)


def _moved_quantization(inputs: Sequence[Tensor | None], outputs: Sequence[Any]) -> Any:
    """The quantization a data-moving op's outputs inherit: its data inputs' (all equal)."""
    data = [t for t in inputs if t is not None and not _is_index(t)]
    if not data or not data[0].is_quantized:
        return None
    first = data[0]
    if any(_quant_key(t) != _quant_key(first) for t in data[1:]):
        return None  # e.g. a CONCATENATION of differently scaled inputs: the rule decides
    for spec in outputs:
        out_type = spec.type if isinstance(spec, Tensor) else spec[1]
        out_type = out_type if isinstance(out_type, int) else schema.tensor_type(out_type)
        if out_type != first.type:
            return None
    return first.quantization


def _is_index(tensor: Tensor) -> bool:
    """Shapes, indices, axes, paddings: the int32/int64 constants beside the data."""
    return tensor.is_constant and tensor.type_name in ("INT32", "INT64") and not tensor.is_quantized


def _quant_key(tensor: Tensor) -> tuple[Any, ...]:
    q = tensor.quantization
    if q is None:
        return (tensor.type,)
    return (tensor.type, tuple(q.scale or ()), tuple(q.zeroPoint or ()), q.quantizedDimension)


def _opcode(op_type: str, version: int) -> OpCode:
    try:
        return OpCode.builtin(op_type, version)
    except KeyError:
        return OpCode.custom(op_type, version)
