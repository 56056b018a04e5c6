"""Child script: ONNX -> PyTorch (onnx2torch) -> .tflite (litert-torch), ONNX's second route.

Runs as a plain script (``python _onnx_torch_worker.py JOB.json``) in the PyTorch route's
environment (litert-torch, onnx2torch installed without its dependencies): it imports nothing
from tflkit but :mod:`tflkit.proc.result_file` (standard library only). Only ``job["step"] ==
"convert"`` (writes ``model.tflite``): the ONNX Runtime reference runs in the onnx2tf worker.

The source is the prepared model (static input shapes, simplified). onnx2torch keeps ONNX's
shape operands (Reshape's shape, Slice's starts, Pad's pads, Resize's scales...) as tensors,
which ``torch.export`` sees as data-dependent; :func:`freeze_shapes` runs the module once at the
static input shapes (``torch.fx.Interpreter``), folds what does not depend on the input's
values into constants, and rewrites the ops reading such operands into plain torch calls with
Python literals (``torch.reshape`` with a tuple, ``F.pad``, ``F.interpolate``, slicing...).

Around onnx2torch 1.5.15 (all through public APIs): torchvision is replaced by a stand-in during
its import only (:func:`_import_onnx2torch`); models with ops it lacks are refused in one line
(:func:`unsupported_ops`) after an ``onnx.version_converter`` upgrade of old opsets was tried;
a few converters it lacks are registered with its ``add_converter`` (GlobalMaxPool, opset-18
reductions, Pad/Resize/Split 18+); Clip with computed bounds becomes Max/Min in the ONNX graph.

State fields written: ``converter``, ``versions``, ``inputs`` ([{name, source_shape,
onnx_shape}]), ``ops`` (ONNX op counts), ``opset_upgrade`` ([from, to], when done),
``rewritten_onnx``, ``warnings`` (onnx2torch's approximations), ``rewritten`` (frozen ops by
onnx2torch class), ``convert_seconds``; on failure ``error`` (one line) and ``error_kind``
(``unsupported``, ``usage`` or ``convert``).
"""

import contextlib
import functools
import importlib.machinery
import inspect
import json
import operator
import os
import re
import sys
import time
import types
import warnings
from pathlib import Path

# Run as a script, this folder is sys.path[0]; its onnx.py / torch.py would shadow the packages.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

import numpy as np  # noqa: E402

# tflkit's root is on PYTHONPATH (child_env); result_file needs nothing but the standard library
from tflkit.proc.result_file import RESULT_FILE, load_sibling, write_result  # noqa: E402

_PREPARE = load_sibling(__file__, "_onnx_prepare")

#: ONNX ops whose onnx2torch converter needs torchvision (absent here: its only wheels for this
#: torch are CUDA builds that fail to import), and that no .tflite builtin computes anyway.
_TORCHVISION_OPS = ("NonMaxSuppression", "RoiAlign")


class Unsupported(Exception):
    """The model holds ops this route cannot take (the message names them)."""


def _refuse_torchvision(*_args, **_kwargs):
    raise Unsupported(f"{'/'.join(_TORCHVISION_OPS)}: not supported by the onnx2torch route")


def _import_onnx2torch():
    """Import onnx2torch without torchvision: its NonMaxSuppression and RoiAlign converters
    import ``torchvision`` (and only they use it). A stand-in whose ops raise
    :class:`Unsupported` is in ``sys.modules`` during the import only, so nothing else (torch,
    litert-torch, transformers) ever takes it for torchvision; :func:`unsupported_ops` refuses
    models with those ops before conversion."""
    import litert_torch  # noqa: F401  (first: it and its imports see no stand-in)
    import torch  # noqa: F401

    if "onnx2torch" in sys.modules:
        return sys.modules["onnx2torch"]
    stand_in = {}
    for name in ("torchvision", "torchvision.ops"):
        module = types.ModuleType(name, "onnx2torch route: torchvision is not installed")
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
        stand_in[name] = module
    ops = stand_in["torchvision.ops"]
    ops.nms = ops.box_convert = ops.roi_align = _refuse_torchvision
    stand_in["torchvision"].ops = ops
    real = {name: sys.modules.get(name) for name in stand_in}
    sys.modules.update(stand_in)
    try:
        import onnx2torch
    finally:
        for name, module in real.items():
            if sys.modules.get(name) is stand_in[name]:
                if module is None:
                    del sys.modules[name]
                else:
                    sys.modules[name] = module
    return onnx2torch


