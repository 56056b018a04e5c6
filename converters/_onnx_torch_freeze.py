"""Freezing onnx2torch's shape operands so ``torch.export`` sees static shapes.

onnx2torch keeps ONNX's shape operands (Reshape's shape, Slice's starts, Pad's pads, Resize's
scales...) as tensors, which ``torch.export`` sees as data-dependent; :func:`freeze_shapes` runs
the module once at the static input shapes (``torch.fx.Interpreter``), folds what does not
depend on the input's values into constants, and rewrites the ops reading such operands into
plain torch calls with Python literals (``torch.reshape`` with a tuple, ``F.pad``,
``F.interpolate``, slicing...). Loaded beside :mod:`_onnx_torch_worker` (``load_sibling``).
"""

import functools
import inspect
import operator

# -- freezing the shape operands ----------------------------------------------------------------

#: onnx2torch modules whose value depends on their input's (static) shape only.
_SHAPE_ONLY = {"OnnxShape", "OnnxEyeLike"}


def _constant_nodes(gm):
    """The fx nodes whose value does not depend on the input's values: constants, the Shape of
    a tensor (static here), and whatever computes on those only."""
    const = set()
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            const.add(n)
        elif n.op in ("call_module", "call_function", "call_method"):
            kind = type(gm.get_submodule(n.target)).__name__ if n.op == "call_module" else ""
            if kind in _SHAPE_ONLY or all(a in const for a in n.all_input_nodes):
                const.add(n)
    return const


def _ints(value):
    """A small constant tensor (or number) as a list of Python ints."""
    value = value.tolist() if hasattr(value, "tolist") else value
    return [int(v) for v in value] if isinstance(value, list) else [int(value)]


def _reshape_target(shape, target):
    """ONNX Reshape's ``target`` at input ``shape``: 0 copies the input's dim, -1 is inferred."""
    out = [shape[i] if d == 0 else d for i, d in enumerate(target)]
    if -1 in out:
        known = 1
        for d in out:
            known *= d if d != -1 else 1
        total = 1
        for d in shape:
            total *= d
        out[out.index(-1)] = total // known if known else 0
    return tuple(out)


def _slice_index(shape, starts, ends, axes, steps):
    """ONNX Slice operands -> (dims to flip, index tuple of Python slices) at ``shape``."""
    rank = len(shape)
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * rank
    flips = []
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        axis = axis + rank if axis < 0 else axis
        size = shape[axis]
        start = start + size if start < 0 else start
        end = end + size if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), size), min(max(end, 0), size)
            index[axis] = slice(start, max(start, end), step)
        else:  # ONNX clamps start to [0, size-1], end to [-1, size-1]; flipped: i -> size-1-i
            start, end = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
            flips.append(axis)
            first, last = size - 1 - start, size - 1 - end
            index[axis] = slice(first, max(first, last), -step)
    while index and index[-1] == slice(None):
        index.pop()
    return tuple(flips), tuple(index)


_RESIZE_MODES = {
    ("nearest", 1): "nearest",
    ("nearest", 2): "nearest",
    ("nearest", 3): "nearest",
    ("linear", 1): "linear",
    ("linear", 2): "bilinear",
    ("linear", 3): "trilinear",
    ("cubic", 2): "bicubic",
}


def _flip_slice(x, dims, index):
    import torch

    return torch.flip(x, dims)[index]


