"""The IR is lossless: load -> dumps keeps every field, is idempotent, and runs bit-identically.

Structure is checked by ``tests.ir_compare`` (the flatbuffer object API, not tflkit's reader),
outputs by running the original and the rewritten bytes on the real LiteRT CPU interpreter.
"""

from __future__ import annotations

import re
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as fb
from flatbuffers import flexbuffers

from tests.conftest_corpus import Corpus
from tests.corpus import generate
from tests.corpus.features import CPU_FAILURES
from tests.ir_compare import format_diff, output_mismatches, run_model, structural_diff
from tflkit import ir
from tflkit.ir.builder import OpBuilder


def _corpus_param(name: str) -> object:
    if name in CPU_FAILURES:
        # The CPU interpreter cannot run it (unresolved custom op / flex op): structure only,
        # plus "both versions fail the same way".
        return pytest.param(name, id=f"{name}-structure_only_cpu_cannot_run")
    return pytest.param(name, id=name)


CORPUS = [_corpus_param(name) for name in generate.GENERATORS]


def _roundtrip(data: bytes) -> bytes:
    return ir.dumps(ir.load(data))


def _assert_lossless(data: bytes, label: str) -> bytes:
    out = _roundtrip(data)
    diff = structural_diff(data, out)
    assert not diff, f"{label}: load -> dumps changed the model:\n{format_diff(diff)}"
    return out


def _assert_idempotent(data: bytes, label: str) -> None:
    once = _roundtrip(data)
    twice = _roundtrip(once)
    thrice = _roundtrip(twice)
    assert once == twice == thrice, f"{label}: dumps(load(x)) is not a fixed point"


def _assert_same_outputs(original: bytes, rewritten: bytes, label: str) -> None:
    expected = run_model(original, seed=1)
    assert expected, f"{label}: the model produced no outputs"
    mismatches = output_mismatches(expected, run_model(rewritten, seed=1))
    assert not mismatches, f"{label}: outputs changed: {mismatches}"


# --------------------------------------------------------------------------------------------
# generated corpus
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CORPUS)
def test_corpus_structure_lossless(corpus: Corpus, name: str) -> None:
    _assert_lossless(corpus.path(name).read_bytes(), name)


@pytest.mark.parametrize("name", CORPUS)
def test_corpus_serialization_idempotent(corpus: Corpus, name: str) -> None:
    _assert_idempotent(corpus.path(name).read_bytes(), name)


@pytest.mark.parametrize("name", CORPUS)
def test_corpus_outputs_bit_identical(corpus: Corpus, name: str) -> None:
    data = corpus.path(name).read_bytes()
    out = _roundtrip(data)
    if name in CPU_FAILURES:
        expected = re.compile(CPU_FAILURES[name], re.DOTALL)
        for blob in (data, out):
            with pytest.raises(RuntimeError, match=expected):
                run_model(blob)
        assert not structural_diff(data, out), f"{name}: structure changed"
        return
    _assert_same_outputs(data, out, name)


@pytest.mark.parametrize("name", CORPUS)
def test_corpus_verify_clean(corpus: Corpus, name: str) -> None:
    model = ir.load(corpus.path(name))
    assert ir.verify_model(model) == []
    assert ir.verify_model(ir.load(ir.dumps(model))) == []


def test_save_writes_what_dumps_returns(corpus: Corpus, tmp_path: Path) -> None:
    source = corpus.path("multi_signature")
    before = source.read_bytes()
    model = ir.load(source)
    target = ir.save(model, tmp_path / "out.tflite")
    assert Path(target).read_bytes() == ir.dumps(model)
    assert source.read_bytes() == before, "save touched the input file"
    assert [p.name for p in tmp_path.iterdir()] == ["out.tflite"], "temp file left behind"


# --------------------------------------------------------------------------------------------
# real third-party float models (tests.corpus.fetch.REAL_FLOAT)
# --------------------------------------------------------------------------------------------
def test_real_models_structure_lossless(real_models: list[Path]) -> None:
    assert real_models, "no real models"
    for path in real_models:
        _assert_lossless(path.read_bytes(), path.name)


def test_real_models_serialization_idempotent(real_models: list[Path]) -> None:
    for path in real_models:
        _assert_idempotent(path.read_bytes(), path.name)


def test_real_models_outputs_bit_identical(real_models: list[Path]) -> None:
    for path in real_models:
        data = path.read_bytes()
        _assert_same_outputs(data, _roundtrip(data), path.name)


def test_real_models_verify_clean(real_models: list[Path]) -> None:
    for path in real_models:
        assert ir.verify_model(ir.load(path)) == [], path.name


