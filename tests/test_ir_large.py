"""LiteRT's large-model layout (buffer data after the flatbuffer), tested on small files.

Models over 2 GB keep each constant's bytes after the flatbuffer: the ``Buffer`` table has no
``data``, and ``offset`` (absolute, > 1) and ``size`` say where they are. ``ir.save(...,
external_buffers=True)`` writes that layout for any model, so the suite checks it without a
2 GB file: the bytes LiteRT's own reader sees, the CPU interpreter's outputs, the CLI, and
truncated or overlapping files. ``bench/ir_large.py`` runs the real > 2 GB case.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as fb
from ai_edge_litert.interpreter import Interpreter
from ai_edge_litert.tools import flatbuffer_utils

from tflkit import ir
from tflkit.cli.main import EXIT_OK, main
from tflkit.errors import ModelLoadError, TflkitError
from tflkit.ir import serde, serialize
from tflkit.ir.builder import OpBuilder

REAL = "deeplabv3.tflite"
WIDTH = 64


def _small_model() -> ir.Model:
    """Two FULLY_CONNECTED + ADD + RELU layers, and a metadata entry (which stays inline)."""
    rng = np.random.default_rng(7)
    model = ir.Model(description="large-layout test")
    graph = model.add_subgraph("main")
    x = graph.new_tensor("input", (1, WIDTH), np.float32)
    graph.inputs = [x]
    build = OpBuilder(graph, prefix="layer")
    for i in range(2):
        weights = rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / 8
        bias = rng.standard_normal((1, WIDTH), dtype=np.float32)
        options = fb.FullyConnectedOptionsT()
        x = build.FULLY_CONNECTED(x, weights, None, options=options, name=f"fc{i}")
        x = build.ADD(x, bias, options=fb.AddOptionsT(), name=f"add{i}")
        x = build.RELU(x, name=f"relu{i}")
    graph.outputs = [x]
    model.signatures.append(
        ir.SignatureDef("serving_default", graph, {"input": graph.inputs[0]}, {"output": x})
    )
    model.set_metadata("min_runtime_version", b"1.5.0\0\0\0\0\0\0\0\0\0\0\0")
    return model


@pytest.fixture(params=["built", "real"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A model in the normal layout: built with the op builder, or a real corpus model."""
    if request.param == "built":
        path = tmp_path / "built.tflite"
        ir.save(_small_model(), path)
        return path
    real = request.getfixturevalue("real_models")
    found = next((p for p in real if p.name == REAL), None)
    assert found is not None, f"{REAL} missing from {[p.name for p in real]}"
    return found


def _external(source: Path, tmp_path: Path) -> Path:
    out = tmp_path / f"{source.stem}.external.tflite"
    ir.save(ir.load(source), out, external_buffers=True)
    return out


def _arrays(model: ir.Model) -> list[tuple[str, bytes | None]]:
    return [
        (t.name, None if t.buffer is None or t.buffer.data is None else t.buffer.data.tobytes())
        for sg in model.subgraphs
        for t in sg.tensors
    ]


def _flatbuffer_end(data: bytes) -> int:
    """Where the first appended buffer starts (the end of the flatbuffer part)."""
    root = fb.Model.GetRootAs(data, 0)
    starts = [root.Buffers(i).Offset() for i in range(root.BuffersLength())]
    return min(o for o in starts if o > 1)


# --------------------------------------------------------------------------------------------
# the layout
# --------------------------------------------------------------------------------------------
def test_layout_is_litert_large_model_layout(source: Path, tmp_path: Path) -> None:
    path = _external(source, tmp_path)
    data = path.read_bytes()
    root = fb.Model.GetRootAs(data, 0)
    end = _flatbuffer_end(data)
    tensor_buffers = {
        root.Subgraphs(s).Tensors(t).Buffer()
        for s in range(root.SubgraphsLength())
        for t in range(root.Subgraphs(s).TensorsLength())
    }
    metadata_buffers = {root.Metadata(i).Buffer() for i in range(root.MetadataLength())}
    appended = 0
    for i in range(root.BuffersLength()):
        buffer = root.Buffers(i)
        if buffer.Offset() > 1:
            appended += 1
            assert i in tensor_buffers
            assert buffer.DataLength() == 0  # no inline data
            assert buffer.Offset() % 16 == 0 and buffer.Offset() >= end
            assert buffer.Offset() + buffer.Size() <= len(data)
        elif i in metadata_buffers:
            assert buffer.DataLength() > 0  # metadata stays inside the flatbuffer
    assert appended > 0
    assert end % 16 == 0 and len(data) % 16 == 0
    # LiteRT's own Python reader resolves the offsets to the same bytes as the normal file.
    ours = flatbuffer_utils.read_model_from_bytearray(bytearray(data))
    theirs = flatbuffer_utils.read_model_from_bytearray(bytearray(source.read_bytes()))
    assert [bytes(b.data) if b.data is not None else b"" for b in ours.buffers] == [
        bytes(b.data) if b.data is not None else b"" for b in theirs.buffers
    ]


