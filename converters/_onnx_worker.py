"""Child script: ONNX -> .tflite with onnx2tf, and the ONNX Runtime float32 reference.

Runs as a plain script (``python _onnx_worker.py JOB.json``) in the environment that has
onnx2tf, whose pins (numpy 1.26, TensorFlow 2.19, ai-edge-litert 2.1) clash with tflkit's: it
imports nothing from tflkit but :mod:`tflkit.proc.result_file` (standard library only).
``job["step"]`` is ``prepare`` (the preparation pass of ``_onnx_prepare.py``: writes
``prepared.onnx``), ``convert`` (the prepared model to ``model.tflite``) or ``reference`` (reads
``feeds.npz`` in the .tflite's layout, runs the user's model, writes ``outputs.npz``).
"""

import contextlib
import io
import json
import os
import re
import sys
import time
from pathlib import Path

# Run as a script, this folder is sys.path[0]; its onnx.py / torch.py would shadow the packages.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

import numpy as np  # noqa: E402

# tflkit's root is on PYTHONPATH (child_env); result_file needs nothing but the standard library
from tflkit.proc.result_file import RESULT_FILE, load_sibling, write_result  # noqa: E402

_PREPARE = load_sibling(__file__, "_onnx_prepare")

# onnx2tf fetches this sample from the network for its own self-check unless it is in the cwd.
_SAMPLE = "calibration_image_sample_data_20x128x128x3_float32.npy"


def prepare(job, state):
    """The preparation pass (``_onnx_prepare``): writes ``prepared.onnx``, reports each step."""
    steps = state.setdefault("preparation", [])
    target = Path(job["workdir"]) / "prepared.onnx"
    shapes, source, state["branch_inputs"] = _PREPARE.prepare(
        job["source"], target, job["options"], steps.append
    )
    state["inputs"] = [
        {"name": n, "source_shape": source[n], "onnx_shape": shapes[n]} for n in shapes
    ]
    state["prepared"] = str(target)
    import onnx

    prepared = onnx.load(str(target), load_external_data=False)
    graph = prepared.graph
    state["outputs"] = [o.name for o in graph.output]
    # what each route lacks, known before its converter starts (onnx2tf: before TensorFlow
    # imports; onnx2torch: before its 2 GB environment is built)
    state["lacking"] = {
        "onnx2tf": _lacking(unsupported_ops(prepared, _onnx2tf_ops()), _onnx2tf_label(), True),
        "onnx2torch": _lacking(unsupported_ops(prepared, _onnx2torch_ops()), "onnx2torch", False),
    }
    types = {i.name: i.type.tensor_type.elem_type for i in graph.input}
    for entry in state["inputs"]:
        elem = types.get(entry["name"])
        if elem:
            entry["onnx_dtype"] = str(onnx.helper.tensor_dtype_to_np_dtype(elem))


#: Ops a recurrent initial state passes through on its way from a graph input to its RNN.
_STATE_PATH = {"Slice", "Split", "Gather", "Squeeze", "Unsqueeze", "Reshape", "Identity"}
_RNN_STATE_SLOTS = {"GRU": (5,), "LSTM": (5, 6), "RNN": (5,)}


def channels_last_inputs(model):
    """Inputs the graph itself moves channels-first (each read by a Transpose with perm
    ``[0, R-1, 1, ..., R-2]`` only): already channels-last, so onnx2tf must not permute them
    (it would, and SpaceToDepth on the permuted data then fails: measured)."""
    init = {i.name for i in model.graph.initializer}
    readers = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    found = []
    for inp in model.graph.input:
        rank = len(inp.type.tensor_type.shape.dim)
        if inp.name in init or rank < 3:
            continue
        perm = [0, rank - 1, *range(1, rank - 1)]
        nodes = readers.get(inp.name, [])
        if nodes and all(n.op_type == "Transpose" and _perm(n) == perm for n in nodes):
            found.append(inp.name)
    return found


def _perm(node):
    return next((list(a.ints) for a in node.attribute if a.name == "perm"), None)


