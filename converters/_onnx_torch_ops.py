"""onnx2torch as the ONNX route's worker uses it: imported without torchvision, with the
converters onnx2torch 1.5.15 lacks registered through its ``add_converter``, and the ONNX
rewrites into standard ops it converts in full.

Loaded beside :mod:`_onnx_torch_worker` (``load_sibling``) in the PyTorch route's environment;
imports nothing from tflkit.
"""

import contextlib
import importlib.machinery
import sys
import types

#: ONNX ops whose onnx2torch converter needs torchvision (absent here: its only wheels for this
#: torch are CUDA builds that fail to import), and that no .tflite builtin computes anyway.
TORCHVISION_OPS = ("NonMaxSuppression", "RoiAlign")


class Unsupported(Exception):
    """The model holds ops this route cannot take (the message names them)."""


def _refuse_torchvision(*_args, **_kwargs):
    raise Unsupported(f"{'/'.join(TORCHVISION_OPS)}: not supported by the onnx2torch route")


def import_onnx2torch():
    """Import onnx2torch without torchvision: its NonMaxSuppression and RoiAlign converters
    import ``torchvision`` (and only they use it). A stand-in whose ops raise
    :class:`Unsupported` is in ``sys.modules`` during the import only, so nothing else (torch,
    litert-torch, transformers) ever takes it for torchvision; the worker refuses
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


def _register(op, version, fn):
    """``fn`` as onnx2torch's converter of ``op`` at ``version`` (a newer onnx2torch with its
    own keeps it)."""
    from onnx2torch.node_converters.registry import add_converter

    with contextlib.suppress(ValueError):
        add_converter(operation_type=op, version=version)(fn)


def _module_result(module, node):
    from onnx2torch.utils.common import OperationConverterResult, onnx_mapping_from_node

    return OperationConverterResult(module, onnx_mapping_from_node(node))


def _register_modules():
    """GlobalMaxPool and SpaceToDepth as small torch modules."""
    import torch

    class GlobalMaxPool(torch.nn.Module):
        def forward(self, x):
            return torch.amax(x, dim=tuple(range(2, x.dim())), keepdim=True)

    class SpaceToDepth(torch.nn.Module):
        """ONNX SpaceToDepth: ``[N, C, H, W] -> [N, C*b*b, H/b, W/b]``, the output channel
        ``(i * b + j) * C + c`` taking row ``i``, column ``j`` of each ``b x b`` block."""

        def __init__(self, block):
            super().__init__()
            self.block = block

        def forward(self, x):
            n, c, h, w = x.shape
            b = self.block
            y = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
            return y.reshape(n, c * b * b, h // b, w // b)

    _register("GlobalMaxPool", 1, lambda node, graph: _module_result(GlobalMaxPool(), node))
    for version in (1, 13):
        _register(
            "SpaceToDepth",
            version,
            lambda node, graph: _module_result(SpaceToDepth(node.attributes["blocksize"]), node),
        )


def _reduce18(node, graph):
    """An opset-18 reduction (axes as a constant input) as onnx2torch's static-axes module."""
    import torch
    from onnx2torch.node_converters.reduce import OnnxReduceStaticAxes
    from onnx2torch.utils.common import OnnxMapping, OperationConverterResult, get_const_value

    keepdims = node.attributes.get("keepdims", 1)
    axes = None
    if len(node.input_values) > 1 and node.input_values[1]:
        try:
            axes = [int(a) for a in get_const_value(node.input_values[1], graph).reshape(-1)]
        except KeyError as exc:
            raise NotImplementedError(f"{node.operation_type}: axes computed in the graph") from exc
    if not axes and node.attributes.get("noop_with_empty_axes", 0):
        module = torch.nn.Identity()
    else:
        module = OnnxReduceStaticAxes(node.operation_type, axes or None, keepdims)
    mapping = OnnxMapping(inputs=(node.input_values[0],), outputs=node.output_values)
    return OperationConverterResult(module, mapping)


def _alias(op, version, older, refuse):
    """``op`` at ``version`` converted as at ``older`` unless ``refuse(node)`` says why not."""
    from onnx2torch.node_converters import get_converter

    def convert(node, graph):
        reason = refuse(node)
        if reason:
            raise NotImplementedError(f"{op} {reason}")
        return get_converter(operation_type=op, version=older)(node, graph)

    _register(op, version, convert)


def _pad_refuse(node):
    return "with axes" if len(node.input_values) > 3 and node.input_values[3] else None


def _resize_refuse(node):
    attrs = node.attributes
    if attrs.get("antialias", 0) or attrs.get("axes") is not None:
        return "with antialias or axes"
    if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        return f"keep_aspect_ratio_policy {attrs['keep_aspect_ratio_policy']}"
    return None


def add_converters(onnx2torch):
    """Register, with onnx2torch's own ``add_converter``, converters for common ops it lacks,
    built from its modules: GlobalMaxPool, SpaceToDepth, the opset-18 reductions (axes as a
    constant input), and Pad 18/19/21, Resize 18/19, Split 18 where they mean what the older
    versions do. ``onnx2torch`` is the imported package (:func:`import_onnx2torch`)."""
    _register_modules()
    for op in _REDUCE_OPS:
        _register(op, 18, _reduce18)
    for version in (18, 19, 21):
        _alias("Pad", version, 13, _pad_refuse)
    for version in (18, 19):
        _alias("Resize", version, 13, _resize_refuse)
    _alias("Split", 18, 13, lambda node: None)


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