def _pad(x, pads, mode, value):
    """ONNX Pad (``pads`` = [x1_begin, x2_begin, ..., x1_end, ...], all Python ints) with
    F.pad, which pads any dims with a constant but only the last 1-3 otherwise: the padded dims
    are moved last (and the others merged) around it."""
    import torch.nn.functional as F

    rank = x.dim()
    begin, end = pads[:rank], pads[rank:]
    if mode == "constant":
        torch_pads = []
        for b, e in zip(reversed(begin), reversed(end), strict=True):
            torch_pads += [b, e]
        return F.pad(x, torch_pads, mode="constant", value=value)
    axes = [a for a in range(rank) if begin[a] or end[a]]
    if not axes:
        return x
    rest = [a for a in range(rank) if a not in axes]
    perm = rest + axes
    shape = list(x.shape)
    lead = 1
    for a in rest:
        lead *= shape[a]
    y = x.permute(perm) if perm != list(range(rank)) else x
    y = y.reshape([1, lead] + [shape[a] for a in axes])
    torch_pads = []
    for a in reversed(axes):
        torch_pads += [begin[a], end[a]]
    y = F.pad(y, torch_pads, mode=mode)
    y = y.reshape([shape[a] for a in rest] + [shape[a] + begin[a] + end[a] for a in axes])
    if perm == list(range(rank)):
        return y
    inverse = [perm.index(a) for a in range(rank)]
    return y.permute(inverse)


def _cumsum(x, axis, exclusive, reverse):
    import torch
    import torch.nn.functional as F

    axis = axis % x.dim()
    if reverse:
        x = torch.flip(x, (axis,))
    out = torch.cumsum(x, dim=axis)
    if exclusive:  # shift by one along axis, zero first
        out = F.pad(out, [0, 0] * (x.dim() - 1 - axis) + [1, 0]).narrow(axis, 0, x.shape[axis])
    if reverse:
        out = torch.flip(out, (axis,))
    return out


def _expand(x, shape):
    return x.expand(shape)


def _repeat(x, repeats):
    return x.repeat(repeats)


class _Operands:
    """A module's forward arguments (``bound``: fx nodes or literals by name) and which of them
    are constant (``const(node)``: the node's value, None when it depends on the input's)."""

    def __init__(self, module, bound, const, shape_of):
        self.module = module
        self.bound = bound
        self.const = const
        self.data = next(iter(bound.values()))
        self.shape = shape_of(self.data)

    def has(self, name):
        return self.bound.get(name) is not None

    def value(self, name):  # None when absent or not constant
        arg = self.bound.get(name)
        return None if arg is None else self.const(arg) if hasattr(arg, "op") else arg

    def frozen(self, *names):  # every one of ``names`` that is given is constant
        return all(not self.has(n) or self.value(n) is not None for n in names)

    def ints(self, name):
        return _ints(self.value(name))


def _plan_reshape(o):
    import torch

    if o.frozen("shape"):
        return torch.reshape, (o.data, _reshape_target(o.shape, o.ints("shape"))), {}
    return None


def _plan_squeeze(o):
    import torch

    if not o.frozen("axes"):
        return None
    axes = [a % len(o.shape) for a in o.ints("axes")] if o.has("axes") else []
    axes = axes or [i for i, d in enumerate(o.shape) if d == 1]
    return torch.reshape, (o.data, tuple(d for i, d in enumerate(o.shape) if i not in axes)), {}


def _plan_unsqueeze(o):
    import torch

    if not (o.has("axes") and o.frozen("axes")):
        return None
    rank = len(o.shape) + len(o.ints("axes"))
    axes = {a % rank for a in o.ints("axes")}
    dims = iter(o.shape)
    return torch.reshape, (o.data, tuple(1 if i in axes else next(dims) for i in range(rank))), {}


def _plan_expand(o):
    import torch

    if not (o.has("shape") and o.frozen("shape")):
        return None
    target = tuple(torch.broadcast_shapes(tuple(o.shape), tuple(o.ints("shape"))))
    return _expand, (o.data, target), {}


def _plan_tile(o):
    if o.has("repeats") and o.frozen("repeats"):
        return _repeat, (o.data, tuple(o.ints("repeats"))), {}
    return None


def _plan_slice(o):
    names = ("starts", "ends", "axes", "steps")
    if not o.frozen(*names):
        return None
    operands = [o.ints(n) if o.has(n) else None for n in names]
    flips, index = _slice_index(list(o.shape), *operands)
    if flips:
        return _flip_slice, (o.data, flips, index), {}
    return operator.getitem, (o.data, index), {}