def recurrent_state_inputs(model):
    """Graph inputs that feed a GRU/LSTM/RNN initial state (through slicing and reshaping).

    onnx2tf takes a rank-3 input for channels-first and transposes it; an initial state
    ``[directions, batch, hidden]`` transposed no longer fits the cell (speechmos's AECMOS GRU
    model failed so), so these inputs keep their shape (``keep_shape_absolutely_input_names``).
    """
    readers = {}
    for node in model.graph.node:
        for slot, name in enumerate(node.input):
            readers.setdefault(name, []).append((node, slot))
    init = {i.name for i in model.graph.initializer}
    found = []
    for inp in model.graph.input:
        todo, seen = [inp.name], set()
        while todo and inp.name not in found:
            for node, slot in readers.get(todo.pop(), []):
                if slot in _RNN_STATE_SLOTS.get(node.op_type, ()):
                    found.append(inp.name)
                    break
                if node.op_type in _STATE_PATH and slot == 0 and node.name not in seen:
                    seen.add(node.name)
                    todo.extend(node.output)
    return [n for n in found if n not in init]


def _onnx2tf_ops():
    """The op types onnx2tf has a converter for: its ``onnx2tf/ops/*.py`` modules (it imports
    ``onnx2tf.ops.<op_type>`` for each node, whatever the node's domain). Listed from the
    package's folder, not imported: importing onnx2tf imports TensorFlow (seconds)."""
    import importlib.util
    import pkgutil

    spec = importlib.util.find_spec("onnx2tf")  # a top-level spec does not run the package
    roots = list(spec.submodule_search_locations or []) if spec else []
    paths = [str(Path(root) / "ops") for root in roots]
    return {m.name for m in pkgutil.iter_modules(paths) if not m.name.startswith("_")}


def _lacking(missing, converter, built):
    """What a route lacks, for the parent's one line (None when it lacks nothing): the ops, the
    converter and the message; ``built`` whether the route's environment is (onnx2torch's is
    not built yet: its message says so and gives no advice)."""
    if not missing:
        return None
    if built:
        message, advice = _unsupported_message(missing, converter), unsupported_advice(missing)
    else:
        names = "; ".join(f"{domain} {op} ({count} node{'s' * (count > 1)})"
                          for domain, op, _opset, count in missing)  # fmt: skip
        it = "it" if len(missing) == 1 else "them"
        message = f"{names}: {converter} has no converter for {it} (its environment was not built)"
        advice = None
    return {"ops": missing, "converter": converter, "advice": advice, "message": message}


def _onnx2tf_label():
    from importlib.metadata import version

    return f"onnx2tf {version('onnx2tf')}"


def _onnx2torch_ops():
    """The op types the onnx2torch route converts (``onnx2torch_ops.json`` beside this file,
    written by ``bench/onnx2torch_ops.py`` from the route's converter registry)."""
    table = json.loads(Path(__file__).with_name("onnx2torch_ops.json").read_text())
    return {op for names in table["ops"].values() for op in names}


def unsupported_ops(model, known):
    """``[(domain, op_type, opset, nodes)]`` for the node types onnx2tf cannot convert, in graph
    order (ops the model defines as local functions are left to onnx2tf)."""
    opsets = {(o.domain or "ai.onnx"): o.version for o in model.opset_import}
    local = {(f.domain, f.name) for f in model.functions}
    found = {}
    for node in _PREPARE.nodes(model.graph):
        if node.op_type in known or (node.domain, node.op_type) in local:
            continue
        domain = node.domain or "ai.onnx"
        key = (domain, node.op_type, opsets.get(domain))
        found[key] = found.get(key, 0) + 1
    return [(*key, count) for key, count in found.items()]


def unsupported_advice(missing):
    """What the user can do about ops a converter lacks (``missing`` as from unsupported_ops)."""
    foreign = sorted({d for d, *_ in missing if d not in ("ai.onnx", "ai.onnx.ml")})
    if foreign:
        return (
            f"{', '.join(foreign)} ops are ONNX Runtime's (or an exporter's) own, written by its "
            "quantization or graph optimizer: export the model again with standard ONNX ops "
            "(no ONNX Runtime quantization or fusion; quantize the .tflite instead)"
        )
    return (
        "export the model without it (or with a standard op that computes the same), with "
        "another opset, or pin the inputs with --input-shape so the exporter folds it away"
    )


def _unsupported_message(missing, converter):
    """One line naming each op onnx2tf lacks (domain, opset) and what the user can do."""
    names = []
    for domain, op_type, opset, count in missing:
        where = f"opset {opset}" if opset is not None else "no opset imported"
        names.append(f"{domain} {op_type} ({where}{f', {count} nodes' if count > 1 else ''})")
    it = "it" if len(missing) == 1 else "them"
    advice = unsupported_advice(missing)
    return f"{'; '.join(names)}: {converter} has no converter for {it}; {advice}"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FAILED_NODE = re.compile(r"onnx_op_name: (\S+)")