# --------------------------------------------------------------------------------------------
# large-model layout: buffer data after the flatbuffer, addressed by offset/size
# --------------------------------------------------------------------------------------------
def _pack(model_t: object) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model_t.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def to_offset_layout(data: bytes) -> bytes:
    """The same model with every buffer stored after the flatbuffer (``Buffer.offset/size``)."""
    model_t = fb.ModelT.InitFromPackedBuf(data, 0)
    payload = []
    for buffer in model_t.buffers:
        if buffer.data is not None and len(buffer.data):
            payload.append((buffer, np.asarray(buffer.data, np.uint8).tobytes()))
            buffer.data, buffer.offset, buffer.size = None, 1, 1  # placeholders, same width
    head = _pack(model_t)
    chunks, position = [head], len(head)
    for buffer, raw in payload:
        pad = (-position) % 16
        chunks.append(bytes(pad))
        buffer.offset, buffer.size = position + pad, len(raw)
        chunks.append(raw)
        position += pad + len(raw)
    chunks[0] = _pack(model_t)
    assert len(chunks[0]) == len(head)
    return b"".join(chunks)


def test_offset_buffer_layout_roundtrip(corpus: Corpus) -> None:
    data = corpus.path("conv_dense").read_bytes()
    offset_layout = to_offset_layout(data)
    assert offset_layout != data
    assert not structural_diff(data, offset_layout)  # the layout change is invisible to compare
    out = _assert_lossless(offset_layout, "conv_dense (offset layout)")
    _assert_same_outputs(offset_layout, out, "conv_dense (offset layout)")


# --------------------------------------------------------------------------------------------
# a hand-built model covering the features directly
# --------------------------------------------------------------------------------------------
IN_SCALE, OUT_SCALE, OUT_ZERO = 0.05, 0.1, -3
W_SCALES = np.array([0.01, 0.02, 0.03], np.float32)
CUSTOM_OPTIONS = flexbuffers.Dumps({"alpha": 0.5, "mode": "tflkit"})
METADATA = {"tflkit_test": b"hand-built\x00\x01\x02", "min_runtime_version": b"1.14.0\x00"}


def _quant(scale: object, zero_point: object, dim: int = 0) -> object:
    params = fb.QuantizationParametersT()
    params.scale = [float(s) for s in np.atleast_1d(scale)]
    params.zeroPoint = [int(z) for z in np.atleast_1d(zero_point)]
    params.quantizedDimension = dim
    return params


def build_feature_model(with_custom_op: bool) -> ir.Model:
    """4 subgraphs (main, WHILE cond, WHILE body, aux), per-channel int8 conv, a variable
    tensor, a custom op with flexbuffer options, 2 metadata entries and 2 signatures."""
    rng = np.random.default_rng(7)
    model = ir.Model(description="tflkit hand-built feature model")
    main, cond, body, aux = (model.add_subgraph(n) for n in ("main", "cond", "body", "aux"))
    carried = (1, 4, 4, 3)

    i, acc = cond.new_tensor("i", (), np.int32), cond.new_tensor("acc", carried, np.float32)
    cond.inputs = [i, acc]
    cond.outputs = [OpBuilder(cond, prefix="cond").LESS(i, np.array(3, np.int32), dtype=np.bool_)]

    i, acc = body.new_tensor("i", (), np.int32), body.new_tensor("acc", carried, np.float32)
    body.inputs = [i, acc]
    b = OpBuilder(body, prefix="body")
    halved = b.MUL(acc, np.array(0.5, np.float32), options=fb.MulOptionsT())
    body.outputs = [
        b.ADD(i, np.array(1, np.int32), options=fb.AddOptionsT()),
        b.ADD(halved, np.array(1.0, np.float32), options=fb.AddOptionsT()),
    ]

    x = main.new_tensor("x", (1, 4, 4, 2), np.float32)
    state = main.new_tensor("state", (1, 4, 4, 2), np.float32, is_variable=True)
    main.inputs = [x]
    b = OpBuilder(main, prefix="main")
    summed = b.ADD(x, state, options=fb.AddOptionsT(), name="add_state")
    b.created[-1].mutating_variable_inputs = [False, True]
    xq = b.QUANTIZE(summed, dtype=np.int8, quantization=_quant(IN_SCALE, 0))
    weights = main.add_constant(
        rng.integers(-127, 128, (3, 1, 1, 2)).astype(np.int8),
        "conv/w",
        quantization=_quant(W_SCALES, [0, 0, 0], 0),
    )
    bias = main.add_constant(
        rng.integers(-50, 50, (3,)).astype(np.int32),
        "conv/b",
        quantization=_quant(W_SCALES * IN_SCALE, [0, 0, 0], 0),
    )
    conv_options = fb.Conv2DOptionsT()
    conv_options.padding, conv_options.strideH, conv_options.strideW = fb.Padding.SAME, 1, 1
    yq = b.CONV_2D(
        xq,
        weights,
        bias,
        options=conv_options,
        shape=carried,
        dtype=np.int8,
        quantization=_quant(OUT_SCALE, OUT_ZERO),
        version=3,
    )
    y = b.DEQUANTIZE(yq, dtype=np.float32)
    while_options = fb.WhileOptionsT()
    while_options.condSubgraphIndex, while_options.bodySubgraphIndex = 1, 2
    _, looped = b.op(
        "WHILE",
        [b.const(np.array(0, np.int32), "i0"), y],
        options=while_options,
        outputs=[((), np.int32), (carried, np.float32)],
    )
    outputs = {"y": y, "looped": looped}
    if with_custom_op:
        outputs["custom"] = b.op("TflkitTestOp", [looped], custom_options=CUSTOM_OPTIONS)
    main.outputs = list(outputs.values())

    z = aux.new_tensor("z", (2,), np.float32)
    aux.inputs = [z]
    doubled = OpBuilder(aux, prefix="aux").MUL(
        z, np.array([2.0, 2.0], np.float32), options=fb.MulOptionsT()
    )
    aux.outputs = [doubled]
    model.signatures = [
        ir.SignatureDef("serving_default", main, {"x": x}, outputs),
        ir.SignatureDef("double", aux, {"z": z}, {"z2": doubled}),
    ]
    for name, data in METADATA.items():
        model.set_metadata(name, data)
    return model