def _plan_pad(o):
    if not (o.has("pads") and o.frozen("pads", "constant_value")):
        return None
    fill = o.value("constant_value")
    if fill is None:
        fill = 0.0
    elif hasattr(fill, "reshape"):
        fill = float(fill.reshape(-1)[0])
    return _pad, (o.data, o.ints("pads"), o.module.mode, fill), {}


def _plan_resize(o, resize=None):
    """``resize``: the OnnxResize the module is (None) or wraps (OnnxResizeV10's)."""
    import torch.nn.functional as F

    if not o.frozen("roi", "scales", "sizes"):
        return None
    resize = o.module if resize is None else resize
    mode = _RESIZE_MODES.get((resize.onnx_mode, len(o.shape) - 2))
    roi = o.value("roi")
    if mode is None or (roi is not None and roi.numel() and not resize.ignore_roi):
        return None  # the module raises the reason when it runs
    scales, sizes = o.value("scales"), o.value("sizes")
    kwargs = {"mode": mode, "align_corners": resize.align_corners}
    if sizes is not None and sizes.numel():
        sizes = _ints(sizes)
        if sizes[:2] != list(o.shape[:2]):
            return None
        kwargs["size"] = tuple(sizes[2:])
    elif scales is not None and scales.numel():
        scales = [float(s) for s in scales.tolist()]
        if scales[:2] != [1.0, 1.0]:
            return None
        kwargs["scale_factor"] = tuple(scales[2:])
    else:
        return None
    return F.interpolate, (o.data,), kwargs


def _plan_split(o):
    import torch

    if o.has("split") and o.frozen("split"):
        return torch.split, (o.data, o.ints("split")), {"dim": o.module.axis}
    return None


def _plan_topk(o):
    import torch

    if not o.frozen("k"):
        return None
    module = o.module
    kwargs = {"dim": module.dim, "largest": module.largest, "sorted": module.sorted}
    return torch.topk, (o.data, o.ints("k")[0]), kwargs


def _plan_reduce_sum(o):
    import torch

    if not (o.has("axes") and o.frozen("axes")):
        return None
    axes = sorted(o.ints("axes"))
    if not axes:
        return None
    return torch.sum, (o.data,), {"dim": axes, "keepdim": bool(o.module._keepdims)}


def _plan_cumsum(o):
    if not o.frozen("axis"):
        return None
    module = o.module
    args = (o.data, o.ints("axis")[0], bool(module.exclusive), bool(module.reverse))
    return _cumsum, args, {}


def _plan_gather(o):
    import torch

    if not o.frozen("indices"):
        return None
    indices = o.value("indices")
    if indices.dim() == 0:  # one index: a slice, no gather
        return torch.select, (o.data, o.module._axis, int(indices)), {}
    return None


#: onnx2torch module class -> the planner of its frozen form.
_PLANNERS = {
    "OnnxReshape": _plan_reshape,
    "OnnxSqueezeDynamicAxes": _plan_squeeze,
    "OnnxUnsqueezeDynamicAxes": _plan_unsqueeze,
    "OnnxExpand": _plan_expand,
    "OnnxTile": _plan_tile,
    "OnnxSlice": _plan_slice,
    "OnnxPadDynamic": _plan_pad,
    "OnnxResize": _plan_resize,
    "OnnxResizeV10": lambda o: _plan_resize(o, o.module._resize),
    "OnnxSplit13": _plan_split,
    "OnnxTopK": _plan_topk,
    "OnnxReduceSumDynamicAxes": _plan_reduce_sum,
    "OnnxCumSum": _plan_cumsum,
    "OnnxGather": _plan_gather,
}


def _plan(kind, module, bound, const, shape_of):
    """``(fn, args, kwargs)`` computing ``module`` (an onnx2torch module of class ``kind``)
    with its constant operands as Python literals; None when it needs no rewrite or when an
    operand is not constant.

    ``bound``: its forward's arguments by name (fx nodes or literals); ``const(node)``: a
    node's constant value (None when it depends on the input's values); ``shape_of(node)``.
    """
    planner = _PLANNERS.get(kind)
    return None if planner is None else planner(_Operands(module, bound, const, shape_of))


