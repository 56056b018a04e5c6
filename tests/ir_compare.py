"""Test helpers: compare two ``.tflite`` files structurally, and run a model on the CPU interpreter.

``structural_diff`` is deliberately independent of ``tflkit.ir``: it reads both files with the
flatbuffer object API of ``ai_edge_litert.schema_py_generated`` and compares plain values.
Normalisations (everything else must match exactly):

- buffer references become the referenced bytes; buffer 0 and any empty buffer become ``None``
  (the IR maps every reference to buffer 0 to "no buffer", and a per-tensor empty buffer means
  the same thing); data stored after the flatbuffer (``offset``/``size``) is read from the file;
- opcode indices become ``(builtin code, custom code, version)``, the builtin code being
  ``max(builtin_code, deprecated_builtin_code)`` as the schema defines it;
- unreferenced non-empty buffers are compared as a multiset of their bytes (order-free);
- op ``intermediates``: an absent vector equals an empty one (the runtime reads both as none).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from ai_edge_litert import schema_py_generated as fb
from ai_edge_litert.interpreter import Interpreter, OpResolverType

Diff = list[str]
_MAX_SHOWN = 8


# --------------------------------------------------------------------------------------------
# structural comparison
# --------------------------------------------------------------------------------------------
class _File:
    """One parsed file with its buffers resolved to bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.model = fb.ModelT.InitFromPackedBuf(self.data, 0)
        self.buffers: list[bytes | None] = [self._buffer_bytes(b) for b in self.model.buffers or []]
        self.referenced: set[int] = set()

    def _buffer_bytes(self, buffer: Any) -> bytes | None:
        if buffer.offset > 1:
            raw = self.data[buffer.offset : buffer.offset + buffer.size]
        elif buffer.data is None or isinstance(buffer.data, int):
            raw = b""
        else:
            raw = np.asarray(buffer.data, dtype=np.uint8).tobytes()
        return raw or None

    def buffer(self, index: int) -> bytes | None:
        self.referenced.add(index)
        if index == 0:
            return self.buffers[0] if self.buffers else None
        if not 0 <= index < len(self.buffers):
            return f"<out-of-range buffer {index}>".encode()
        return self.buffers[index]

    def opcode(self, index: int) -> tuple[int, str | None, int] | str:
        codes = self.model.operatorCodes or []
        if not 0 <= index < len(codes):
            return f"<out-of-range opcode {index}>"
        code = codes[index]
        custom = code.customCode.decode() if isinstance(code.customCode, bytes) else code.customCode
        return (max(code.builtinCode, code.deprecatedBuiltinCode), custom, code.version)


class _Blob:
    """Bytes shown by size and digest in messages, compared by content."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Blob) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.data)

    def __repr__(self) -> str:
        digest = hashlib.sha256(self.data).hexdigest()[:12]
        return f"<{len(self.data)} bytes sha256:{digest}>"


def _blob(data: bytes | None) -> _Blob | None:
    return None if data is None else _Blob(data)


def _plain(value: Any) -> Any:
    """Object-API values as plain comparable Python values (dicts, tuples, scalars)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return tuple(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list | tuple):
        return tuple(_plain(v) for v in value)
    if hasattr(value, "__dict__"):
        fields = {k: _plain(v) for k, v in sorted(vars(value).items())}
        return {"<type>": type(value).__name__, **fields}
    return value


def _tensor(file: _File, tensor: Any) -> dict[str, Any]:
    return {
        "name": _plain(tensor.name),
        "shape": _plain(tensor.shape) or (),
        "shape_signature": _plain(tensor.shapeSignature),
        "type": tensor.type,
        "buffer": _blob(file.buffer(tensor.buffer)),
        "quantization": _plain(tensor.quantization),
        "sparsity": _plain(tensor.sparsity),
        "is_variable": bool(tensor.isVariable),
        "has_rank": bool(tensor.hasRank),
        "variant_tensors": _plain(tensor.variantTensors),
        "external_buffer": tensor.externalBuffer,
    }


def _custom_options(file: _File, op: Any) -> _Blob | None:
    if op.largeCustomOptionsOffset > 1:
        start = op.largeCustomOptionsOffset
        return _Blob(file.data[start : start + op.largeCustomOptionsSize])
    if op.customOptions is None:
        return None
    return _Blob(np.asarray(op.customOptions, dtype=np.uint8).tobytes())


