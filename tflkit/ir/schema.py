"""The one module that imports the TFLite flatbuffer schema (generated code from ai_edge_litert).

Everything else in tflkit reaches the schema through this module, as ``schema.fb``.
"""

from __future__ import annotations

import functools

import numpy as np
from ai_edge_litert import schema_py_generated as fb
from flatbuffers.table import Table

__all__ = [
    "FILE_IDENTIFIER",
    "SCHEMA_VERSION",
    "BuiltinOperator",
    "TensorType",
    "fb",
    "numpy_dtype",
    "op_code",
    "op_name",
    "options_class",
    "options_type_for",
    "tensor_type",
    "tensor_type_name",
]

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3
#: Builtin codes below this value also live in the deprecated int8 ``deprecated_builtin_code``.
PLACEHOLDER_FOR_GREATER_OP_CODES = fb.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES

BuiltinOperator = fb.BuiltinOperator
TensorType = fb.TensorType


def _enum_names(enum_class: type) -> dict[int, str]:
    return {
        value: name
        for name, value in vars(enum_class).items()
        if not name.startswith("_") and isinstance(value, int)
    }


@functools.cache
def _op_names() -> dict[int, str]:
    return _enum_names(fb.BuiltinOperator)


@functools.cache
def _op_codes() -> dict[str, int]:
    return {name: code for code, name in _op_names().items()}


@functools.cache
def _tensor_type_names() -> dict[int, str]:
    return _enum_names(fb.TensorType)


@functools.cache
def _options_names() -> dict[int, str]:
    return _enum_names(fb.BuiltinOptions)


_NUMPY_DTYPES: dict[int, np.dtype] = {
    fb.TensorType.FLOAT32: np.dtype(np.float32),
    fb.TensorType.FLOAT16: np.dtype(np.float16),
    fb.TensorType.FLOAT64: np.dtype(np.float64),
    fb.TensorType.INT32: np.dtype(np.int32),
    fb.TensorType.UINT8: np.dtype(np.uint8),
    fb.TensorType.INT64: np.dtype(np.int64),
    fb.TensorType.BOOL: np.dtype(np.bool_),
    fb.TensorType.INT16: np.dtype(np.int16),
    fb.TensorType.COMPLEX64: np.dtype(np.complex64),
    fb.TensorType.COMPLEX128: np.dtype(np.complex128),
    fb.TensorType.INT8: np.dtype(np.int8),
    fb.TensorType.UINT64: np.dtype(np.uint64),
    fb.TensorType.UINT32: np.dtype(np.uint32),
    fb.TensorType.UINT16: np.dtype(np.uint16),
}


def op_name(builtin_code: int) -> str:
    """``BuiltinOperator`` name of a builtin code, e.g. 3 -> "CONV_2D"."""
    return _op_names().get(builtin_code, f"BUILTIN_{builtin_code}")


def op_code(name: str) -> int:
    """Builtin code of an op name, e.g. "CONV_2D" -> 3; raises KeyError for unknown names."""
    return _op_codes()[name]


def tensor_type_name(tensor_type: int) -> str:
    """``TensorType`` name, e.g. 0 -> "FLOAT32"."""
    return _tensor_type_names().get(tensor_type, f"TYPE_{tensor_type}")


def tensor_type(dtype: np.dtype | type | str) -> int:
    """The ``TensorType`` of a numpy dtype; raises KeyError when TFLite has no such type."""
    wanted = np.dtype(dtype)
    for code, candidate in _NUMPY_DTYPES.items():
        if candidate == wanted:
            return code
    raise KeyError(f"no TFLite tensor type for numpy dtype {wanted}")


def numpy_dtype(tensor_type: int) -> np.dtype | None:
    """The numpy dtype of a ``TensorType``, or None (STRING, RESOURCE, VARIANT, INT4...)."""
    return _NUMPY_DTYPES.get(tensor_type)


def options_type_for(options: object) -> int:
    """The ``BuiltinOptions`` union tag of an object-API options instance (Conv2DOptionsT...)."""
    name = type(options).__name__.removesuffix("T")
    for code, candidate in _options_names().items():
        if candidate == name:
            return code
    raise KeyError(f"{type(options).__name__} is not a BuiltinOptions member")


def options_class(options_type: int) -> type | None:
    """The object-API class of a ``BuiltinOptions`` tag, or None for NONE."""
    name = _options_names().get(options_type)
    if not name or name == "NONE":
        return None
    return getattr(fb, f"{name}T", None)


def flatbuffer_table(buf: object, position: int) -> Table:
    """A generic flatbuffer table at ``position`` (what union creators expect)."""
    return Table(buf, position)