class _Tee(io.TextIOBase):
    """Writes through to ``out`` and keeps what went by (onnx2tf prints its errors' context)."""

    def __init__(self, out):
        super().__init__()
        self.out, self.seen = out, []

    def write(self, text):
        self.seen.append(text)
        del self.seen[:-400]
        return self.out.write(text)

    def flush(self):
        self.out.flush()


class Onnx2tfExit(Exception):
    """onnx2tf called ``sys.exit`` (it does so for an op or attribute it refuses); the text is
    its own reason, when it printed one."""


#: onnx2tf's ERROR lines that follow every failure, whatever the cause (hints and context).
_GENERIC = (
    "The trace log is below",
    "input_onnx_file_path:",
    "onnx_op_name:",
    "Read this and deal with it",
    "Alternatively, if the input OP",
    "If the input OP of ONNX",
    "Also, for models that include",
)


def _refusal(printed):
    """onnx2tf's own reason for refusing a node: its first ``ERROR:`` line that is not one of the
    hints it prints after every failure, with the detail line below it (``graph_node.name: ...
    reduction: add``); empty when it printed none."""
    lines = [ln.strip() for ln in printed.splitlines()]
    for k, line in enumerate(lines):
        text = line.removeprefix("ERROR:").strip()
        if line.startswith("ERROR:") and text and not text.startswith(_GENERIC):
            text = text.replace(" Pull requests are welcome.", "").rstrip(".")
            detail = lines[k + 1] if k + 1 < len(lines) else ""
            if detail and not detail.startswith(("ERROR:", "Traceback", "WARNING:")):
                detail = re.sub(r"^graph_node\.name: \S+\s*", "", detail)  # named apart
                text += f" ({detail})" if detail else ""
            return text[:400]
    return ""


def _op_type_of(model, name):
    """The op type of the node ``name`` (subgraphs too), or None."""
    return next((n.op_type for n in _PREPARE.nodes(model.graph) if n.name == name), None)


def _own_scripts_on_path():
    """Put this environment's ``bin`` first on PATH: onnx2tf runs ``onnxsim`` as a command, and
    without it on PATH it skips the simplification (constant folding of shape arithmetic) with a
    warning; magika 0.5.1's tf2onnx model then fails in a MatMul, and converts with it."""
    scripts = str(Path(sys.executable).parent)
    os.environ["PATH"] = os.pathsep.join([scripts, os.environ.get("PATH", "")])


def convert(job, state):
    from importlib.metadata import version

    import onnx
    import onnx2tf

    _own_scripts_on_path()

    state["versions"] = {"onnx2tf": version("onnx2tf"), "tensorflow": version("tensorflow")}
    state["converter"] = f"onnx2tf {version('onnx2tf')}"
    work = Path(job["workdir"])
    # prepared (static shapes); the ops onnx2tf lacks were found by ``prepare``
    model = onnx.load(job["source"], load_external_data=False)
    init = {i.name for i in model.graph.initializer}
    shapes = {
        i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
        for i in model.graph.input
        if i.name not in init
    }
    np.save(
        work / _SAMPLE, np.random.default_rng(0).uniform(0, 1, (20, 128, 128, 3)).astype(np.float32)
    )
    start = time.perf_counter()
    # onnx2tf writes its simplified model back to the file it is given: it gets a copy
    static = str(work / "onnx2tf_input.onnx")
    onnx.save(onnx.load(job["source"]), static)
    keep = recurrent_state_inputs(model)
    state["kept_layout"] = keep
    nhwc = channels_last_inputs(model)
    state["channels_last_inputs"] = nhwc
    arguments = {
        "input_onnx_file_path": static,
        "output_folder_path": str(work / "onnx2tf"),
        "overwrite_input_shape": [f"{n}:{','.join(map(str, s))}" for n, s in shapes.items()],
        # Unrolled LSTM/GRU/RNN loops become builtin ops; rolled ones stay TensorList flex
        # ops, which never run on the GPU (measured on openWakeWord's LSTM model).
        "enable_rnn_unroll": True,
        "keep_shape_absolutely_input_names": keep or None,
        "non_verbose": True,
        # an input the graph moves to channels-first itself stays channels-last
        "keep_nwc_or_nhwc_or_ndhwc_input_names": nhwc or None,
        **_user_options(onnx2tf, job["options"].get("converter_options") or {}),
    }
    tee = _Tee(sys.stdout)
    try:
        with contextlib.redirect_stdout(tee):
            onnx2tf.convert(**arguments)
    except (Exception, SystemExit) as exc:
        # onnx2tf prints the ONNX node it failed on ("onnx_op_name: conv2d_5") and, for an op
        # it refuses, its reason, then calls sys.exit(1): both are read from what it printed
        printed = _ANSI.sub("", "".join(tee.seen))
        named = _FAILED_NODE.findall(printed)
        if named:
            state["failed_node"] = named[-1]
            state["failed_op"] = _op_type_of(model, named[-1])
        if isinstance(exc, SystemExit):
            raise Onnx2tfExit(_refusal(printed)) from None
        raise
    state["convert_seconds"] = time.perf_counter() - start
    (found,) = sorted((work / "onnx2tf").glob("*_float32.tflite"))
    os.replace(found, work / "model.tflite")