def _reference_outputs(x: np.ndarray, model: ir.Model) -> tuple[np.ndarray, np.ndarray]:
    """numpy reference of the main signature: per-channel int8 1x1 conv, then the loop."""
    weights = model.main.tensor("conv/w").data.astype(np.int64)[:, 0, 0, :]
    bias = model.main.tensor("conv/b").data.astype(np.int64)
    xq = np.clip(np.round(x / IN_SCALE), -128, 127).astype(np.int64)
    acc = xq @ weights.T + bias
    real = acc * (IN_SCALE * W_SCALES.astype(np.float64))
    y = (np.clip(np.round(real / OUT_SCALE) + OUT_ZERO, -128, 127) - OUT_ZERO) * OUT_SCALE
    looped = y.astype(np.float32)
    for _ in range(3):
        looped = looped * np.float32(0.5) + np.float32(1.0)
    return y, looped


def test_hand_built_model_features_survive() -> None:
    data = ir.dumps(build_feature_model(with_custom_op=True))
    assert not structural_diff(data, _assert_lossless(data, "hand-built"))
    _assert_idempotent(data, "hand-built")

    model = ir.load(data)
    assert ir.verify_model(model) == []
    assert [sg.name for sg in model.subgraphs] == ["main", "cond", "body", "aux"]
    loop = next(op for op in model.main.ops if op.type == "WHILE")
    assert loop.referenced_subgraphs == {"condSubgraphIndex": 1, "bodySubgraphIndex": 2}
    weights = model.main.tensor("conv/w")
    assert weights.quantization.quantizedDimension == 0
    np.testing.assert_array_equal(np.float32(weights.quantization.scale), W_SCALES)
    assert list(weights.quantization.zeroPoint) == [0, 0, 0]
    assert model.main.tensor("state").is_variable
    add_state = model.main.tensor("x").consumers[0]
    assert add_state.mutating_variable_inputs == [False, True]
    custom = next(op for op in model.main.ops if op.is_custom)
    assert (custom.type, custom.custom_options) == ("TflkitTestOp", CUSTOM_OPTIONS)
    assert flexbuffers.Loads(custom.custom_options) == {"alpha": 0.5, "mode": "tflkit"}
    assert {m.name: m.buffer.tobytes() for m in model.metadata} == METADATA
    assert [(s.key, s.subgraph.index, list(s.outputs)) for s in model.signatures] == [
        ("serving_default", 0, ["y", "looped", "custom"]),
        ("double", 3, ["z2"]),
    ]