def _op(file: _File, op: Any) -> dict[str, Any]:
    return {
        "opcode": file.opcode(op.opcodeIndex),
        "inputs": _plain(op.inputs) or (),
        "outputs": _plain(op.outputs) or (),
        "builtin_options_type": op.builtinOptionsType,
        "builtin_options": _plain(op.builtinOptions),
        "builtin_options2_type": op.builtinOptions2Type,
        "builtin_options2": _plain(op.builtinOptions2),
        "custom_options": _custom_options(file, op),
        "custom_options_format": op.customOptionsFormat,
        "mutating_variable_inputs": _plain(op.mutatingVariableInputs),
        "intermediates": _plain(op.intermediates) or (),
        "debug_metadata_index": op.debugMetadataIndex,
    }


def _subgraph(file: _File, subgraph: Any) -> dict[str, Any]:
    return {
        "name": _plain(subgraph.name),
        "inputs": _plain(subgraph.inputs) or (),
        "outputs": _plain(subgraph.outputs) or (),
        "tensors": [_tensor(file, t) for t in subgraph.tensors or []],
        "operators": [_op(file, op) for op in subgraph.operators or []],
        "debug_metadata_index": subgraph.debugMetadataIndex,
    }


def _signature(signature: Any) -> dict[str, Any]:
    def entries(maps: Any) -> tuple[tuple[str, int], ...]:
        return tuple((_plain(m.name), m.tensorIndex) for m in maps or [])

    return {
        "key": _plain(signature.signatureKey),
        "subgraph_index": signature.subgraphIndex,
        "inputs": entries(signature.inputs),
        "outputs": entries(signature.outputs),
    }


def normalize(data: bytes) -> dict[str, Any]:
    """The model in ``data`` as plain values with buffer and opcode indices resolved."""
    file = _File(data)
    model = file.model
    normal = {
        "version": model.version,
        "description": _plain(model.description),
        "subgraphs": [_subgraph(file, sg) for sg in model.subgraphs or []],
        "signatures": [_signature(s) for s in model.signatureDefs or []],
        "metadata": [(_plain(m.name), _blob(file.buffer(m.buffer))) for m in model.metadata or []],
        "metadata_buffer": (
            None
            if model.metadataBuffer is None
            else [_blob(file.buffer(int(i))) for i in model.metadataBuffer]
        ),
        "external_buffer_groups": _plain(model.externalBufferGroups),
        "external_buffers": _plain(model.externalBuffers),
    }
    unreferenced = [
        _Blob(raw)
        for index, raw in enumerate(file.buffers)
        if raw is not None and index not in file.referenced
    ]
    normal["unreferenced_buffers"] = sorted(unreferenced, key=lambda b: (len(b.data), b.data))
    return normal


def _label(key: Any, value: Any) -> str:
    if isinstance(key, int) and isinstance(value, dict) and isinstance(value.get("name"), str):
        return f"[{key} {value['name']!r}]"
    if isinstance(key, int):
        return f"[{key}]"
    return f".{key}"


