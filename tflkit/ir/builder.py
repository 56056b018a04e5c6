"""Op builder used by rewrite rules and tests: ``b = OpBuilder(sg, before=op); b.RESHAPE(x, s)``.

Ops are inserted at one insertion point, in the order they are built. Any upper-case attribute
is an op: ``b.RESHAPE(x, shape_tensor, shape=(1, 10))`` creates a RESHAPE whose output has shape
``(1, 10)``; without ``shape``/``dtype`` the output copies the first input's. numpy arrays given
as inputs become constants (their buffers shared with equal constants).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tflkit.errors import UsageError
from tflkit.ir import schema
from tflkit.ir.graph import Op, OpCode, Subgraph, Tensor

InputLike = Tensor | np.ndarray | None
OutputSpec = tuple[Sequence[int], Any]


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

    def const(self, value: Any, name: str = "const", dtype: Any = None) -> Tensor:
        """A constant tensor holding ``value``."""
        array = np.asarray(value, dtype=dtype)
        return self.subgraph.add_constant(array, f"{self.prefix}/{name}")

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
        output_tensors = []
        for i, spec in enumerate(outputs):
            if isinstance(spec, Tensor):
                output_tensors.append(self.subgraph.add_tensor(spec))
                continue
            out_shape, out_type = spec
            suffix = "" if len(outputs) == 1 else f":{i}"
            output_tensors.append(
                self.subgraph.new_tensor(
                    f"{self.prefix}/{label}{suffix}", out_shape, out_type, quantization=quantization
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


def _opcode(op_type: str, version: int) -> OpCode:
    try:
        return OpCode.builtin(op_type, version)
    except KeyError:
        return OpCode.custom(op_type, version)