# -- converters onnx2torch 1.5.15 lacks ------------------------------------------------------

_REDUCE_OPS = (
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSumSquare",
)


def _add_converters(onnx2torch):
    """Register, with onnx2torch's own ``add_converter``, converters for common ops it lacks,
    built from its modules: GlobalMaxPool, the opset-18 reductions (axes as a constant input),
    and Pad 18/19/21, Resize 18/19, Split 18 where they mean what the older versions do."""
    import torch
    from onnx2torch.node_converters import get_converter
    from onnx2torch.node_converters.reduce import OnnxReduceStaticAxes
    from onnx2torch.node_converters.registry import add_converter
    from onnx2torch.utils.common import (
        OnnxMapping,
        OperationConverterResult,
        get_const_value,
        onnx_mapping_from_node,
    )

    class GlobalMaxPool(torch.nn.Module):
        def forward(self, x):
            return torch.amax(x, dim=tuple(range(2, x.dim())), keepdim=True)

    def register(op, version, fn):
        with contextlib.suppress(ValueError):  # a newer onnx2torch has its own
            add_converter(operation_type=op, version=version)(fn)

    register(
        "GlobalMaxPool",
        1,
        lambda node, graph: OperationConverterResult(GlobalMaxPool(), onnx_mapping_from_node(node)),
    )

    def reduce18(node, graph):
        keepdims = node.attributes.get("keepdims", 1)
        axes = None
        if len(node.input_values) > 1 and node.input_values[1]:
            try:
                axes = [int(a) for a in get_const_value(node.input_values[1], graph).reshape(-1)]
            except KeyError as exc:
                raise NotImplementedError(
                    f"{node.operation_type}: axes computed in the graph"
                ) from exc
        if not axes and node.attributes.get("noop_with_empty_axes", 0):
            module = torch.nn.Identity()
        else:
            module = OnnxReduceStaticAxes(node.operation_type, axes or None, keepdims)
        mapping = OnnxMapping(inputs=(node.input_values[0],), outputs=node.output_values)
        return OperationConverterResult(module, mapping)

    for op in _REDUCE_OPS:
        register(op, 18, reduce18)

    def alias(op, version, older, refuse):
        def convert(node, graph):
            reason = refuse(node)
            if reason:
                raise NotImplementedError(f"{op} {reason}")
            return get_converter(operation_type=op, version=older)(node, graph)

        register(op, version, convert)

    def pad_refuse(node):
        if len(node.input_values) > 3 and node.input_values[3]:
            return "with axes"
        return None

    def resize_refuse(node):
        attrs = node.attributes
        if attrs.get("antialias", 0) or attrs.get("axes") is not None:
            return "with antialias or axes"
        if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
            return f"keep_aspect_ratio_policy {attrs['keep_aspect_ratio_policy']}"
        return None

    def split_refuse(node):
        return None

    for version in (18, 19, 21):
        alias("Pad", version, 13, pad_refuse)
    for version in (18, 19):
        alias("Resize", version, 13, resize_refuse)
    alias("Split", 18, 13, split_refuse)


def standard_equivalents(model):
    """Rewrite, in ``model``, ops onnx2torch converts only in part into standard ONNX ops that
    compute the same: Clip with a min/max computed in the graph -> Max/Min (onnx2torch takes
    Clip's bounds as constants only); Pad-2's ``value`` also as ``constant_value`` (the
    attribute onnx2torch 1.5.15 reads: it padded with 0 instead). Returns how many nodes
    were rewritten."""
    import onnx

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    count = 0
    for node in model.graph.node:  # onnx2torch's Pad-2 reads "constant_value", not "value"
        names = {a.name for a in node.attribute}
        if node.op_type == "Pad" and opset < 11 and "value" in names:
            value = next(a.f for a in node.attribute if a.name == "value")
            if "constant_value" not in names:
                node.attribute.append(onnx.helper.make_attribute("constant_value", value))
                count += 1
    constant = {i.name for i in model.graph.initializer}
    constant |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    nodes = []
    for node in model.graph.node:
        bounds = list(node.input[1:3])
        if node.op_type != "Clip" or all(not b or b in constant for b in bounds):
            nodes.append(node)
            continue
        value = node.input[0]
        for op, bound in zip(("Max", "Min"), bounds, strict=False):
            if bound:
                out = f"{node.output[0]}__{op.lower()}"
                nodes.append(onnx.helper.make_node(op, [value, bound], [out]))
                value = out
        nodes.append(onnx.helper.make_node("Identity", [value], list(node.output)))
        count += 1
    if count:
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    return count


