"""What a tensor holds, apart from its place in a graph: type, shape, quantization grid and
constant data (``TensorValue``, the base of ``graph.Tensor``), and the ``Buffer`` of constant
bytes (a read-only view of the loaded file) and ``QuantParams``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tflkit.ir import option_tables, schema

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class QuantParams:
    """A quantized tensor's grid, read once from its ``QuantizationParametersT``: real value =
    (integer - zero point) * scale, per tensor or per channel along ``axis``."""

    scales: np.ndarray  # float64, one per tensor or per channel
    zero_points: np.ndarray  # int64, as the file gives them ([0] when it gives none)
    axis: int

    @property
    def per_tensor(self) -> tuple[float, int] | None:
        """(scale, zero point) of a per-tensor grid; None for a per-channel one."""
        if self.scales.size != 1:
            return None
        return float(self.scales[0]), int(self.zero_points[0])

    def broadcast(self, ndim: int) -> tuple[np.ndarray, np.ndarray]:
        """Scales and zero points (float64) shaped to broadcast over a value of rank ``ndim``."""
        import numpy as np

        scale = self.scales
        zero = self.zero_points.astype(np.float64)
        if scale.size > 1 and ndim:
            shape = [1] * ndim
            shape[self.axis] = -1
            scale, zero = scale.reshape(shape), zero.reshape(shape)
        return scale, zero

    def dequantize(self, values: np.ndarray) -> np.ndarray:
        """Integers on this grid in real units (float64): ``(value - zero point) * scale``."""
        import numpy as np

        scale, zero = self.broadcast(np.ndim(values))
        return (np.asarray(values).astype(np.float64) - zero) * scale


class Buffer:
    """Raw bytes of a constant (or of metadata); ``data`` is a read-only uint8 view or None.

    A loaded buffer holds a ``memoryview`` of the mapped file and becomes a numpy view when
    ``data`` is first read (``raw`` reads the bytes without numpy).
    """

    __slots__ = ("__weakref__", "_data", "_mapped")

    def __init__(self, data: np.ndarray | bytes | None = None) -> None:
        self._data = _as_bytes_view(data)
        self._mapped: memoryview | None = None

    @classmethod
    def mapped(cls, view: memoryview) -> Buffer:
        """A buffer over ``view`` (read-only bytes of a loaded file), not copied."""
        buffer = cls(None)
        buffer._mapped = view
        return buffer

    @property
    def data(self) -> np.ndarray | None:
        if self._mapped is not None:
            import numpy as np

            self._data = np.frombuffer(self._mapped, dtype=np.uint8)
            self._mapped = None
        return self._data

    @data.setter
    def data(self, value: np.ndarray | None) -> None:
        self._mapped = None
        self._data = value

    @property
    def raw(self) -> memoryview | None:
        """The bytes, read-only, without numpy (None when the buffer holds no data)."""
        if self._mapped is not None:
            return self._mapped
        return None if self._data is None else memoryview(self._data).cast("B")

    @property
    def nbytes(self) -> int:
        if self._mapped is not None:
            return self._mapped.nbytes
        return 0 if self._data is None else int(self._data.nbytes)

    def tobytes(self) -> bytes:
        raw = self.raw
        return b"" if raw is None else raw.tobytes()

    def __repr__(self) -> str:
        return f"Buffer({self.nbytes} bytes)"


def _as_bytes_view(data: np.ndarray | bytes | bytearray | memoryview | None) -> np.ndarray | None:
    if data is None:
        return None
    import numpy as np

    if isinstance(data, bytes | bytearray | memoryview):
        view = np.frombuffer(data, dtype=np.uint8)
    else:
        view = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    if view.flags.writeable:
        view = view.copy()
        view.flags.writeable = False
    return view


class TensorValue:
    """Type, shape, quantization and constant data of a tensor (read from the fields
    ``graph.Tensor`` sets)."""

    shape: tuple[int, ...]
    type: int
    buffer: Buffer | None
    sparsity: Any
    shape_signature: tuple[int, ...] | None
    is_variable: bool
    #: Unparsed (buffer, position) of a loaded tensor's quantization table.
    _lazy_quantization: tuple[Any, int] | None
    _quantization: Any

    @property
    def type_name(self) -> str:
        return schema.tensor_type_name(self.type)

    @property
    def dtype(self) -> np.dtype | None:
        return schema.numpy_dtype(self.type)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_dynamic(self) -> bool:
        """True when the shape signature has an unknown (-1) dimension."""
        return self.shape_signature is not None and any(d < 0 for d in self.shape_signature)

    @property
    def display_shape(self) -> tuple[int | str, ...]:
        """The shape with dynamic dimensions shown as ``?``."""
        dims = self.shape_signature if self.shape_signature is not None else self.shape
        return tuple("?" if d < 0 else d for d in dims)

    @property
    def quantization(self) -> Any:
        """``schema.fb.QuantizationParametersT`` (scale, zeroPoint, quantizedDimension...) or
        None; a loaded tensor's is decoded when first read."""
        lazy = self._lazy_quantization
        if lazy is not None:
            self._lazy_quantization = None
            self._quantization = schema.fb.QuantizationParametersT.InitFromBuf(*lazy)
        return self._quantization

    @quantization.setter
    def quantization(self, value: Any) -> None:
        self._lazy_quantization = None
        self._quantization = value

    @property
    def scale_count(self) -> int:
        """How many scales the quantization has: 0 unquantized, 1 per tensor, more per channel
        (read from the file without decoding the table when it is untouched)."""
        lazy = self._lazy_quantization
        if lazy is not None:
            return option_tables.vector_length(*lazy, "QuantizationParameters", "Scale")
        q = self._quantization
        return 0 if q is None or q.scale is None else len(q.scale)

    @property
    def is_quantized(self) -> bool:
        return self.scale_count > 0

    @property
    def quant_params(self) -> QuantParams | None:
        """The quantization grid (scales, zero points, axis), or None when not quantized: the
        one reader of ``quantization`` for code that computes with it."""
        if not self.is_quantized:
            return None
        import numpy as np

        q = self.quantization
        scales = np.asarray(q.scale, np.float64).reshape(-1)
        zeros = q.zeroPoint if q.zeroPoint is not None and len(q.zeroPoint) else [0]
        zero_points = np.asarray(zeros, np.int64).reshape(-1)
        return QuantParams(scales, zero_points, int(q.quantizedDimension or 0))

    @property
    def scale_zero_point(self) -> tuple[float, int] | None:
        """(scale, zero point) of a per-tensor quantized tensor, else None."""
        params = self.quant_params
        return None if params is None else params.per_tensor

    @property
    def nbytes(self) -> int | None:
        """Bytes of one instance of this tensor, or None for dynamic or non-numeric types."""
        bits = schema.TYPE_BITS.get(self.type)
        if schema.struct_code(self.type) is None or bits is None or self.is_dynamic:
            return None
        return math.prod(self.shape) * bits // 8

    # --- constant data --------------------------------------------------------------------
    @property
    def is_constant(self) -> bool:
        return self.buffer is not None and self.buffer.nbytes > 0 and not self.is_variable

    @property
    def data(self) -> np.ndarray | None:
        """The constant value, read-only, shaped; raw bytes for sparse or non-numeric tensors."""
        if self.buffer is None or self.buffer.data is None or self.buffer.nbytes == 0:
            return None
        raw = self.buffer.data
        dtype = self.dtype
        if dtype is None or self.sparsity is not None:
            return raw
        values = raw.view(dtype)
        if values.size == math.prod(self.shape):
            return values.reshape(self.shape)
        return values