def _maximum(*tensors):
    return functools.reduce(lambda a, b: a.maximum(b), tensors)


def _minimum(*tensors):
    return functools.reduce(lambda a, b: a.minimum(b), tensors)


def _min_max_plan(module, args):
    """ONNX Max/Min as pairwise torch.maximum/minimum: onnx2torch stacks the inputs and
    reduces (CONCATENATION, REDUCE_MAX and a TRANSPOSE pair per op in the .tflite); these
    become one MAXIMUM/MINIMUM each."""
    import torch

    if module._operator is torch.amax:
        return _maximum, tuple(args), {}
    if module._operator is torch.amin:
        return _minimum, tuple(args), {}
    return None


def freeze_shapes(gm, samples):
    """Make onnx2torch's ``gm`` exportable at the static input shapes of ``samples``.

    Runs it once (``torch.fx.Interpreter``); each module that reads constant shape operands
    (see :func:`_plan`) runs as, then is replaced by, a torch call with those operands as
    Python literals; the nodes that do not depend on the input's values are folded into
    buffers. Returns ``(gm, rewritten)``, ``rewritten`` counting the rewrites by onnx2torch
    class.
    """
    import torch

    graph = gm.graph
    const = _constant_nodes(gm)
    values, plans = {}, {}

    def const_value(node):
        return values.get(node) if node in const else None

    def shape_of(node):
        return tuple(values[node].shape)

    class Freezer(torch.fx.Interpreter):
        def run_node(self, n):
            plan = None
            if n.op == "call_module" and n not in const:
                module = gm.get_submodule(n.target)
                try:
                    bound = inspect.signature(module.forward).bind(*n.args, **n.kwargs)
                except TypeError:
                    bound = None
                args = bound.arguments if bound else {}
                if type(module).__name__ == "OnnxMinMax" and n.args and not n.kwargs:
                    plan = _min_max_plan(module, n.args)
                elif args and hasattr(next(iter(args.values())), "op"):
                    plan = _plan(type(module).__name__, module, args, const_value, shape_of)
            if plan is None:
                try:
                    values[n] = super().run_node(n)
                except NotImplementedError as exc:
                    exc.node = n  # named in the message
                    raise
            else:
                fn, args, kwargs = plan
                plans[n] = plan
                values[n] = fn(
                    *self.map_nodes_to_values(args, n), **self.map_nodes_to_values(kwargs, n)
                )
            return values[n]

    with torch.no_grad():
        Freezer(gm).run(*samples)

    rewritten, replaced = {}, {}
    for n, (fn, args, kwargs) in plans.items():  # in graph order
        kind = type(gm.get_submodule(n.target)).__name__
        args, kwargs = torch.fx.node.map_arg((args, kwargs), lambda a: replaced.get(a, a))
        with graph.inserting_before(n):
            replaced[n] = graph.call_function(fn, args, kwargs)
        n.replace_all_uses_with(replaced[n])
        graph.erase_node(n)
        rewritten[kind] = rewritten.get(kind, 0) + 1

    count = 0
    for n in list(graph.nodes):
        if n not in const or n.op == "get_attr" or all(u in const for u in n.users):
            continue  # not constant, a buffer already, or read by constants only (removed)
        value = values[n]
        if not isinstance(value, torch.Tensor):
            raise RuntimeError(f"a constant {type(value).__name__} output ({n.target})")
        name = f"_tflkit_frozen_{count}"
        count += 1
        gm.register_buffer(name, value.detach().clone())
        with graph.inserting_before(n):
            frozen = graph.get_attr(name)
        n.replace_all_uses_with(frozen)
    graph.eliminate_dead_code()
    gm.delete_all_unused_submodules()
    graph.lint()
    gm.recompile()
    return gm, rewritten