# -- inputs -------------------------------------------------------------------------------------


def static_inputs(model, options):
    """Fix the inputs of ``model`` (in memory) to static shapes; ``[{"name", "source_shape",
    "onnx_shape"}]`` as the onnx2tf worker reports them."""
    given = {k: [int(d) for d in v] for k, v in (options.get("input_shapes") or {}).items()}
    init = {i.name for i in model.graph.initializer}
    inputs = []
    for inp in model.graph.input:
        if inp.name in init:
            continue
        dims = inp.type.tensor_type.shape.dim
        source = [d.dim_value if d.HasField("dim_value") else None for d in dims]
        shape = list(source)
        if inp.name in given:
            shape = given.pop(inp.name)
        elif shape and shape[0] is None:
            shape[0] = int(options.get("batch") or 1)
        if any(d is None for d in shape) or len(shape) != len(source):
            raise ValueError(
                f"usage: input {inp.name} has dynamic dimensions {shape}: pass "
                f"--input-shape {inp.name}=D1,D2,... (ONNX layout)"
            )
        if shape != source:
            for dim, value in zip(dims, shape, strict=True):
                dim.Clear()
                dim.dim_value = int(value)
        inputs.append({"name": inp.name, "source_shape": source, "onnx_shape": shape})
    if given:
        raise ValueError(f"usage: --input-shape names {sorted(given)} are not ONNX inputs")
    if any(i["source_shape"] != i["onnx_shape"] for i in inputs):
        del model.graph.value_info[:]  # inferred again (onnx2torch runs shape inference)
        for out in model.graph.output:
            for dim in out.type.tensor_type.shape.dim:
                if not dim.HasField("dim_value"):
                    dim.Clear()
    return inputs


def _samples(model, inputs):
    """One random input per graph input, at its static shape, in its ONNX dtype."""
    import onnx
    import torch

    types_ = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
    rng = np.random.default_rng(0)
    samples = []
    for spec in inputs:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(types_[spec["name"]])
        shape = spec["onnx_shape"]
        if dtype.kind == "f":
            value = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            value = rng.integers(0, 2, shape).astype(dtype)
        else:
            value = rng.integers(0, 4, shape).astype(dtype)
        samples.append(torch.from_numpy(value))
    return samples


# -- ops this route cannot take -----------------------------------------------------------------


def unsupported_ops(model, get_converter):
    """``[(domain, op_type, opset, count)]`` for the node types onnx2torch has no converter for
    at the model's opset (its registry, as ``onnx2torch.convert`` looks them up), and the ops
    that need torchvision; in graph order."""
    opsets = {o.domain: o.version for o in model.opset_import}
    found = {}
    for node in _PREPARE.nodes(model.graph):
        opset = opsets.get(node.domain)
        missing = node.op_type in _TORCHVISION_OPS or opset is None
        if not missing:
            try:
                get_converter(operation_type=node.op_type, version=opset, domain=node.domain)
            except NotImplementedError:
                missing = True
        if missing:
            key = (node.domain or "ai.onnx", node.op_type, opset)
            found[key] = found.get(key, 0) + 1
    return [(*key, count) for key, count in found.items()]


#: The opset old models are raised to when onnx2torch has no converter at theirs.
_UPGRADE_OPSET = 13


def _default_opset(model):
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def _upgraded(model, get_converter):
    """``model`` raised to opset 13 with ``onnx.version_converter`` when that leaves no op
    onnx2torch lacks (it registers most ops from opset 7-11 on, old exports use opset 6);
    None otherwise."""
    import onnx
    from onnx import version_converter

    opset = _default_opset(model)
    if opset is None or opset >= _UPGRADE_OPSET:
        return None
    try:
        upgraded = version_converter.convert_version(model, _UPGRADE_OPSET)
        onnx.checker.check_model(upgraded)
    except Exception:
        return None
    return None if unsupported_ops(upgraded, get_converter) else upgraded


