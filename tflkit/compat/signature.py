"""OpSignature: what a compatibility rule needs to know about one op, detached from the graph.

Built from an IR ``Op`` with ``OpSignature.from_op``. Besides types, shapes and options it keeps
the little graph context the GPU delegate itself looks at: small constant values (axes, shapes,
paddings), which op produces each input and which ops read each output.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from tflkit.ir import Op, Tensor, schema

_Sig = TypeVar("_Sig")

#: Constants up to this many elements keep their values in the signature.
SMALL_CONSTANT = 64

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class TensorSig:
    """Type, shape and role of one op input or output."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...] | None = None
    is_const: bool = False
    quantized: bool = False
    per_channel: bool = False
    is_variable: bool = False
    sparse: bool = False
    #: Flattened values of a small numeric constant, else None.
    values: tuple[Any, ...] | None = None
    #: Type of the op producing this tensor (None for constants and graph inputs).
    producer: str | None = None
    #: Types of the ops reading this tensor, one entry per reading op.
    consumers: tuple[str, ...] = ()
    is_graph_input: bool = False
    is_graph_output: bool = False
    #: Position in the subgraph's tensor list: tells two inputs that are one tensor apart.
    tensor_index: int = -1
    #: Output of a DEQUANTIZE of fp16 constant weights: the delegate reads the fp16 constant
    #: directly, so this counts as a constant.
    fp16_weights: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def is_dynamic(self) -> bool:
        return self.shape_signature is not None and any(d < 0 for d in self.shape_signature)

    @property
    def is_runtime(self) -> bool:
        """Computed while the graph runs (TFLite's arena tensors): not constant, not a variable."""
        return not self.is_const and not self.is_variable

    @classmethod
    def from_tensor(cls, tensor: Tensor) -> TensorSig:
        scales = tensor.scale_count
        fp16_weights = _is_fp16_weights(tensor)
        is_const = tensor.is_constant or fp16_weights or _is_empty_unfed(tensor)
        values = None
        if is_const and tensor.sparsity is None and tensor.buffer is not None:
            values = _small_values(tensor.buffer.raw, tensor.type)
        producer = tensor.producer
        index = tensor.index if tensor.subgraph is not None else -1
        return _record(
            cls,
            name=tensor.name,
            dtype=tensor.type_name,
            shape=tuple(tensor.shape),
            shape_signature=tensor.shape_signature,
            is_const=is_const,
            quantized=scales > 0,
            per_channel=scales > 1,
            is_variable=tensor.is_variable,
            sparse=tensor.sparsity is not None,
            values=values,
            producer=None if producer is None else producer.type,
            consumers=tuple(op.type for op in tensor.consumers),
            is_graph_input=tensor.is_graph_input,
            is_graph_output=tensor.is_graph_output,
            tensor_index=index,
            fp16_weights=fp16_weights,
        )


def _small_values(raw: memoryview | None, tensor_type: int) -> tuple[Any, ...] | None:
    """The elements of constant data of at most ``SMALL_CONSTANT`` elements (what numpy's
    ``tolist`` gives: complex as ``complex``), else None; larger data is not even read."""
    code = schema.struct_code(tensor_type)
    if raw is None or code is None:
        return None
    size = struct.calcsize("<" + code)
    count, rest = divmod(raw.nbytes, size)
    if not count or rest or count > SMALL_CONSTANT:
        return None
    values = struct.unpack_from(f"<{count * len(code)}{code[0]}", raw)
    if len(code) == 2:  # complex: (real, imaginary) pairs
        return tuple(complex(r, i) for r, i in zip(values[::2], values[1::2], strict=True))
    return values


def _is_empty_unfed(tensor: Tensor) -> bool:
    """A tensor with no elements that no op writes and the app cannot feed holds a fixed (empty)
    value: a constant. Measured: wyoming-openwakeword's hey_jarvis_v0.1 has a RESHAPE (op 24)
    whose shape input is such a [0] tensor (a scalar output); the accelerator takes the RESHAPE
    and runs 25 of the 26 main-graph ops."""
    return (
        tensor.producer is None
        and not tensor.is_graph_input
        and not tensor.is_variable
        and 0 in tensor.shape
        and not tensor.is_dynamic
    )


