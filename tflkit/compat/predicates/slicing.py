"""SLICE, STRIDED_SLICE and DYNAMIC_UPDATE_SLICE: the delegate's own slice arithmetic."""

from __future__ import annotations

import math

from tflkit.compat.predicates.operands import no_output
from tflkit.compat.predicates.shapes import bhwc, const_ints, fmt_shape
from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature


def slice_extent(sig: OpSignature) -> Rejection | None:
    src, out = sig.input(0), sig.output(0)
    begin, size = const_ints(sig, 1), const_ints(sig, 2)
    if out is None:
        return no_output(sig)
    if src is None or begin is None or size is None or not 1 <= src.rank <= 4:
        return None
    r, n = src.rank, len(begin)
    if n != len(size) or not (n == r or (r == 4 and n == 3)):
        why = f"begin/size have {n} values for a {r}-D input."
        return reject(Reason.SHAPE, sig.op_type, why, input_index=1)
    shape = bhwc(src.shape)
    out_shape = bhwc(out.shape)
    if shape is None or out_shape is None:
        return None
    slots = {4: (0, 1, 2, 3), 3: (0, 2, 3), 2: (0, 3), 1: (0,)}[r]
    if r == 4 and n == 3:
        slots = (1, 2, 3)
    starts, sizes = [0, 0, 0, 0], list(shape)
    for slot, b, s in zip(slots, begin, size, strict=True):
        starts[slot], sizes[slot] = b, s
    extent = []
    for i in range(4):
        length = shape[i] - starts[i] if sizes[i] == -1 else sizes[i]
        end = starts[i] + length
        if end < 0:
            end += shape[i]
        extent.append(end - starts[i])
    if tuple(extent) == out_shape:
        return None
    return reject(Reason.SHAPE, sig.op_type, "begin/size do not match the output shape.")


def _update_mask(mask: int, rank: int) -> int:
    if rank == 3:
        return ((mask & 4) << 1) | ((mask & 2) << 1) | (mask & 1)
    if rank == 2:
        return ((mask & 2) << 2) | (mask & 1)
    return mask


def _round_up_div(n: int, d: int) -> int:
    return math.trunc((n + d - 1) / d)


def tflite_strided_slice_shape(
    shape: tuple[int, ...],
    begin: list[int],
    end: list[int],
    strides: list[int],
    begin_mask: int,
    end_mask: int,
) -> tuple[int, ...] | None:
    """The output shape TFLite's kernel computes (Python slicing semantics, with clamping), for
    slices without ellipsis, new-axis or shrink masks; None when it does not apply."""
    if not len(begin) == len(end) == len(strides) or len(begin) > len(shape):
        return None
    out = []
    for i, n in enumerate(shape):
        if i >= len(begin):
            out.append(n)
            continue
        step = strides[i]
        if step == 0:
            return None
        b = (0 if step > 0 else n - 1) if begin_mask >> i & 1 else begin[i]
        e = (n if step > 0 else -1) if end_mask >> i & 1 else end[i]
        if not begin_mask >> i & 1:
            b = b + n if b < 0 else b
            b = min(max(b, 0), n) if step > 0 else min(max(b, -1), n - 1)
        if not end_mask >> i & 1:
            e = e + n if e < 0 else e
            e = min(max(e, 0), n) if step > 0 else min(max(e, -1), n - 1)
        out.append(max(0, math.ceil((e - b) / step)))
    return tuple(out)


def strided_slice_masks(sig: OpSignature) -> Rejection | None:
    for name, label in (
        ("ellipsisMask", "ellipsis_mask"),
        ("newAxisMask", "new_axis_mask"),
        ("shrinkAxisMask", "shrink_axis_mask"),
    ):
        if sig.option(name, 0):
            return reject(
                Reason.OPTIONS,
                sig.op_type,
                f"{label} is set; the GPU slice keeps every dimension (use begin/end masks and a "
                "RESHAPE instead).",
            )
    if sig.option("offset", False):
        return reject(Reason.OPTIONS, sig.op_type, "offset is set.")
    return None


