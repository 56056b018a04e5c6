"""Bad input to ``ir.load`` gives one clear ``ModelLoadError``, never another exception type."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as fb

from tests.conftest_corpus import Corpus
from tflkit import ir
from tflkit.errors import ModelLoadError

REAL = "deeplabv3.tflite"
CORRUPT = r"truncated|corrupt"


def _real_bytes(real_models: list[Path]) -> bytes:
    path = next((p for p in real_models if p.name == REAL), None)
    assert path is not None, f"{REAL} missing from {[p.name for p in real_models]}"
    return path.read_bytes()


def _load_error(source: object) -> str:
    with pytest.raises(ModelLoadError) as info:
        ir.load(source)
    message = str(info.value)
    assert "\n" not in message.strip(), f"not one line: {message!r}"
    return message


# --------------------------------------------------------------------------------------------
# not a model at all
# --------------------------------------------------------------------------------------------
def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.tflite"
    message = _load_error(path)
    assert str(path) in message and "no such file" in message


def test_directory(tmp_path: Path) -> None:
    message = _load_error(tmp_path)
    assert str(tmp_path) in message and "directory" in message


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.tflite"
    path.write_bytes(b"")
    message = _load_error(path)
    assert str(path) in message and "empty" in message


def test_random_bytes(tmp_path: Path) -> None:
    path = tmp_path / "random.tflite"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    assert "not a TFLite model" in _load_error(path)


def test_text_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.tflite"
    path.write_text("this is a text file, not a model\n" * 20)
    assert "not a TFLite model" in _load_error(path)


def test_bytes_source_is_labelled() -> None:
    assert _load_error(b"\x00" * 3).startswith("<bytes>")


# --------------------------------------------------------------------------------------------
# a real model, damaged
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cut", [0.5, 0.9, 0.99, 0.999])
def test_truncated_real_model(real_models: list[Path], tmp_path: Path, cut: float) -> None:
    data = _real_bytes(real_models)
    path = tmp_path / "cut.tflite"
    path.write_bytes(data[: int(len(data) * cut)])
    message = _load_error(path)
    assert str(path) in message and "truncated" in message, message


@pytest.mark.parametrize("size", [4, 8, 12, 64])
def test_truncated_to_header(real_models: list[Path], size: int) -> None:
    message = _load_error(_real_bytes(real_models)[:size])
    assert ("truncated" in message) or ("not a TFLite model" in message), message


def test_corrupted_file_identifier(real_models: list[Path]) -> None:
    data = bytearray(_real_bytes(real_models))
    data[4:8] = b"TFL2"
    assert "no 'TFL3' file identifier" in _load_error(bytes(data))


def _version_offset(data: bytes) -> int:
    """Where the root table stores ``version`` (field 0)."""
    tab = fb.Model.GetRootAs(data, 0)._tab
    field = tab.Offset(4)
    assert field, "version is not stored"
    return tab.Pos + field


@pytest.mark.parametrize("version", [0, 2, 4, 1000])
def test_wrong_schema_version(real_models: list[Path], version: int) -> None:
    data = bytearray(_real_bytes(real_models))
    offset = _version_offset(bytes(data))
    assert struct.unpack_from("<I", data, offset)[0] == 3
    struct.pack_into("<I", data, offset, version)
    message = _load_error(bytes(data))
    assert f"unsupported TFLite schema version {version}" in message, message


# --------------------------------------------------------------------------------------------
# well-formed flatbuffers with bad indices (built with the schema object API)
# --------------------------------------------------------------------------------------------
def _pack(model_t: object) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model_t.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _editable(data: bytes) -> object:
    model_t = fb.ModelT.InitFromPackedBuf(data, 0)
    for sg in model_t.subgraphs:
        sg.inputs, sg.outputs = list(sg.inputs), list(sg.outputs)
        for op in sg.operators:
            op.inputs, op.outputs = list(op.inputs), list(op.outputs)
    return model_t


def _op_input(m: object) -> None:
    m.subgraphs[0].operators[0].inputs[0] = 999


def _negative_op_input(m: object) -> None:
    m.subgraphs[0].operators[0].inputs[0] = -7


def _op_output(m: object) -> None:
    m.subgraphs[0].operators[0].outputs[0] = 999


def _omitted_op_output(m: object) -> None:
    m.subgraphs[0].operators[0].outputs[0] = -1  # -1 means "omitted" for inputs only


def _graph_output(m: object) -> None:
    m.subgraphs[0].outputs[0] = 999


def _tensor_buffer(m: object) -> None:
    m.subgraphs[0].tensors[1].buffer = 999


def _opcode(m: object) -> None:
    m.subgraphs[0].operators[0].opcodeIndex = 99


def _signature_tensor(m: object) -> None:
    m.signatureDefs[0].outputs[0].tensorIndex = 999


def _signature_subgraph(m: object) -> None:
    m.signatureDefs[0].subgraphIndex = 5


def _metadata_buffer(m: object) -> None:
    entry = fb.MetadataT()
    entry.name, entry.buffer = "broken", 999
    m.metadata = [entry]


def _double_producer(m: object) -> None:
    ops = m.subgraphs[0].operators
    ops[1].outputs = list(ops[0].outputs)


BAD_INDICES: list[tuple[Callable[[object], None], str]] = [
    (_op_input, r"tensor index 999 out of range"),
    (_negative_op_input, r"tensor index -7 out of range"),
    (_op_output, r"tensor index 999 out of range"),
    (_omitted_op_output, r"only op inputs may be omitted"),
    (_graph_output, r"tensor index 999 out of range"),
    (_tensor_buffer, r"buffer index 999 out of range"),
    (_opcode, r"opcode index 99 out of range"),
    (_signature_tensor, r"signature tensor index 999 out of range"),
    (_signature_subgraph, r"subgraph 5"),
    (_metadata_buffer, r"buffer index 999 out of range"),
    (_double_producer, r"produced"),
]


@pytest.mark.parametrize(
    "mutate, expected", BAD_INDICES, ids=[m.__name__.lstrip("_") for m, _ in BAD_INDICES]
)
def test_out_of_range_index(
    corpus: Corpus, mutate: Callable[[object], None], expected: str
) -> None:
    model_t = _editable(corpus.path("conv_dense").read_bytes())
    mutate(model_t)
    with pytest.raises(ModelLoadError, match=expected) as info:
        ir.load(_pack(model_t))
    assert str(info.value).startswith("<bytes>: ")


# --------------------------------------------------------------------------------------------
# fuzzing: load succeeds (and dumps works) or raises ModelLoadError, nothing else
# --------------------------------------------------------------------------------------------
def _outcome(data: bytes) -> str | None:
    """None when the contract holds, else a description of the escaping exception."""
    try:
        model = ir.load(data)
    except ModelLoadError as exc:
        return None if str(exc).strip() else "ModelLoadError with an empty message"
    except Exception as exc:  # the point of the test: report any other type
        return f"ir.load raised {type(exc).__name__}: {exc}"
    try:
        ir.dumps(model)
    except Exception as exc:
        return f"load succeeded but dumps raised {type(exc).__name__}: {exc}"
    return None


def test_fuzz_single_byte_corruptions_and_truncations(corpus: Corpus) -> None:
    data = corpus.path("if_cond").read_bytes()  # 3 subgraphs, signatures, small
    rng = np.random.default_rng(20240601)
    failures = []
    for trial in range(200):
        damaged = bytearray(data)
        if trial % 4 == 3:
            damaged = damaged[: int(rng.integers(0, len(data)))]
            what = f"truncated to {len(damaged)} bytes"
        else:
            position, value = int(rng.integers(0, len(data))), int(rng.integers(0, 256))
            what = f"byte {position}: {damaged[position]:#04x} -> {value:#04x}"
            damaged[position] = value
        problem = _outcome(bytes(damaged))
        if problem:
            failures.append(f"if_cond {what}: {problem}")
    assert not failures, "\n".join(failures)


def _options_table_position(data: bytes, op_type: int) -> int:
    """Position of the builtin options table of the first op with options of ``op_type``."""
    root = fb.Model.GetRootAs(data, 0)
    for s in range(root.SubgraphsLength()):
        subgraph = root.Subgraphs(s)
        for i in range(subgraph.OperatorsLength()):
            op = subgraph.Operators(i)
            if op.BuiltinOptionsType() == op_type:
                return op.BuiltinOptions().Pos
    raise AssertionError(f"no op with options type {op_type}")


@pytest.mark.parametrize("vtable_offset", [-(2**31), 2**31 - 1, 1_000_000, -1_000_000])
def test_corrupt_options_table(corpus: Corpus, vtable_offset: int) -> None:
    """Options are parsed lazily; a broken options table must still fail as ModelLoadError."""
    data = bytearray(corpus.path("if_cond").read_bytes())
    position = _options_table_position(bytes(data), fb.BuiltinOptions.IfOptions)
    struct.pack_into("<i", data, position, vtable_offset)
    problem = _outcome(bytes(data))
    assert problem is None, problem