def _unsupported_message(missing, converter):
    """One line naming each op (domain, opset) the route lacks and what the user can do."""
    vision = [m for m in missing if m[1] in _TORCHVISION_OPS]
    if vision:
        ops = "/".join(sorted({m[1] for m in vision}))
        return (
            f"{ops}: not supported by the onnx2torch route ({converter}; onnx2torch computes it "
            "with torchvision, and no TFLite builtin op does): export the model without it and "
            "run it as post-processing"
        )
    names = []
    for domain, op_type, opset, count in missing:
        where = f"opset {opset}" if opset is not None else "no opset imported"
        names.append(f"{domain} {op_type} ({where}{f', {count} nodes' if count > 1 else ''})")
    it = "it" if len(missing) == 1 else "them"
    return (
        f"{'; '.join(names)}: {converter} has no converter for {it}; export the model without "
        f"{it} (or with standard ops that compute the same), with another opset, or pin the "
        "inputs with --input-shape so the exporter folds it away"
    )


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


def _plan(kind, module, bound, const, shape_of):
    """``(fn, args, kwargs)`` computing ``module`` (an onnx2torch module of class ``kind``)
    with its constant operands as Python literals; None when it needs no rewrite or when an
    operand is not constant.

    ``bound``: its forward's arguments by name (fx nodes or literals); ``const(node)``: a
    node's constant value (None when it depends on the input's values); ``shape_of(node)``.
    """
    import torch
    import torch.nn.functional as F

    def has(name):
        return bound.get(name) is not None

    def value(name):  # None when absent or not constant
        arg = bound.get(name)
        return None if arg is None else const(arg) if hasattr(arg, "op") else arg

    def frozen(*names):  # every one of ``names`` that is given is constant
        return all(not has(n) or value(n) is not None for n in names)

    data = next(iter(bound.values()))
    shape = shape_of(data)
    if kind == "OnnxReshape" and frozen("shape"):
        return torch.reshape, (data, _reshape_target(shape, _ints(value("shape")))), {}
    if kind == "OnnxSqueezeDynamicAxes" and frozen("axes"):
        axes = [a % len(shape) for a in _ints(value("axes"))] if has("axes") else []
        axes = axes or [i for i, d in enumerate(shape) if d == 1]
        return torch.reshape, (data, tuple(d for i, d in enumerate(shape) if i not in axes)), {}
    if kind == "OnnxUnsqueezeDynamicAxes" and has("axes") and frozen("axes"):
        rank = len(shape) + len(_ints(value("axes")))
        axes = {a % rank for a in _ints(value("axes"))}
        dims = iter(shape)
        return torch.reshape, (data, tuple(1 if i in axes else next(dims) for i in range(rank))), {}
    if kind == "OnnxExpand" and has("shape") and frozen("shape"):
        target = tuple(torch.broadcast_shapes(tuple(shape), tuple(_ints(value("shape")))))
        return _expand, (data, target), {}
    if kind == "OnnxTile" and has("repeats") and frozen("repeats"):
        return _repeat, (data, tuple(_ints(value("repeats")))), {}
    if kind == "OnnxSlice" and frozen("starts", "ends", "axes", "steps"):
        operands = [
            _ints(value(n)) if has(n) else None for n in ("starts", "ends", "axes", "steps")
        ]
        flips, index = _slice_index(list(shape), *operands)
        if flips:
            return _flip_slice, (data, flips, index), {}
        return operator.getitem, (data, index), {}
    if kind == "OnnxPadDynamic" and has("pads") and frozen("pads", "constant_value"):
        fill = value("constant_value")
        fill = (
            0.0
            if fill is None
            else float(fill.reshape(-1)[0])
            if hasattr(fill, "reshape")
            else fill
        )
        return _pad, (data, _ints(value("pads")), module.mode, fill), {}
    if kind in ("OnnxResize", "OnnxResizeV10") and frozen("roi", "scales", "sizes"):
        resize = module._resize if kind == "OnnxResizeV10" else module
        mode = _RESIZE_MODES.get((resize.onnx_mode, len(shape) - 2))
        roi = value("roi")
        if mode is None or (roi is not None and roi.numel() and not resize.ignore_roi):
            return None  # the module raises the reason when it runs
        scales = value("scales")
        sizes = value("sizes")
        kwargs = {"mode": mode, "align_corners": resize.align_corners}
        if sizes is not None and sizes.numel():
            sizes = _ints(sizes)
            if sizes[:2] != list(shape[:2]):
                return None
            kwargs["size"] = tuple(sizes[2:])
        elif scales is not None and scales.numel():
            scales = [float(s) for s in scales.tolist()]
            if scales[:2] != [1.0, 1.0]:
                return None
            kwargs["scale_factor"] = tuple(scales[2:])
        else:
            return None
        return F.interpolate, (data,), kwargs
    if kind == "OnnxSplit13" and has("split") and frozen("split"):
        return torch.split, (data, _ints(value("split"))), {"dim": module.axis}
    if kind == "OnnxTopK" and frozen("k"):
        kwargs = {"dim": module.dim, "largest": module.largest, "sorted": module.sorted}
        return torch.topk, (data, _ints(value("k"))[0]), kwargs
    if kind == "OnnxReduceSumDynamicAxes" and has("axes") and frozen("axes"):
        axes = sorted(_ints(value("axes")))
        if axes:
            return torch.sum, (data,), {"dim": axes, "keepdim": bool(module._keepdims)}
    if kind == "OnnxCumSum" and frozen("axis"):
        axis = _ints(value("axis"))[0]
        return _cumsum, (data, axis, bool(module.exclusive), bool(module.reverse)), {}
    if kind == "OnnxGather" and frozen("indices"):
        indices = value("indices")
        if indices.dim() == 0:  # one index: a slice, no gather
            return torch.select, (data, module._axis, int(indices)), {}
    return None


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