def strided_slice_extent(sig: OpSignature) -> Rejection | None:
    """The delegate's own slice arithmetic (no clamping of out-of-range ends) must reproduce
    the output shape TFLite computes."""
    src, out = sig.input(0), sig.output(0)
    begin, end, strides = const_ints(sig, 1), const_ints(sig, 2), const_ints(sig, 3)
    if out is None:
        return no_output(sig)
    if src is None or begin is None or end is None or strides is None or src.rank > 4:
        return None
    if strided_slice_masks(sig) is not None:
        return None
    computed = tflite_strided_slice_shape(
        src.shape, begin, end, strides, sig.option("beginMask", 0), sig.option("endMask", 0)
    )
    shape, out_shape = bhwc(src.shape), bhwc(computed if computed is not None else out.shape)
    if shape is None or out_shape is None:
        return None
    r, n = src.rank, len(begin)
    if n not in (r, r - 1):
        why = f"begin/end/strides have {n} values for a {r}-D input."
        return reject(Reason.SHAPE, sig.op_type, why, input_index=1)

    def read(values: list[int], current: list[int]) -> list[int]:
        v, c = values, current
        if n == r:  # the values include the batch dimension
            if len(v) == 4:
                return list(v)
            if len(v) == 3:
                return [v[0], c[1], v[1], v[2]]
            if len(v) == 2:
                return [v[0], c[1], c[2], v[1]]
            return [v[0], c[1], c[2], c[3]]
        if len(v) == 3:
            return [c[0], v[0], v[1], v[2]]
        if len(v) == 2:
            return [c[0], c[1], v[0], v[1]]
        return [c[0], c[1], c[2], v[0]]

    starts = read(begin, [0, 0, 0, 0])
    ends = read(end, list(shape))
    steps = read(strides, [1, 1, 1, 1])
    for i in range(4):
        if ends[i] < 0:
            ends[i] += shape[i]
        if starts[i] < 0:
            starts[i] += shape[i]
    begin_mask = _update_mask(sig.option("beginMask", 0), r)
    end_mask = _update_mask(sig.option("endMask", 0), r)
    for i, bit in enumerate((1, 2, 4, 8)):
        if begin_mask & bit:
            starts[i] = 0
        if end_mask & bit:
            ends[i] = shape[i]
    if any(s == 0 for s in steps):
        return reject(Reason.OPTIONS, sig.op_type, "A stride is 0.", input_index=3)
    if any(s < 0 for s in steps):
        why = "A stride is negative: reverse slices are not supported (use REVERSE_V2)."
        return reject(Reason.OPTIONS, sig.op_type, why, input_index=3)
    expected = tuple(_round_up_div(ends[i] - starts[i], steps[i]) for i in range(4))
    if expected == out_shape and computed is not None and 0 in computed:
        why = f"It produces an empty tensor {fmt_shape(computed)} from {fmt_shape(src.shape)}."
        return reject(Reason.CRASH, sig.op_type, why, fatal=True)
    if expected == out_shape:
        return None
    return reject(
        Reason.SHAPE,
        sig.op_type,
        "Its begin/end do not give the output shape without clamping (an end beyond the "
        "dimension, without end_mask).",
    )


def _dus_map(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (1,) * (4 - len(shape)) + tuple(shape)


def dynamic_update_slice_shapes(sig: OpSignature) -> Rejection | None:
    operand, update, start = sig.input(0), sig.input(1), sig.input(2)
    if operand is None or update is None or start is None:
        return reject(Reason.INPUT_COUNT, sig.op_type, "It needs 3 inputs.")
    if start.is_const:
        why = "start_indices is a constant; the delegate takes it as a runtime tensor."
        return reject(Reason.CONST_INPUT, sig.op_type, why, input_index=2)
    out = sig.output(0)
    if out is None:
        return no_output(sig)
    for t in (operand, update, out):
        if not 1 <= t.rank <= 4:
            return reject(Reason.SHAPE, sig.op_type, f"{t.name} must have 1 to 4 dimensions.")
    if start.rank != 1:
        return reject(Reason.SHAPE, sig.op_type, "start_indices must be 1-D.", input_index=2)
    if update.rank != operand.rank or update.dtype != operand.dtype:
        return reject(Reason.SHAPE, sig.op_type, "Update and operand differ in rank or type.")
    if operand.rank == 4 and operand.shape[0] != 1:
        return reject(Reason.SHAPE, sig.op_type, "A 4-D operand must have batch 1.")
    if any(u > o for u, o in zip(_dus_map(update.shape), _dus_map(operand.shape), strict=True)):
        return reject(Reason.SHAPE, sig.op_type, "The update is larger than the operand.")
    return None
