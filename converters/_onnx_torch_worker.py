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

Around onnx2torch 1.5.15 (all through public APIs; :mod:`_onnx_torch_ops`): torchvision is
replaced by a stand-in during its import only; models with ops it lacks are refused in one line
(:func:`unsupported_ops`) after an ``onnx.version_converter`` upgrade of old opsets was tried;
a few converters it lacks are registered with its ``add_converter`` (GlobalMaxPool, opset-18
reductions, Pad/Resize/Split 18+, SpaceToDepth); Clip with computed bounds becomes Max/Min in
the ONNX graph. Shape operands are frozen by :mod:`_onnx_torch_freeze`.

State fields written: ``converter``, ``versions``, ``inputs`` ([{name, source_shape,
onnx_shape}]), ``ops`` (ONNX op counts), ``opset_upgrade`` ([from, to], when done),
``rewritten_onnx``, ``warnings`` (onnx2torch's approximations), ``rewritten`` (frozen ops by
onnx2torch class), ``convert_seconds``; on failure ``error`` (one line) and ``error_kind``
(``unsupported``, ``usage`` or ``convert``).
"""

import json
import os
import re
import sys
import time
import warnings
from pathlib import Path

# Run as a script, this folder is sys.path[0]; its onnx.py / torch.py would shadow the packages.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

import numpy as np  # noqa: E402

# tflkit's root is on PYTHONPATH (child_env); result_file needs nothing but the standard library
from tflkit.proc.result_file import RESULT_FILE, load_sibling, write_result  # noqa: E402

_PREPARE = load_sibling(__file__, "_onnx_prepare")
_SHAPES = load_sibling(__file__, "_input_shapes")

_OPS = load_sibling(__file__, "_onnx_torch_ops")
_FREEZE = load_sibling(__file__, "_onnx_torch_freeze")
Unsupported = _OPS.Unsupported
_TORCHVISION_OPS = _OPS.TORCHVISION_OPS


# -- inputs -------------------------------------------------------------------------------------


def static_inputs(model, options):
    """Fix the inputs of ``model`` (in memory) to static shapes; ``[{"name", "source_shape",
    "onnx_shape"}]`` as the onnx2tf worker reports them."""
    given, fill = _SHAPES.given_shapes(options)
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
        shape = _SHAPES.filled(shape, fill)
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


def _unsupported_message(missing, converter, shapes_given=False):
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
    pin = (
        ""
        if shapes_given
        else ", or pin the inputs with --input-shape so the exporter folds it away"
    )
    return (
        f"{'; '.join(names)}: {converter} has no converter for {it}; export the model without "
        f"{it} (or with standard ops that compute the same) or with another opset{pin}"
    )


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

    onnx2torch = _OPS.import_onnx2torch()
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
    _OPS.add_converters(onnx2torch)
    model = onnx.load(job["source"])
    state["ops"] = _op_types(model)
    missing = unsupported_ops(model, get_converter)
    if missing:
        upgraded = _upgraded(model, get_converter)
        if upgraded is not None:
            model, before = upgraded, _default_opset(model)
            state["opset_upgrade"] = [before, _default_opset(upgraded)]
    state["rewritten_onnx"] = _OPS.standard_equivalents(model)
    missing = unsupported_ops(model, get_converter)
    if missing:
        state["unsupported"] = missing  # the parent names ops no route takes in one line
        given = bool((job.get("options") or {}).get("input_shapes"))
        raise Unsupported(_unsupported_message(missing, state["converter"], given))
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
        gm, state["rewritten"] = _FREEZE.freeze_shapes(gm, samples)
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