def _same_scalar(a: Any, b: Any) -> bool:
    if type(a) is not type(b) and not (
        isinstance(a, int | float)
        and isinstance(b, int | float)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        return False
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _walk(a: Any, b: Any, path: str, out: Diff) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in dict.fromkeys([*a, *b]):
            if key not in a or key not in b:
                out.append(f"{path}.{key}: present only in {'second' if key in b else 'first'}")
                continue
            _walk(a[key], b[key], path + _label(key, a[key]), out)
        return
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            out.append(f"{path}: length {len(a)} != {len(b)}")
            if any(isinstance(v, dict | list | tuple) for v in (*a, *b)):
                return
            out.append(f"{path}: {_short(a)} != {_short(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _walk(x, y, path + _label(i, x), out)
        return
    if not _same_scalar(a, b):
        out.append(f"{path}: {_short(a)} != {_short(b)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def structural_diff(first: bytes, second: bytes) -> Diff:
    """Readable differences between two ``.tflite`` byte strings; empty when equivalent."""
    out: Diff = []
    _walk(normalize(first), normalize(second), "model", out)
    return out


def format_diff(diff: Diff) -> str:
    shown = diff[:_MAX_SHOWN]
    more = f"\n... and {len(diff) - _MAX_SHOWN} more" if len(diff) > _MAX_SHOWN else ""
    return "\n".join(shown) + more


# --------------------------------------------------------------------------------------------
# running on the CPU interpreter
# --------------------------------------------------------------------------------------------
DYNAMIC_DIM = 2  # size given to each -1 dimension


def random_input(details: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    """A seeded random array matching an interpreter input's dtype and (signature) shape."""
    signature = details.get("shape_signature")
    dims = signature if signature is not None and len(signature) else details["shape"]
    shape = tuple(DYNAMIC_DIM if int(d) < 0 else int(d) for d in dims)
    dtype = np.dtype(details["dtype"])
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        low, high = max(info.min, -100), min(info.max, 100)
        if dtype.itemsize == 1:
            low, high = info.min, info.max
        return rng.integers(low, high, shape, endpoint=True).astype(dtype)
    if dtype.kind in "SOU":
        return np.array([f"s{i}".encode() for i in range(int(np.prod(shape)))]).reshape(shape)
    raise TypeError(f"no random input for dtype {dtype}")


def run_model(data: bytes, seed: int = 0) -> dict[str, np.ndarray]:
    """Outputs of every signature (or of the main subgraph when none) on seeded inputs.

    A fresh interpreter is made for each signature so state (variables) never leaks.
    """
    outputs: dict[str, np.ndarray] = {}
    keys = list(Interpreter(model_content=data).get_signature_list())
    for key in keys:
        rng = np.random.default_rng(seed)
        runner = Interpreter(model_content=data).get_signature_runner(key)
        details = runner.get_input_details()
        inputs = {name: random_input(details[name], rng) for name in sorted(details)}
        for name, value in runner(**inputs).items():
            outputs[f"{key}/{name}"] = np.array(value, copy=True)
    if not keys:
        outputs.update(run_main(data, seed))
    return outputs


def run_main(
    data: bytes,
    seed: int = 0,
    inputs: dict[str, np.ndarray] | None = None,
    preserve_all_tensors: bool = False,
    inspect: Callable[[Interpreter], None] | None = None,
) -> dict[str, np.ndarray]:
    """Outputs of the main subgraph, by output name; ``inputs`` by input name overrides random.

    With ``preserve_all_tensors`` every intermediate stays readable (for ``inspect``) and the
    default delegate (XNNPACK) is off, so a graph and any piece of it run the same kernels.
    """
    rng = np.random.default_rng(seed)
    options: dict[str, Any] = {}
    if preserve_all_tensors:
        options = {
            "experimental_preserve_all_tensors": True,
            "experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        }
    interpreter = Interpreter(model_content=data, **options)
    feeds = []
    for details in interpreter.get_input_details():
        given = (inputs or {}).get(details["name"])
        value = given if given is not None else random_input(details, rng)
        if tuple(value.shape) != tuple(details["shape"]):
            interpreter.resize_tensor_input(details["index"], value.shape)
        feeds.append((details["index"], value))
    interpreter.allocate_tensors()
    for index, value in feeds:
        interpreter.set_tensor(index, value)
    interpreter.invoke()
    if inspect is not None:
        inspect(interpreter)
    return {
        d["name"]: np.array(interpreter.get_tensor(d["index"]), copy=True)
        for d in interpreter.get_output_details()
    }


def output_mismatches(expected: dict[str, np.ndarray], actual: dict[str, np.ndarray]) -> list[str]:
    """Names of outputs that are not bit-identical (dtype, shape and bytes)."""
    problems = []
    if sorted(expected) != sorted(actual):
        problems.append(f"output names {sorted(expected)} != {sorted(actual)}")
    for name in sorted(set(expected) & set(actual)):
        a, b = expected[name], actual[name]
        if a.dtype != b.dtype or a.shape != b.shape:
            problems.append(f"{name}: {a.dtype}{list(a.shape)} != {b.dtype}{list(b.shape)}")
        elif a.dtype.kind in "OSU":
            if a.tolist() != b.tolist():
                problems.append(f"{name}: values differ")
        elif a.tobytes() != b.tobytes():
            problems.append(f"{name}: values differ (max abs {_max_abs(a, b)})")
    return problems


def _max_abs(a: np.ndarray, b: np.ndarray) -> float:
    if a.dtype.kind not in "fiu":
        return float("nan")
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))
