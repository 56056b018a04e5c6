"""The TFLite flatbuffer schema: enums and names, and the generated code (``schema.fb``).

Reading a model needs only the enums and table layouts of ``schema_layout`` (generated from the
schema, committed). The generated object API of ai_edge_litert (``schema.fb``: ``Conv2DOptionsT``,
builders...) is imported on first use, with the numpy it imports: ``check`` never needs it.
Everything else in tflkit reaches the generated code through this module, as ``schema.fb``.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tflkit.ir import schema_layout

if TYPE_CHECKING:
    import numpy as np
    from ai_edge_litert import schema_py_generated as fb

__all__ = [
    "FILE_IDENTIFIER",
    "SCHEMA_VERSION",
    "TYPE_BITS",
    "BuiltinOperator",
    "TensorType",
    "enum_names",
    "fb",
    "numpy_dtype",
    "op_code",
    "op_name",
    "options_class",
    "options_type_for",
    "struct_code",
    "tensor_type",
    "tensor_type_name",
]

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3

BuiltinOperator = schema_layout.BuiltinOperator
TensorType = schema_layout.TensorType
#: Builtin codes below this value also live in the deprecated int8 ``deprecated_builtin_code``.
PLACEHOLDER_FOR_GREATER_OP_CODES = BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES


def __getattr__(name: str) -> Any:
    """``schema.fb``: the generated schema module, imported when first asked for."""
    if name == "fb":
        return _generated()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _generated() -> ModuleType:
    from ai_edge_litert import schema_py_generated

    return schema_py_generated


@functools.cache
def enum_names(enum: str) -> dict[int, str]:
    """Value -> member name of a schema enum or union (``"TensorType"``, ``"BuiltinOptions"``)."""
    return {
        value: name
        for name, value in vars(getattr(schema_layout, enum)).items()
        if not name.startswith("_") and isinstance(value, int)
    }


def _op_names() -> dict[int, str]:
    return enum_names("BuiltinOperator")


@functools.cache
def _op_codes() -> dict[str, int]:
    return {name: code for code, name in _op_names().items()}


def _tensor_type_names() -> dict[int, str]:
    return enum_names("TensorType")


def _options_names() -> dict[int, str]:
    return enum_names("BuiltinOptions")


#: Bits per element of each tensor type; None where the data has no fixed element size.
TYPE_BITS: dict[int, int | None] = {
    TensorType.FLOAT32: 32,
    TensorType.FLOAT16: 16,
    TensorType.INT32: 32,
    TensorType.UINT8: 8,
    TensorType.INT64: 64,
    TensorType.STRING: None,
    TensorType.BOOL: 8,
    TensorType.INT16: 16,
    TensorType.COMPLEX64: 64,
    TensorType.INT8: 8,
    TensorType.FLOAT64: 64,
    TensorType.COMPLEX128: 128,
    TensorType.UINT64: 64,
    TensorType.RESOURCE: None,
    TensorType.VARIANT: None,
    TensorType.UINT32: 32,
    TensorType.UINT16: 16,
    TensorType.INT4: 4,
    TensorType.BFLOAT16: 16,
    TensorType.INT2: 2,
    TensorType.UINT4: 4,
    TensorType.FLOAT8_E4M3FN: 8,
    TensorType.FLOAT8_E5M2: 8,
}

#: ``struct`` format of one element of each type numpy reads (complex: a pair of floats).
_STRUCT_CODES: dict[int, str] = {
    TensorType.FLOAT32: "f",
    TensorType.FLOAT16: "e",
    TensorType.FLOAT64: "d",
    TensorType.INT32: "i",
    TensorType.UINT8: "B",
    TensorType.INT64: "q",
    TensorType.BOOL: "?",
    TensorType.INT16: "h",
    TensorType.COMPLEX64: "ff",
    TensorType.COMPLEX128: "dd",
    TensorType.INT8: "b",
    TensorType.UINT64: "Q",
    TensorType.UINT32: "I",
    TensorType.UINT16: "H",
}


@functools.cache
def _numpy_dtypes() -> dict[int, np.dtype]:
    import numpy as np

    return {code: np.dtype("<" + _numpy_code(code)) for code in _STRUCT_CODES}


def _numpy_code(code: int) -> str:
    """The numpy code of a type: sized for 64-bit integers ("q" is numpy's ``longlong``, whose
    arrays LiteRT's ``set_tensor`` refuses as NOTYPE; "i8" is ``int64`` proper)."""
    sized = {"ff": "c8", "dd": "c16", "?": "?", "q": "i8", "Q": "u8"}
    return sized.get(_STRUCT_CODES[code], _STRUCT_CODES[code])


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
    import numpy as np

    wanted = np.dtype(dtype)
    for code, candidate in _numpy_dtypes().items():
        if candidate == wanted:
            return code
    raise KeyError(f"no TFLite tensor type for numpy dtype {wanted}")


def numpy_dtype(tensor_type: int) -> np.dtype | None:
    """The numpy dtype of a ``TensorType``, or None (STRING, RESOURCE, VARIANT, INT4...)."""
    return _numpy_dtypes().get(tensor_type)


def struct_code(tensor_type: int) -> str | None:
    """The ``struct`` format of one element of a ``TensorType`` numpy reads ("f", "e" for
    FLOAT16, "ff" for COMPLEX64...), or None: values read without numpy."""
    return _STRUCT_CODES.get(tensor_type)


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
    return getattr(_generated(), f"{name}T", None)


def flatbuffer_table(buf: object, position: int) -> Any:
    """A generic flatbuffer table at ``position`` (what union creators expect)."""
    from flatbuffers.table import Table

    return Table(buf, position)