#: Arguments tflkit sets itself (paths, the static shapes it prepared).
_OWN_ARGUMENTS = {"input_onnx_file_path", "output_folder_path", "onnx_graph"}


def _user_options(onnx2tf, given):
    """``--converter-option`` values checked against ``onnx2tf.convert``'s parameters; a list
    option given one value gets a one-item list."""
    import inspect

    params = inspect.signature(onnx2tf.convert).parameters
    unknown = sorted(set(given) - set(params) | (set(given) & _OWN_ARGUMENTS))
    if unknown:
        import difflib

        hints = [difflib.get_close_matches(n, list(params), 1) for n in unknown]
        near = "; ".join(
            f"{n}: did you mean {h[0]}?" for n, h in zip(unknown, hints, strict=True) if h
        )
        raise ValueError(
            f"usage: --converter-option {', '.join(unknown)}: not an onnx2tf option"
            + (f" ({near})" if near else "")
        )
    out = {}
    for name, value in given.items():
        default = params[name].default
        listed = isinstance(default, list) or name.endswith(("_names", "_list", "_shape"))
        out[name] = [value] if listed and not isinstance(value, list) else value
    return out


def _fits(shape, want):
    return len(shape) == len(want) and all(
        not isinstance(w, int) or w == d for d, w in zip(shape, want, strict=True)
    )


def to_onnx_layout(value, want):
    """A ``.tflite`` feed in the ONNX input's layout: onnx2tf makes channels-first inputs of rank
    3 and more channels-last (NWC, NHWC), so move the last axis back to 1 when only that fits."""
    if value.ndim < 3 or _fits(value.shape, want):
        return value
    moved = np.moveaxis(value, -1, 1)
    return moved if _fits(moved.shape, want) else value


#: ONNX Runtime's input types -> numpy: a converter may narrow int64 ids to int32 (litert-torch
#: does), the reference gets the type the ONNX model declares.
_ORT_TYPES = {
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
}


def reference(job, state):
    """ONNX Runtime on the user's model (not the prepared one): the feeds, and the pinned
    inputs' values."""
    import onnx
    import onnxruntime as ort

    work = Path(job["workdir"])
    pins = job["options"].get("input_values") or {}
    declared = onnx.load(job["source"], load_external_data=False).graph.input
    pinned = {i.name: _PREPARE.pinned_array(i, pins[i.name]) for i in declared if i.name in pins}
    session = ort.InferenceSession(job["source"], providers=["CPUExecutionProvider"])
    inputs = [spec for spec in session.get_inputs() if spec.name not in pinned]
    state["versions"] = {"onnxruntime": ort.__version__}
    state["framework"] = f"onnxruntime {ort.__version__}"
    arrays = {}
    with np.load(work / "feeds.npz") as npz:
        sets = int(npz["sets"])
        # The .tflite's signature orders its inputs by name, not as the ONNX graph does.
        names = [str(n) for n in npz["names"]]
        by_name = all(spec.name in names for spec in inputs)
        for k in range(sets):
            feed = dict(pinned)
            for i, spec in enumerate(inputs):
                j = names.index(spec.name) if by_name else i
                value = to_onnx_layout(npz[f"s{k}_in_{j}"], spec.shape)
                feed[spec.name] = value.astype(_ORT_TYPES.get(spec.type, value.dtype))
            for j, out in enumerate(session.run(None, feed)):
                arrays[f"s{k}_out_{j}"] = np.asarray(out, np.float32)
    state["output_names"] = [o.name for o in session.get_outputs()]
    np.savez(work / "outputs.npz", **arrays)


def _named(exc):
    """A one-line error with its type where the text alone says nothing (``KeyError: 'pads'``)."""
    text = str(exc).strip()
    if text.startswith("usage: "):
        return text.removeprefix("usage: ")
    return f"{type(exc).__name__}: {text}" if isinstance(exc, LookupError) or not text else text