def test_hand_built_model_runs_bit_identical() -> None:
    # Same model without the custom op (the CPU interpreter cannot resolve it).
    model = build_feature_model(with_custom_op=False)
    data = ir.dumps(model)
    out = _assert_lossless(data, "hand-built runnable")
    _assert_same_outputs(data, out, "hand-built runnable")

    results = run_model(out, seed=3)
    x = np.random.default_rng(3).standard_normal((1, 4, 4, 2)).astype(np.float32)
    y, looped = _reference_outputs(x, model)
    # int8 requantization rounds with a fixed-point multiplier: allow one output step.
    np.testing.assert_allclose(results["serving_default/y"], y, atol=OUT_SCALE * 1.01)
    np.testing.assert_allclose(
        results["serving_default/looped"],
        results["serving_default/y"] / 8 + 1.75,
        rtol=0,
        atol=1e-6,
    )
    assert np.abs(results["serving_default/looped"] - looped).max() <= OUT_SCALE / 8 * 1.01
    z = np.random.default_rng(3).standard_normal(2).astype(np.float32)
    np.testing.assert_array_equal(results["double/z2"], z * 2)


# --------------------------------------------------------------------------------------------
# the comparison itself is not vacuous
# --------------------------------------------------------------------------------------------
def _mutated(data: bytes, mutate: object) -> bytes:
    model_t = fb.ModelT.InitFromPackedBuf(data, 0)
    mutate(model_t)
    return _pack(model_t)


def _writable(array: object) -> np.ndarray:
    return np.array(array, copy=True)


def _flip_weight_byte(m: object) -> None:
    weights = m.subgraphs[0].tensors[_tensor_index(m, "conv/w")]
    data = _writable(m.buffers[weights.buffer].data)
    data[0] ^= 1
    m.buffers[weights.buffer].data = data


def _tensor_index(m: object, name: str) -> int:
    return next(i for i, t in enumerate(m.subgraphs[0].tensors) if t.name == name.encode())


def _set_scale(m: object) -> None:
    m.subgraphs[0].tensors[_tensor_index(m, "conv/w")].quantization.scale = [0.01, 0.02, 0.04]


def _bump_version(m: object) -> None:
    m.operatorCodes[m.subgraphs[0].operators[0].opcodeIndex].version += 1


def _swap_inputs(m: object) -> None:
    op = next(o for o in m.subgraphs[0].operators if len(o.inputs) >= 2)
    op.inputs = _writable(op.inputs)[::-1].copy()


def _rename_signature_output(m: object) -> None:
    m.signatureDefs[1].outputs[0].name = "renamed"


def _change_metadata(m: object) -> None:
    entry = next(e for e in m.metadata if e.name == b"tflkit_test")
    m.buffers[entry.buffer].data = np.frombuffer(b"changed", np.uint8)


def _change_custom_options(m: object) -> None:
    op = next(o for o in m.subgraphs[0].operators if o.customOptions is not None)
    op.customOptions = np.frombuffer(b"\x00" + CUSTOM_OPTIONS[1:], np.uint8)


def _change_while_body(m: object) -> None:
    op = next(o for o in m.subgraphs[0].operators if isinstance(o.builtinOptions, fb.WhileOptionsT))
    op.builtinOptions.bodySubgraphIndex = 3


def _clear_variable(m: object) -> None:
    m.subgraphs[0].tensors[_tensor_index(m, "state")].isVariable = False


def _shape_signature(m: object) -> None:
    m.subgraphs[0].tensors[0].shapeSignature = [-1, 4, 4, 2]


MUTATIONS = [
    (_flip_weight_byte, r"tensors\[\d+ 'conv/w'\]\.buffer"),
    (_set_scale, r"quantization\.scale"),
    (_bump_version, r"operators\[0\]\.opcode"),
    (_swap_inputs, r"\.inputs"),
    (_rename_signature_output, r"signatures\[1\]\.outputs"),
    (_change_metadata, r"model\.metadata"),
    (_change_custom_options, r"\.custom_options"),
    (_change_while_body, r"builtin_options\.bodySubgraphIndex"),
    (_clear_variable, r"'state'\]\.is_variable"),
    (_shape_signature, r"\.shape_signature"),
]


@pytest.mark.parametrize(
    "mutate, expected", MUTATIONS, ids=[m.__name__.lstrip("_") for m, _ in MUTATIONS]
)
def test_structural_diff_detects(mutate: object, expected: str) -> None:
    data = ir.dumps(build_feature_model(with_custom_op=True))
    diff = structural_diff(data, _mutated(data, mutate))
    assert diff, "the change went unnoticed"
    assert any(re.search(expected, line) for line in diff), diff


def test_structural_diff_empty_buffer_equals_buffer_zero() -> None:
    data = ir.dumps(build_feature_model(with_custom_op=False))

    def own_empty_buffer(m: object) -> None:
        for tensor in m.subgraphs[0].tensors:
            if tensor.buffer == 0:
                m.buffers.append(fb.BufferT())
                tensor.buffer = len(m.buffers) - 1

    assert structural_diff(data, _mutated(data, own_empty_buffer)) == []