# -- conversion ---------------------------------------------------------------------------------


def _contiguous(module):
    """Give every weight its own contiguous storage: onnx2torch keeps Gemm's transposed
    weights (``transB=0``) as strided views, and litert-torch 0.10 then wrote one Linear's
    weights for another of the same shape in some runs (speechmos DNSMOS P.808: 0.16 off)."""
    for tensor in [*module.parameters(), *module.buffers()]:
        if not tensor.is_contiguous():
            tensor.data = tensor.data.contiguous()


def _op_types(model):
    counts = {}
    for node in _PREPARE.nodes(model.graph):
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def _refusing_node(model, get_converter):
    """``"OpType node: "`` for the first node whose onnx2torch converter raises
    NotImplementedError (onnx2torch's message does not say which), or ``""``."""
    from onnx2torch.onnx_graph import OnnxGraph
    from onnx2torch.utils.safe_shape_inference import safe_shape_inference

    opsets = {o.domain: o.version for o in model.opset_import}
    try:
        graph = OnnxGraph(safe_shape_inference(model).graph)
        for node in graph.nodes.values():
            convert = get_converter(
                operation_type=node.operation_type,
                version=opsets[node.domain],
                domain=node.domain,
            )
            try:
                convert(node, graph)
            except NotImplementedError:
                return f"{node.operation_type} {node.unique_name}: "
    except Exception:
        return ""
    return ""


def _describe(gm, model, node):
    """``"OpType name: "`` of the ONNX node behind fx ``node`` (or ``""``)."""
    if node is None or node.op != "call_module":
        return ""
    module = gm.get_submodule(node.target)
    outputs = getattr(getattr(module, "onnx_mapping", None), "outputs", ())
    producer = {o: n.op_type for n in model.graph.node for o in n.output}
    op = producer.get(outputs[0]) if outputs else None
    return f"{op} {node.target}: " if op else f"{node.target}: "


def _remaining(gm, model):
    """ONNX op types (with their onnx2torch class) still read constant tensors in ``gm``: the
    ones torch.export may find data-dependent."""
    producer = {o: n.op_type for n in model.graph.node for o in n.output}
    found = set()
    for n in gm.graph.nodes:
        if n.op != "call_module" or not any(a.op == "get_attr" for a in n.all_input_nodes):
            continue
        module = gm.get_submodule(n.target)
        outputs = getattr(getattr(module, "onnx_mapping", None), "outputs", ())
        op = producer.get(outputs[0], "?") if outputs else "?"
        found.add(f"{op} ({type(module).__name__})")
    return sorted(found)