def test_loads_back_identical_and_resaves_byte_identical(source: Path, tmp_path: Path) -> None:
    path = _external(source, tmp_path)
    original, loaded = ir.load(source), ir.load(path)
    assert loaded.appended_buffers and not original.appended_buffers
    assert _arrays(loaded) == _arrays(original)
    assert [m.buffer.tobytes() for m in loaded.metadata] == [
        m.buffer.tobytes() for m in original.metadata
    ]
    # the constants are views on the file's map, not copies
    weights = next(t for t in loaded.main.tensors if t.buffer is not None and t.buffer.nbytes > 64)
    assert not weights.buffer.data.flags.owndata and not weights.buffer.data.flags.writeable
    # saving keeps the layout it was loaded from, byte for byte; asked, it goes back inline
    again = tmp_path / "again.tflite"
    ir.save(loaded, again)
    assert again.read_bytes() == path.read_bytes()
    inline = tmp_path / "inline.tflite"
    ir.save(loaded, inline, external_buffers=False)
    assert inline.read_bytes() == serde.dumps(original)
    assert serde.dumps(loaded) == path.read_bytes()


def _run(model_path: Path, seed: int = 0) -> list[np.ndarray]:
    interpreter = Interpreter(model_path=str(model_path))
    interpreter.allocate_tensors()
    rng = np.random.default_rng(seed)
    for detail in interpreter.get_input_details():
        shape = [max(1, int(d)) for d in detail["shape"]]
        value = rng.standard_normal(shape).astype(detail["dtype"])
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def test_litert_cpu_interpreter_runs_it_with_the_same_outputs(source: Path, tmp_path: Path) -> None:
    path = _external(source, tmp_path)
    normal, external = _run(source), _run(path)
    assert len(normal) == len(external) > 0
    for a, b in zip(normal, external, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(np.abs(a).sum() > 0 for a in normal)  # the weights were really read


def test_cli_check_and_inspect(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _external(source, tmp_path)
    reports = []
    for model in (source, path):
        assert main(["check", "--json", str(model)]) == EXIT_OK
        report = json.loads(capsys.readouterr().out)
        reports.append({k: v for k, v in report.items() if k not in ("path", "sha256")})
    assert reports[0] == reports[1]
    assert main(["inspect", "--json", str(path)]) == EXIT_OK
    inspected = json.loads(capsys.readouterr().out)
    assert inspected["size_bytes"] == path.stat().st_size


# --------------------------------------------------------------------------------------------
# damaged files: one clear error
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["check", "inspect"])
def test_truncated_external_file_is_one_clear_error(tmp_path: Path, command: str) -> None:
    path = tmp_path / "model.tflite"
    ir.save(_small_model(), path, external_buffers=True)
    data = path.read_bytes()
    cut = tmp_path / "cut.tflite"
    cut.write_bytes(data[: (_flatbuffer_end(data) + len(data)) // 2])  # mid-way in the data
    with pytest.raises(ModelLoadError, match=r"truncated .*lies past the end of the file"):
        ir.load(cut)
    done = subprocess.run(
        [sys.executable, "-m", "tflkit", command, str(cut)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "truncated" in errors[0] and "past the end of the file" in errors[0]


def test_buffer_overlapping_the_flatbuffer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.tflite"
    ir.save(_small_model(), path, external_buffers=True)
    data = bytearray(path.read_bytes())
    root = fb.Model.GetRootAs(data, 0)
    buffer = next(root.Buffers(i) for i in range(root.BuffersLength()) if root.Buffers(i).Offset())
    at = buffer._tab.Pos + buffer._tab.Offset(6)  # Buffer.offset
    struct.pack_into("<Q", data, at, 16)  # data said to start inside the flatbuffer's tables
    with pytest.raises(ModelLoadError, match=r"corrupt .*flatbuffer part must end by byte 16"):
        ir.load(bytes(data))


# --------------------------------------------------------------------------------------------
# choosing the layout
# --------------------------------------------------------------------------------------------
def test_normal_models_keep_the_normal_layout(tmp_path: Path) -> None:
    model = _small_model()
    path = tmp_path / "model.tflite"
    ir.save(model, path)
    root = fb.Model.GetRootAs(path.read_bytes(), 0)
    assert all(root.Buffers(i).Offset() == 0 for i in range(root.BuffersLength()))
    assert not ir.load(path).appended_buffers


def test_a_model_too_large_for_one_flatbuffer_goes_external(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The 2 GiB limit, lowered so that a small model crosses it (bench/ir_large.py: real)."""
    model = _small_model()
    size = len(serde.dumps(model))
    monkeypatch.setattr(serialize, "_MAX_FLATBUFFER", size - 1)
    data = serde.dumps(model)
    assert ir.load(data).appended_buffers
    assert _flatbuffer_end(data) < size - 1
    with pytest.raises(TflkitError, match="does not fit in one flatbuffer"):
        serde.dumps(model, external_buffers=False)
