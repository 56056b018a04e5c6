"""Writing and reading ``CompiledModel`` tensor buffers through LiteRT's Python binding.

The binding (``ai_edge_litert.tensor_buffer``, 2.3) takes and gives only float32, float16,
bfloat16, int32, int8, uint8 and bool arrays: ``TensorBuffer.write`` and ``read`` raise
``Unsupported dtype: int64`` for int64, int16, uint16, uint32, uint64 and float64, on the CPU as
on the GPU, although the runtime itself runs such tensors. A buffer is host memory of the
tensor's bytes, so those dtypes go through as their little-endian bytes (a uint8 view): measured
by ``tests/test_gpu_buffers.py`` (int64 ids of a GRU text encoder, and int16, uint32, float64...
inputs cast to float32, give the classic ``Interpreter``'s outputs on the CPU and on the GPU).
Where even the bytes are refused, :class:`BindingRefused` says the binding refused the dtype:
that is a limit of the Python binding, never a verdict on the accelerator.

A refusal kept for the message drops its traceback: the traceback's frame holds the buffer, so
the cycle kept the buffer alive until a garbage collection after its ``CompiledModel`` was gone,
and freeing it then aborted the process (measured: a GPU batch job on a text model with int64
ids, ``tests/test_text_models.py``, died with SIGSEGV in ``gc.collect()``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["BINDING_REFUSED", "BindingRefused", "read_buffer", "write_buffer"]

#: the status of a run the Python binding refused (a dtype it cannot write): not the accelerator's
BINDING_REFUSED = "binding_refused"
_REFUSALS = (ValueError, TypeError, RuntimeError)


class BindingRefused(Exception):
    """The Python binding refused to write or read a tensor's dtype, in every form tried."""

    status = BINDING_REFUSED

    def __init__(self, dtype: np.dtype, what: str, why: BaseException) -> None:
        detail = " ".join(str(why).split()) or type(why).__name__
        super().__init__(
            f"the Python binding refused dtype {dtype} ({what}: {detail}): a limit of "
            "ai_edge_litert's TensorBuffer, not of the accelerator"
        )
        self.dtype = dtype


def write_buffer(buffer: Any, array: np.ndarray) -> None:
    """Write ``array`` into ``buffer``: as it is, else as its bytes (a dtype the binding
    refuses)."""
    value = np.ascontiguousarray(array)
    try:
        buffer.write(value)
        return
    except _REFUSALS as exc:
        if value.dtype == np.uint8:
            raise BindingRefused(value.dtype, "TensorBuffer.write", exc) from exc
        first = exc.with_traceback(None)  # no frame cycle keeping the buffer alive
    try:
        buffer.write(value.reshape(-1).view(np.uint8))
    except _REFUSALS as exc:
        what = "TensorBuffer.write, as it is and as bytes"
        raise BindingRefused(value.dtype, what, first) from exc


def read_buffer(buffer: Any, shape: tuple[int, ...] | list[int], dtype: Any) -> np.ndarray:
    """Read ``shape`` values of ``dtype`` from ``buffer``: as they are, else as their bytes."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    try:
        return buffer.read(count, dtype).reshape(shape)
    except _REFUSALS as exc:
        first = exc.with_traceback(None)  # no frame cycle keeping the buffer alive
    try:
        raw = buffer.read(count * dtype.itemsize, np.uint8)
    except _REFUSALS as exc:
        raise BindingRefused(dtype, "TensorBuffer.read, as it is and as bytes", first) from exc
    return np.asarray(raw).view(dtype).reshape(shape)