def _is_fp16_weights(tensor: Tensor) -> bool:
    producer = tensor.producer
    if producer is None or producer.type != "DEQUANTIZE" or not producer.inputs:
        return False
    src = producer.inputs[0]
    return src is not None and src.type_name == "FLOAT16" and src.is_constant


@dataclass(frozen=True)
class OpSignature:
    """Op type, version, tensor signatures and options of one op."""

    op_type: str
    builtin_code: int
    custom_code: str | None
    version: int
    inputs: tuple[TensorSig | None, ...]
    outputs: tuple[TensorSig, ...]
    #: The op's option fields, read-only (``Op.option_fields``: ``fusedActivationFunction``...).
    option_fields: Mapping[str, Any] = field(
        default_factory=lambda: _EMPTY, compare=False, hash=False
    )
    custom_options: bytes | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def is_custom(self) -> bool:
        return self.custom_code is not None

    @property
    def is_flex(self) -> bool:
        return self.custom_code is not None and self.custom_code.startswith("Flex")

    def input(self, index: int) -> TensorSig | None:
        """Input ``index``, or None when omitted or out of range."""
        return self.inputs[index] if 0 <= index < len(self.inputs) else None

    def output(self, index: int = 0) -> TensorSig | None:
        """Output ``index``, or None when the op has fewer outputs."""
        return self.outputs[index] if 0 <= index < len(self.outputs) else None

    def option(self, name: str, default: Any = None) -> Any:
        """Option field ``name`` (schema spelling), or ``default`` when absent."""
        value = self.option_fields.get(name)
        return default if value is None else value

    @property
    def present_inputs(self) -> tuple[tuple[int, TensorSig], ...]:
        """(index, signature) of each input the op has (omitted optional ones left out)."""
        return self._inputs_by_role()[0]

    @property
    def runtime_inputs(self) -> tuple[tuple[int, TensorSig], ...]:
        """Inputs computed at runtime (what TFLite calls runtime inputs: not constant)."""
        return self._inputs_by_role()[1]

    @property
    def const_inputs(self) -> tuple[tuple[int, TensorSig], ...]:
        return self._inputs_by_role()[2]

    def _inputs_by_role(self) -> tuple[tuple[tuple[int, TensorSig], ...], ...]:
        """(present, runtime, constant) inputs, computed once: the rules ask for them about
        five times an op (a tenth of signing and checking the 2,400 ops of
        ``bench/ir_large.py --layers 800``). Kept beside the fields, out of ``==`` and ``hash``."""
        found = self.__dict__.get("_by_role")
        if found is None:
            present = tuple([(i, t) for i, t in enumerate(self.inputs) if t is not None])
            found = (
                present,
                tuple([(i, t) for i, t in present if not t.is_const]),
                tuple([(i, t) for i, t in present if t.is_const]),
            )
            self.__dict__["_by_role"] = found
        return found

    @classmethod
    def from_op(cls, op: Op, tensors: dict[int, TensorSig] | None = None) -> OpSignature:
        """The signature of ``op``; ``tensors`` (by ``id``) memoizes tensor signatures for
        callers that sign many ops of one unchanged graph (a tensor is an output of one op and
        an input of others)."""
        opcode = op.opcode
        memo = {} if tensors is None else tensors
        signed: list[TensorSig | None] = []
        for tensor in (*op.inputs, *op.outputs):
            if tensor is None:
                signed.append(None)
                continue
            found = memo.get(id(tensor))
            if found is None:
                found = memo[id(tensor)] = TensorSig.from_tensor(tensor)
            signed.append(found)
        count = len(signed) - len(op.outputs)
        return _record(
            cls,
            op_type=opcode.name,
            builtin_code=opcode.builtin_code,
            custom_code=opcode.custom_code if opcode.is_custom else None,
            version=opcode.version,
            inputs=tuple(signed[:count]),
            outputs=tuple(signed[count:]),
            option_fields=op.option_fields,
            custom_options=op.custom_options,
        )


def _record(cls: type[_Sig], **fields: Any) -> _Sig:
    """A frozen signature with every field given, built without the frozen ``__init__``'s one
    ``object.__setattr__`` per field (a third of signing a graph's 4,000 tensors; equal to
    ``cls(**fields)``, which ``tests/test_compat_static.py`` checks)."""
    sig = object.__new__(cls)
    sig.__dict__.update(fields)
    return sig
