"""Differential test of the IR reader: tflkit's hand-written table reader against the schema's
generated object API, field by field, on every corpus model and on its round trip through
LiteRT's own ``flatbuffer_utils`` writer (which renumbers buffers, drops empty ones and leaves
the deprecated ``metadata_buffer`` stale), and, for models up to 5 MB, in two more layouts:
every default written explicitly, and buffer data after the flatbuffer named by offset/size
(the converter's large-model layout). Then ``ir.dumps`` of each must load in LiteRT.

Both sides become the plain values of ``tests.ir_compare.normalize`` (buffer and opcode indices
resolved to bytes and ``(builtin, custom, version)``); the tflkit side is built from the IR
objects, never from ``ir.dumps``, so a misread field cannot hide behind a symmetric writer bug.
What the IR reads straight from the file without the object API (option fields, quantization
scale counts) is checked against the object API too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as fb
from ai_edge_litert.interpreter import Interpreter
from ai_edge_litert.tools import flatbuffer_utils

from tests.conftest_corpus import Corpus
from tests.corpus import generate
from tests.corpus.features import CPU_FAILURES
from tests.corpus.fetch import world_names
from tests.ir_compare import _Blob, _plain, format_diff, normalize
from tests.ir_compare import _walk as walk
from tflkit import ir

MODELS = [f"generated/{name}" for name in generate.GENERATORS] + world_names()


def _blob(buffer: ir.Buffer | None) -> _Blob | None:
    if buffer is None or buffer.nbytes == 0:
        return None
    return _Blob(buffer.tobytes())


def _indices(tensors: Any, positions: dict[int, int]) -> tuple[int, ...]:
    return tuple(-1 if t is None else positions[id(t)] for t in tensors)


def _ir_tensor(tensor: ir.Tensor) -> dict[str, Any]:
    return {
        "name": tensor.name,
        "shape": tensor.shape,
        "shape_signature": tensor.shape_signature,
        "type": tensor.type,
        "buffer": _blob(tensor.buffer),
        "quantization": _plain(tensor.quantization),
        "sparsity": _plain(tensor.sparsity),
        "is_variable": tensor.is_variable,
        "has_rank": tensor.has_rank,
        "variant_tensors": _plain(tensor.variant_tensors),
        "external_buffer": tensor.external_buffer,
    }


def _ir_op(op: ir.Op, positions: dict[int, int]) -> dict[str, Any]:
    code = op.opcode
    return {
        "opcode": (code.builtin_code, code.custom_code, code.version),
        "inputs": _indices(op.inputs, positions),
        "outputs": _indices(op.outputs, positions),
        "builtin_options_type": op.options_type,
        "builtin_options": _plain(op.options),
        "builtin_options2_type": op.options2_type,
        "builtin_options2": _plain(op.options2),
        "custom_options": None if op.custom_options is None else _Blob(bytes(op.custom_options)),
        "custom_options_format": op.custom_options_format,
        "mutating_variable_inputs": _plain(op.mutating_variable_inputs),
        "intermediates": _indices(op.intermediates, positions),
        "debug_metadata_index": op.debug_metadata_index,
    }


def _ir_subgraph(subgraph: ir.Subgraph) -> dict[str, Any]:
    positions = {id(t): i for i, t in enumerate(subgraph.tensors)}
    return {
        "name": subgraph.name or None,
        "inputs": _indices(subgraph.inputs, positions),
        "outputs": _indices(subgraph.outputs, positions),
        "tensors": [_ir_tensor(t) for t in subgraph.tensors],
        "operators": [_ir_op(op, positions) for op in subgraph.ops],
        "debug_metadata_index": subgraph.debug_metadata_index,
    }


def _ir_signature(signature: ir.SignatureDef, model: ir.Model) -> dict[str, Any]:
    subgraph = signature.subgraph
    positions = {id(t): i for i, t in enumerate(subgraph.tensors)}

    def entries(mapping: dict[str, ir.Tensor]) -> tuple[tuple[str, int], ...]:
        return tuple((name, positions[id(t)]) for name, t in mapping.items())

    return {
        "key": signature.key,
        "subgraph_index": model.subgraphs.index(subgraph),
        "inputs": entries(signature.inputs),
        "outputs": entries(signature.outputs),
    }


def ir_normal(model: ir.Model) -> dict[str, Any]:
    """The IR as the plain values ``tests.ir_compare.normalize`` gives for a file."""
    referenced = {id(t.buffer) for sg in model.subgraphs for t in sg.tensors if t.buffer}
    referenced.update(id(m.buffer) for m in model.metadata)
    referenced.update(id(b) for b in model.metadata_buffer or ())
    unreferenced = [
        _Blob(b.tobytes()) for b in model.buffers if b.nbytes and id(b) not in referenced
    ]
    return {
        "version": model.version,
        "description": model.description,
        "subgraphs": [_ir_subgraph(sg) for sg in model.subgraphs],
        "signatures": [_ir_signature(s, model) for s in model.signatures],
        "metadata": [(m.name, _blob(m.buffer)) for m in model.metadata],
        "metadata_buffer": (
            None if model.metadata_buffer is None else [_blob(b) for b in model.metadata_buffer]
        ),
        "external_buffer_groups": _plain(model.external_buffer_groups),
        "external_buffers": _plain(model.external_buffers),
        "unreferenced_buffers": sorted(unreferenced, key=lambda b: (len(b.data), b.data)),
    }


def file_normal(data: bytes) -> dict[str, Any]:
    """``normalize(data)``, except that stale ``metadata_buffer`` entries (naming no buffer:
    deprecated, ignored by LiteRT, left behind by flatbuffer_utils) are dropped, as the IR does."""
    normal = normalize(data)
    entries = normal["metadata_buffer"]
    if entries is not None:
        normal["metadata_buffer"] = [
            e for e in entries if e is None or not e.data.startswith(b"<out-of-range buffer")
        ]
    return normal


def _opcode_table(data: bytes) -> list[tuple[int, int, str | None, int]]:
    root = fb.Model.GetRootAs(data, 0)
    table = []
    for i in range(root.OperatorCodesLength()):
        code = root.OperatorCodes(i)
        custom = code.CustomCode()
        table.append(
            (
                code.BuiltinCode(),
                code.DeprecatedBuiltinCode(),
                None if custom is None else custom.decode(),
                code.Version(),
            )
        )
    return table


def _lists(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


def _assert_lazy_reads_agree(data: bytes, label: str) -> None:
    """What a loaded model reads without the object API (``Op.option_fields``,
    ``Tensor.scale_count``, read before anything decodes a table) against the object API."""
    lazy = ir.load(data, label=label)
    fields = [op.option_fields for op in lazy.iter_ops()]
    counts = [t.scale_count for sg in lazy.subgraphs for t in sg.tensors]
    decoded = ir.load(data, label=label)
    for op, got in zip(decoded.iter_ops(), fields, strict=True):
        expected: dict[str, Any] = {}
        for table in (op.options2, op.options):
            if table is not None:
                expected.update((k, _lists(v)) for k, v in vars(table).items())
        assert {k: _lists(v) for k, v in got.items()} == expected, f"{label}: {op!r} options"
    expected_counts = [
        0 if t.quantization is None or t.quantization.scale is None else len(t.quantization.scale)
        for sg in decoded.subgraphs
        for t in sg.tensors
    ]
    assert counts == expected_counts, f"{label}: quantization scale counts"


def _assert_same(data: bytes, label: str) -> ir.Model:
    _assert_lazy_reads_agree(data, label)
    model = ir.load(data, label=label)
    diff: list[str] = []
    walk(file_normal(data), ir_normal(model), "model", diff)
    assert not diff, f"{label}: tflkit's reader disagrees with the object API:\n{format_diff(diff)}"
    # The opcode table itself, deprecated_builtin_code included: the IR keeps each distinct
    # opcode once, with the builtin code the schema defines (the larger of the two fields).
    table = _opcode_table(data)
    expected = list(dict.fromkeys((max(b, d), c, v) for b, d, c, v in table))
    got = [(c.builtin_code, c.custom_code, c.version) for c in model.opcode_order]
    assert got == expected, f"{label}: opcode table {got} != {expected}"
    placeholder = fb.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES
    for builtin, deprecated, _custom, _version in _opcode_table(ir.dumps(model)):
        assert deprecated == min(builtin, placeholder), f"{label}: deprecated_builtin_code"
    return model


def _litert_error(data: bytes) -> str | None:
    try:
        Interpreter(model_content=data).allocate_tensors()
    except (RuntimeError, ValueError) as exc:
        return re.sub(r"\s+", " ", str(exc))[:300]
    return None


@pytest.fixture(scope="module")
def model_bytes(request: pytest.FixtureRequest) -> Any:
    def get(name: str) -> bytes:
        if name.startswith("generated/"):
            corpus: Corpus = request.getfixturevalue("corpus")
            return corpus.path(name.removeprefix("generated/")).read_bytes()
        world: dict[str, Path] = request.getfixturevalue("world_models")
        return world[name].read_bytes()

    return get


def _pack(model: Any, force_defaults: bool = False) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.ForceDefaults(force_defaults)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _explicit_defaults(data: bytes) -> bytes:
    """The model re-packed with every scalar field written, defaults included."""
    return _pack(fb.ModelT.InitFromPackedBuf(data, 0), force_defaults=True)


def _data_after_flatbuffer(data: bytes) -> bytes:
    """The large-model layout: buffer bytes and custom options after the flatbuffer, named by
    offset/size (``Buffer.offset``, ``Operator.large_custom_options_offset``)."""
    model = fb.ModelT.InitFromPackedBuf(data, 0)
    moved: list[tuple[bytes, Callable[[int], None]]] = []

    def move_buffer(buffer: Any) -> None:
        blob = np.asarray(buffer.data, np.uint8).tobytes()
        buffer.data, buffer.offset, buffer.size = None, 1 << 40, len(blob)
        moved.append((blob, lambda at: setattr(buffer, "offset", at)))

    def move_options(op: Any) -> None:
        blob = np.asarray(op.customOptions, np.uint8).tobytes()
        op.customOptions, op.largeCustomOptionsOffset = None, 1 << 40
        op.largeCustomOptionsSize = len(blob)
        moved.append((blob, lambda at: setattr(op, "largeCustomOptionsOffset", at)))

    for buffer in model.buffers or []:
        if buffer.data is not None and len(buffer.data):
            move_buffer(buffer)
    for subgraph in model.subgraphs or []:
        for op in subgraph.operators or []:
            if op.customOptions is not None and len(op.customOptions):
                move_options(op)
    size = len(_pack(model))  # offsets are fixed-size fields: the final size is the same
    position, tail = size, []
    for blob, place in moved:
        pad = -position % ALIGNMENT
        tail += [b"\0" * pad, blob]
        place(position + pad)
        position += pad + len(blob)
    head = _pack(model)
    assert len(head) == size
    return head + b"".join(tail)


ALIGNMENT = 16
SMALL = 5_000_000  # bytes: the re-packed layouts are built for models up to this size


def _flatbuffer_utils_roundtrip(data: bytes, tmp_path: Path) -> bytes:
    model = flatbuffer_utils.read_model_from_bytearray(bytearray(data))
    out = tmp_path / "roundtrip.tflite"
    flatbuffer_utils.write_model(model, out)
    return out.read_bytes()


@pytest.mark.parametrize("name", MODELS)
def test_reader_agrees_with_object_api(name: str, model_bytes: Any, tmp_path: Path) -> None:
    data = model_bytes(name)
    if name.removeprefix("generated/") not in CPU_FAILURES:
        Interpreter(model_content=data)  # LiteRT reads the original
    # Allocating at the stored shape may fail (dynamic shapes): then it must fail the same way.
    expected_error = _litert_error(data)
    variants = [
        ("original", data),
        ("flatbuffer_utils", _flatbuffer_utils_roundtrip(data, tmp_path)),
    ]
    if len(data) <= SMALL:
        variants += [
            ("explicit defaults", _explicit_defaults(data)),
            ("data after the flatbuffer", _data_after_flatbuffer(data)),
        ]
    for variant, blob in variants:
        label = f"{name} ({variant})"
        assert _litert_error(blob) == expected_error, f"{label}: LiteRT loads it differently"
        model = _assert_same(blob, label)
        assert _litert_error(ir.dumps(model)) == expected_error, f"{label}: ir.dumps breaks it"


def test_stale_metadata_buffer_is_dropped() -> None:
    """The layout flatbuffer_utils leaves: metadata_buffer naming buffers that do not exist."""
    model_t = fb.ModelT()
    model_t.version = 3
    model_t.buffers = [fb.BufferT()]
    subgraph = fb.SubGraphT()
    tensor = fb.TensorT()
    tensor.shape, tensor.name = np.array([1], np.int32), b"x"
    subgraph.tensors, subgraph.inputs, subgraph.outputs, subgraph.operators = [tensor], [0], [0], []
    model_t.subgraphs = [subgraph]
    model_t.metadataBuffer = [0, 7]
    model = _assert_same(_pack(model_t), "stale metadata_buffer")
    assert model.metadata_buffer is not None and len(model.metadata_buffer) == 1