def _one_line(exc):
    """The line of a multi-line error that names it (TensorFlow wraps the cause in a trace)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    named = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception): ", ln)]
    return (named[-1] if named else f"{type(exc).__name__}: {lines[0]}")[:500]


_NO_MODULE = re.compile(r"No module named 'onnx2tf\.ops\.(\w+)'")
_NEGATIVE_DIM = re.compile(r"Dimension -1 must be >= 0")
_KERAS_LAYER = re.compile(r"Exception encountered when calling layer [\"']([^\"']+)[\"']")
_ERROR_LINE = re.compile(r"^[\w.]*(Error|Exception)\b:? ")
_TF_NODE = re.compile(r" for '\{\{node .*?\}\}.*?\)'")
_SHAPE_CLASH = re.compile(r"not a multiple|must be equal|[Ii]ncompatible shapes|Depth of")


def _cause(lines):
    """The line of TensorFlow's text after its wrapper line that says what went wrong: the last
    ``...Error: ...`` line (a traced function's "in user code:" and its File lines say nothing),
    else the first line that is not a File or wrapper line."""
    named = [ln for ln in lines if _ERROR_LINE.match(ln)]
    noise = ("File ", "in user code", "Call arguments", "•", "Exception encountered")
    plain = [ln for ln in lines if not ln.startswith(noise)]
    found = named[-1] if named else (plain[0] if plain else "no cause given")
    return _TF_NODE.sub("", found).rstrip(".")


def _explained(exc, state):
    """One line for onnx2tf failures whose own text names no cause the user can act on (None
    for the others)."""
    text = str(exc)
    converter = state.get("converter", "onnx2tf")
    if isinstance(exc, Onnx2tfExit):  # its own reason for the node it refused
        node, op = state.get("failed_node"), state.get("failed_op")
        where = f" at ONNX node {node}" + (f" ({op})" if op else "") if node else ""
        return f"{converter} refused the model{where}: {text or 'it printed no reason'}"
    found = _NO_MODULE.search(text)
    if found:  # an op the pre-check did not see (e.g. one onnxsim wrote)
        return (
            f"{found.group(1)}: {converter} has no converter for this op; export the model "
            "with standard ONNX ops (another opset, or without it)"
        )
    layer = _KERAS_LAYER.search(text)
    if layer:  # TensorFlow's wrapper line first, the cause in the next one
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        cause = _cause(lines[1:])
        node = state.get("failed_node")
        where = f"ONNX node {node} ({layer.group(1)})" if node else layer.group(1)
        line = f"{converter} failed at {where}: {cause}"
        if _SHAPE_CLASH.search(cause):
            line += (
                "; onnx2tf moves channels last and guesses each tensor's layout, and a model "
                "whose tensors are channels-last already (exported from Keras/TensorFlow) often "
                "breaks so: convert the Keras or SavedModel source with tflkit instead, or export "
                "the ONNX model channels-first"
            )
        return line[:700]
    if _NEGATIVE_DIM.search(text):
        shapes = state.get("inputs", [])
        dynamic = [i for i in shapes if any(d is None for d in i.get("source_shape") or [])]
        named = ", ".join(
            f"{i['name']} {'x'.join('?' if d is None else str(d) for d in i['source_shape'])}"
            + (
                f" (converted as {'x'.join(map(str, i['onnx_shape']))})"
                if i.get("onnx_shape")
                else ""
            )
            for i in dynamic or shapes
        )
        return (
            f"{converter} kept an unknown (-1) dimension inside the graph (ValueError: Dimension "
            f"-1 must be >= 0): pin the dynamic inputs with --input-shape NAME=D1,D2,... (ONNX "
            f"layout) at the shape the app feeds: {named or 'no inputs'}"
        )
    return None


def main():
    job = json.loads(Path(sys.argv[1]).read_text())
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    state = {"stage": job["step"]}
    try:
        {"prepare": prepare, "convert": convert, "reference": reference}[job["step"]](job, state)
        state["stage"] = "done"
    except Exception as exc:
        text = str(exc)
        explained = _explained(exc, state) if job["step"] == "convert" else None
        if explained:
            state.update(error=explained, error_kind="unsupported")
        else:
            state.update(
                error=_one_line(exc) if "\n" in text else _named(exc),
                error_kind="usage" if text.startswith("usage: ") else job["step"],
            )
    write_result(Path(job["workdir"]) / RESULT_FILE, state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