def convert(job, state):
    from importlib.metadata import version

    import onnx
    import torch

    onnx2torch = _import_onnx2torch()
    import litert_torch
    from onnx2torch.node_converters import get_converter

    state["versions"] = {
        "onnx2torch": version("onnx2torch"),
        "litert-torch": version("litert-torch"),
        "torch": torch.__version__,
        "onnx": onnx.__version__,
    }
    state["converter"] = (
        f"onnx2torch {version('onnx2torch')} + litert-torch {version('litert-torch')}"
    )
    _add_converters(onnx2torch)
    model = onnx.load(job["source"])
    state["ops"] = _op_types(model)
    missing = unsupported_ops(model, get_converter)
    if missing:
        upgraded = _upgraded(model, get_converter)
        if upgraded is not None:
            model, before = upgraded, _default_opset(model)
            state["opset_upgrade"] = [before, _default_opset(upgraded)]
    state["rewritten_onnx"] = standard_equivalents(model)
    missing = unsupported_ops(model, get_converter)
    if missing:
        state["unsupported"] = missing  # the parent names ops no route takes in one line
        raise Unsupported(_unsupported_message(missing, state["converter"]))
    state["inputs"] = static_inputs(model, job.get("options") or {})
    samples = _samples(model, state["inputs"])
    start = time.perf_counter()
    state["stage"] = "onnx2torch"
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gm = onnx2torch.convert(model, attach_onnx_mapping=True)
    except NotImplementedError as exc:  # a converter that refuses an attribute or a mode
        where = _refusing_node(model, get_converter)
        raise Unsupported(f"{where}{state['converter']}: {str(exc).strip()}") from None
    # onnx2torch converts some Resize modes approximately and says so only in a warning
    state["warnings"] = sorted({str(w.message) for w in caught if "onnx2torch" in w.filename})
    gm.eval()
    _contiguous(gm)
    state["stage"] = "freeze"
    try:
        gm, state["rewritten"] = freeze_shapes(gm, samples)
    except NotImplementedError as exc:  # onnx2torch modules refuse some operands when run
        where = _describe(gm, model, getattr(exc, "node", None))
        raise Unsupported(f"{where}{state['converter']}: {exc}") from None
    state["stage"] = "litert-torch"
    try:
        edge = litert_torch.convert(gm, tuple(samples))
        edge.export(str(Path(job["workdir"]) / "model.tflite"))  # raises on TF Select ops
    except Exception as exc:
        if "data-dependent" in str(exc) or "DataDependent" in type(exc).__name__:
            left = _remaining(gm, model)
            raise Unsupported(
                "torch.export found data-dependent shapes"
                + (f" in {', '.join(left)}" if left else "")
                + ": those ops compute their shape from a tensor this route could not freeze"
            ) from None
        explained = _litert_reason(exc, state["converter"])
        if explained:
            raise Unsupported(explained) from None
        raise
    state["convert_seconds"] = time.perf_counter() - start
    state["stage"] = "convert"


_SELECT_OPS = re.compile(r"TF Select ops: ([^\n]+)")
_ILLEGAL_OP = re.compile(r"failed to legalize operation '([^']+)'")
_SOURCE_PATH = re.compile(r"(?:[\w.-]*/)+[\w.-]+\.py(?::\d+)*:?\s*")


def _litert_reason(exc, converter):
    """One line for litert-torch failures that mean "no TFLite op for this" (None otherwise)."""
    text = str(exc)
    found = _SELECT_OPS.search(text)
    if found:
        return (
            f"TensorFlow op {found.group(1).strip()}: no TFLite builtin op takes this form, so "
            f"{converter} would need TF Select ops (never run by the GPU delegate); export the "
            "model without it"
        )
    found = _ILLEGAL_OP.search(text)
    if found:
        return (
            f"{converter} cannot lower {found.group(1)} to a TFLite op (e.g. a transposed or "
            "3-D grouped convolution of a form TFLite lacks); export the model without it"
        )
    return None


def _one_line(exc):
    """The error's first line, without source paths (MLIR locations name torch's files)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = " ".join(lines[:2]) if lines and lines[0].endswith(":") else (lines or [""])[0]
    return f"{type(exc).__name__}: {_SOURCE_PATH.sub('', text) or 'no message'}"[:500]


def main():
    job = json.loads(Path(sys.argv[1]).read_text())
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    state = {"stage": job["step"]}
    try:
        if job["step"] != "convert":
            raise ValueError(f"usage: step {job['step']!r}: this worker only converts")
        convert(job, state)
        state["stage"] = "done"
    except Unsupported as exc:
        state.update(error=str(exc).splitlines()[0][:700], error_kind="unsupported")
    except Exception as exc:
        text = str(exc).strip()
        if text.startswith("usage: "):
            state.update(error=text.removeprefix("usage: ").splitlines()[0], error_kind="usage")
        else:
            where = state.get("stage", "convert")
            state.update(error=f"{where}: {_one_line(exc)}", error_kind="convert")
    write_result(Path(job["workdir"]) / RESULT_FILE, state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
