"""The IR editing API: connections, edits, dead-code removal, ordering, verify, extract, builder.

Every edit is followed by dumps -> load -> a run on the real LiteRT CPU interpreter where the
result is runnable, and outputs are compared bit for bit (or against a numpy reference).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as fb

from tests.conftest_corpus import Corpus
from tests.ir_compare import (
    format_diff,
    output_mismatches,
    run_main,
    run_model,
    structural_diff,
)
from tflkit import ir
from tflkit.errors import InvalidModelError, TflkitError
from tflkit.ir import graph_edits
from tflkit.ir.builder import OpBuilder

REAL = "deeplabv3.tflite"  # 70 float ops (CONV_2D, DEPTHWISE_CONV_2D, ADD, RESIZE_BILINEAR, ...)


def _real(real_models: list[Path], name: str = REAL) -> Path:
    found = [p for p in real_models if p.name == name]
    assert found, f"{name} is not among the real models {[p.name for p in real_models]}"
    return found[0]


def _saved(model: ir.Model) -> bytes:
    """dumps -> load -> verify: the bytes of a sound model."""
    data = ir.dumps(model)
    problems = ir.verify_model(ir.load(data))
    assert problems == [], problems
    return data


def _x_times(values: dict[str, np.ndarray], factor: float) -> dict[str, np.ndarray]:
    return {k: (v * np.float32(factor)).astype(v.dtype) for k, v in values.items()}


# --------------------------------------------------------------------------------------------
# connections after load, checked against the raw flatbuffer indices
# --------------------------------------------------------------------------------------------
def _assert_connections_match_file(data: bytes) -> None:
    model_t = fb.ModelT.InitFromPackedBuf(data, 0)
    model = ir.load(data)
    for sg_t, sg in zip(model_t.subgraphs, model.subgraphs, strict=True):
        producers: dict[int, list[int]] = {}
        uses: dict[int, list[tuple[int, int]]] = {}
        for op_index, op_t in enumerate(sg_t.operators or []):
            for slot, t in enumerate(op_t.inputs if op_t.inputs is not None else []):
                if t >= 0:
                    uses.setdefault(int(t), []).append((op_index, slot))
            for t in op_t.outputs if op_t.outputs is not None else []:
                producers.setdefault(int(t), []).append(op_index)
        for index, tensor in enumerate(sg.tensors):
            assert tensor.index == index
            expected_producer = producers.get(index, [None])
            assert len(expected_producer) == 1
            got = tensor.producer.index if tensor.producer is not None else None
            assert got == expected_producer[0], tensor.name
            assert sorted((op.index, slot) for op, slot in tensor.uses) == uses.get(index, [])
            assert sorted(op.index for op in tensor.consumers) == sorted(
                {op for op, _ in uses.get(index, [])}
            )
        for op_index, op in enumerate(sg.ops):
            assert op.index == op_index and op.subgraph is sg
            assert [t.index if t is not None else -1 for t in op.inputs] == list(
                sg_t.operators[op_index].inputs
            )


def test_connections_after_load_real_model(real_models: list[Path]) -> None:
    _assert_connections_match_file(_real(real_models).read_bytes())


@pytest.mark.parametrize("name", ["lstm", "while_loop", "resource_variables", "pack_same_tensor"])
def test_connections_after_load_corpus(corpus: Corpus, name: str) -> None:
    _assert_connections_match_file(corpus.path(name).read_bytes())


def test_same_tensor_twice_is_two_uses(corpus: Corpus) -> None:
    model = ir.load(corpus.path("pack_same_tensor"))
    pack = next(op for op in model.main.ops if op.type == "PACK")
    assert pack.inputs[0] is pack.inputs[1]
    assert sorted(slot for op, slot in pack.inputs[0].uses if op is pack) == [0, 1]
    assert pack.inputs[0].consumers.count(pack) == 1


# --------------------------------------------------------------------------------------------
# replace_all_uses_with, insert, remove
# --------------------------------------------------------------------------------------------
def test_replace_all_uses_with_moves_graph_and_signature_outputs(corpus: Corpus) -> None:
    data = corpus.path("conv_dense").read_bytes()
    model = ir.load(data)
    sg = model.main
    out = sg.outputs[0]
    signature = model.signatures[0]
    (key,) = signature.outputs
    assert signature.outputs[key] is out

    builder = OpBuilder(sg, after=out.producer)
    doubled = builder.MUL(out, np.array(2.0, np.float32), options=fb.MulOptionsT())
    mul = builder.created[0]
    sg.replace_all_uses_with(out, doubled)
    assert mul.inputs[0] is doubled  # replace_all_uses_with moved every reader, this one too
    mul.set_input(0, out)

    assert sg.outputs == [doubled] and signature.outputs[key] is doubled
    assert out.consumers == [mul] and doubled.producer is mul and doubled.consumers == []
    assert mul.index == len(sg.ops) - 1
    edited = _saved(model)
    expected = _x_times(run_model(data), 2.0)
    assert output_mismatches(expected, run_model(edited)) == []


def test_replace_all_uses_with_can_leave_graph_outputs(corpus: Corpus) -> None:
    model = ir.load(corpus.path("conv_dense"))
    sg = model.main
    out = sg.outputs[0]
    other = sg.new_tensor("other", out.shape, out.type)
    sg.replace_all_uses_with(out, other, graph_outputs=False)
    assert sg.outputs == [out] and next(iter(model.signatures[0].outputs.values())) is out


def _insert_identity_mul(sg: ir.Subgraph, tensor: ir.Tensor) -> ir.Op:
    """Insert ``tensor * 1.0`` right after its producer and make every reader use it."""
    builder = OpBuilder(sg, after=tensor.producer, prefix="identity")
    one = builder.MUL(tensor, np.array(1.0, np.float32), options=fb.MulOptionsT())
    mul = builder.created[0]
    sg.replace_all_uses_with(tensor, one)
    mul.set_input(0, tensor)
    return mul


def test_insert_op_mid_graph_keeps_outputs(real_models: list[Path]) -> None:
    data = _real(real_models).read_bytes()
    model = ir.load(data)
    sg = model.main
    branched = next(t for t in sg.tensors if len(t.consumers) >= 2 and t.producer is not None)
    readers = {id(op) for op in branched.consumers}
    mul = _insert_identity_mul(sg, branched)

    assert mul.index == branched.producer.index + 1
    assert {id(op) for op in mul.outputs[0].consumers} == readers
    assert branched.consumers == [mul]
    assert len(sg.ops) == 71
    edited = _saved(model)
    assert len(ir.load(edited).main.ops) == 71
    assert output_mismatches(run_model(data), run_model(edited)) == []


def test_remove_op_restores_original_model(real_models: list[Path]) -> None:
    data = _real(real_models).read_bytes()
    model = ir.load(data)
    sg = model.main
    branched = next(t for t in sg.tensors if len(t.consumers) >= 2 and t.producer is not None)
    _insert_identity_mul(sg, branched)
    model = ir.load(ir.dumps(model))  # the edit survives a save
    sg = model.main
    mul = next(op for op in sg.ops if op.type == "MUL")
    original = mul.inputs[0]
    sg.replace_all_uses_with(mul.outputs[0], original)
    sg.remove_op(mul)
    assert mul.subgraph is None and mul.outputs[0].producer is None
    assert all(reader is not mul for reader, _ in original.uses)
    assert graph_edits.remove_unused(model) == {"ops": 0, "tensors": 2, "buffers": 1}
    restored = _saved(model)
    diff = structural_diff(data, restored)
    assert diff == [], format_diff(diff)
    assert output_mismatches(run_model(data), run_model(restored)) == []


def test_remove_then_insert_moves_an_op(real_models: list[Path]) -> None:
    """Moving an op is remove_op + insert_op; the op must stay connected to its tensors."""
    data = _real(real_models).read_bytes()
    model = ir.load(data)
    sg = model.main
    op = sg.ops[10]
    sg.remove_op(op)
    sg.insert_op(10, op)
    assert all(t.producer is op for t in op.outputs)
    assert all((op, slot) in t.uses for slot, t in enumerate(op.inputs) if t is not None)
    assert ir.verify_model(model) == []
    assert output_mismatches(run_model(data), run_model(_saved(model))) == []


# --------------------------------------------------------------------------------------------
# constants and dead code
# --------------------------------------------------------------------------------------------
def test_add_constant_dedupes_buffers(corpus: Corpus) -> None:
    model = ir.load(corpus.path("conv_dense"))
    sg = model.main
    conv = next(op for op in sg.ops if op.type == "CONV_2D")
    loaded_weights = conv.inputs[1]
    count = len(model.buffers)

    same_as_loaded = sg.add_constant(np.array(loaded_weights.data), "copy_of_weights")
    assert same_as_loaded.buffer is loaded_weights.buffer
    assert same_as_loaded is not loaded_weights and same_as_loaded.name == "copy_of_weights"
    first = sg.add_constant(np.arange(6, dtype=np.float32).reshape(2, 3), "c")
    second = sg.add_constant(np.arange(6, dtype=np.float32).reshape(3, 2), "c")
    different = sg.add_constant(np.arange(6, dtype=np.float32) + 1, "c")
    assert first.buffer is second.buffer and different.buffer is not first.buffer
    assert second.name != first.name  # names made unique
    assert second.shape == (3, 2) and second.data.tolist() == [[0, 1], [2, 3], [4, 5]]
    assert len(model.buffers) == count + 2

    data = _saved(model)
    model_t = fb.ModelT.InitFromPackedBuf(data, 0)
    tensors = {t.name.decode(): t for t in model_t.subgraphs[0].tensors}
    assert tensors["c"].buffer == tensors["c_1"].buffer != tensors["c_2"].buffer
    assert (
        tensors["copy_of_weights"].buffer
        == model_t.subgraphs[0].tensors[loaded_weights.index].buffer
    )


def test_remove_unused_drops_dead_ops_tensors_buffers(corpus: Corpus) -> None:
    data = corpus.path("conv_dense").read_bytes()
    model = ir.load(data)
    sg = model.main
    builder = OpBuilder(sg, prefix="dead")
    dead = builder.MUL(
        sg.inputs[0], np.full(sg.inputs[0].shape[-1], 3.0, np.float32), options=fb.MulOptionsT()
    )
    builder.ADD(dead, np.array(7.0, np.float32), options=fb.AddOptionsT())
    assert len(sg.ops) == 5
    assert graph_edits.remove_unused(model) == {"ops": 2, "tensors": 4, "buffers": 2}
    assert [op.type for op in sg.ops] == ["CONV_2D", "RESHAPE", "FULLY_CONNECTED"]
    cleaned = _saved(model)
    assert structural_diff(data, cleaned) == []
    assert output_mismatches(run_model(data), run_model(cleaned)) == []


def test_remove_unused_keeps_side_effect_ops(corpus: Corpus) -> None:
    data = corpus.path("resource_variables").read_bytes()
    model = ir.load(data)
    types = [[op.type for op in sg.ops] for sg in model.subgraphs]
    assert "ASSIGN_VARIABLE" in types[0] and "CALL_ONCE" in types[0]
    assert graph_edits.remove_unused(model)["ops"] == 0
    assert [[op.type for op in sg.ops] for sg in model.subgraphs] == types
    cleaned = _saved(model)
    assert output_mismatches(run_model(data), run_model(cleaned)) == []

    # A dead custom op and a dead WHILE stay; a dead pure op next to them goes.
    model = ir.load(corpus.path("conv_dense"))
    sg = model.main
    builder = OpBuilder(sg, prefix="dead")
    builder.op("MyCustomSideEffect", [sg.inputs[0]], custom_options=b"\x01")
    builder.NEG(sg.inputs[0])
    assert graph_edits.remove_unused(model)["ops"] == 1
    assert [op.type for op in sg.ops][-1] == "MyCustomSideEffect"


# --------------------------------------------------------------------------------------------
# ordering
# --------------------------------------------------------------------------------------------
def _shuffled(model: ir.Model, seed: int) -> None:
    sg = model.main
    order = np.random.default_rng(seed).permutation(len(sg.ops))
    sg.reorder([sg.ops[i] for i in order])


def test_topological_sort_fixes_shuffled_real_model(real_models: list[Path]) -> None:
    data = _real(real_models).read_bytes()
    model = ir.load(data)
    _shuffled(model, seed=0)
    problems = ir.verify_model(model)
    assert problems and all("produced later" in p for p in problems), problems[:3]
    graph_edits.topological_sort(model.main)
    assert ir.verify_model(model) == []
    assert output_mismatches(run_model(data), run_model(_saved(model))) == []


def test_verify_sees_disorder_in_converter_output(corpus: Corpus) -> None:
    """TF >= 2.x gives every activation tensor its own empty buffer; those are not constants."""
    model = ir.load(corpus.path("conv_dense"))
    sg = model.main
    sg.reorder(list(reversed(sg.ops)))
    problems = ir.verify_model(model)
    assert any("produced later" in p for p in problems), problems
    graph_edits.topological_sort(sg)
    assert [op.type for op in sg.ops] == ["CONV_2D", "RESHAPE", "FULLY_CONNECTED"]
    assert ir.verify_model(model) == []


def test_topological_sort_detects_cycle() -> None:
    model = ir.Model()
    sg = model.add_subgraph("main")
    x = sg.new_tensor("x", (4,), np.float32)
    sg.inputs = [x]
    builder = OpBuilder(sg)
    a = builder.NEG(x)
    b = builder.ABS(a)
    sg.outputs = [b]
    builder.created[0].set_input(0, b)  # NEG reads ABS's output: a cycle
    with pytest.raises(InvalidModelError, match="cycle"):
        graph_edits.topological_sort(sg)


# --------------------------------------------------------------------------------------------
# verify
# --------------------------------------------------------------------------------------------
def _small_model() -> tuple[ir.Model, ir.Subgraph, ir.Tensor]:
    model = ir.Model()
    sg = model.add_subgraph("main")
    x = sg.new_tensor("x", (2,), np.float32)
    sg.inputs = [x]
    builder = OpBuilder(sg)
    y = builder.ADD(builder.NEG(x), np.array([1.0, 2.0], np.float32), options=fb.AddOptionsT())
    sg.outputs = [y]
    assert ir.verify_model(model) == []
    return model, sg, x


def test_verify_tensor_produced_twice() -> None:
    """The editing API refuses a second producer (the graph stays sound); an op list edited by
    hand, past the API, is reported by verify."""
    model, sg, x = _small_model()
    neg = sg.ops[0]
    out = neg.outputs[0]
    with pytest.raises(InvalidModelError, match="already produced"):
        ir.Op(ir.OpCode.builtin("ABS"), [x], [out])
    # Through remove/insert: NEG leaves, ABS claims its output, NEG may not come back.
    sg.remove_op(neg)
    sg.insert_op(0, ir.Op(ir.OpCode.builtin("ABS"), [x], [out]))
    refused = re.escape(f"tensor '{out.name}' already has a producer")
    with pytest.raises(InvalidModelError, match=refused):
        sg.insert_op(1, neg)
    assert [op.type for op in sg.ops] == ["ABS", "ADD"] and neg.subgraph is None
    assert out.producer is sg.ops[0]
    assert ir.verify_model(model) == []
    sg._ops.insert(1, neg)  # past the API
    neg.subgraph = sg
    problems = ir.verify_model(model)
    assert any(f"output '{out.name}' is also produced by op 0" in p for p in problems), problems


def test_verify_dangling_tensors() -> None:
    model, sg, _ = _small_model()
    neg_out = sg.ops[0].outputs[0]
    sg._tensors.remove(
        neg_out
    )  # past the API: still read by ADD, no longer a tensor of the subgraph
    assert any("is not one of its tensors" in p for p in ir.verify_model(model))
    with pytest.raises(TflkitError, match="not one of its tensors"):
        ir.dumps(model)

    model, sg, _ = _small_model()
    orphan = sg.new_tensor("orphan", (2,), np.float32)  # nobody produces it
    sg.ops[1].set_input(1, orphan)
    assert any("'orphan' is never produced" in p for p in ir.verify_model(model))


def test_verify_input_produced_later() -> None:
    model, sg, _ = _small_model()
    sg.reorder(list(reversed(sg.ops)))
    assert any("is produced later" in p for p in ir.verify_model(model)), ir.verify_model(model)


def test_verify_signature_tensor_outside_subgraph() -> None:
    model, sg, x = _small_model()
    other = model.add_subgraph("other")
    stray = other.new_tensor("stray", (2,), np.float32)
    model.signatures = [ir.SignatureDef("serving_default", sg, {"x": x}, {"y": stray})]
    assert any("'y' is not a tensor of its subgraph" in p for p in ir.verify_model(model))


def test_verify_bad_constant_size() -> None:
    model, sg, _ = _small_model()
    const = sg.ops[1].inputs[1]
    assert const.is_constant
    const.buffer = ir.Buffer(b"\x00" * 3)
    problems = ir.verify_model(model)
    assert any("holds 3 bytes" in p and "needs 8" in p for p in problems), problems


def test_verify_output_never_produced() -> None:
    model, sg, _ = _small_model()
    sg.outputs = [sg.new_tensor("ghost", (2,), np.float32)]
    assert any("graph output 'ghost' is never produced" in p for p in ir.verify_model(model))


# --------------------------------------------------------------------------------------------
# extract
# --------------------------------------------------------------------------------------------
def _all_tensors(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Inputs fed and every tensor of the main subgraph by name (reference kernels, no XNNPACK)."""
    values: dict[str, np.ndarray] = {}
    feeds: dict[str, np.ndarray] = {}

    def grab(interpreter: object) -> None:
        for details in interpreter.get_tensor_details():
            try:
                values[details["name"]] = np.array(interpreter.get_tensor(details["index"]))
            except ValueError:  # tensors without data (e.g. never allocated)
                continue
        for details in interpreter.get_input_details():
            feeds[details["name"]] = values[details["name"]]

    run_main(data, seed=5, preserve_all_tensors=True, inspect=grab)
    return feeds, values


def _check_extracted(chunk: list[ir.Op], values: dict[str, np.ndarray]) -> int:
    extracted = ir.load(_saved(ir.extract_model(chunk)))
    assert [op.type for op in extracted.main.ops] == [op.type for op in chunk]
    inputs = {t.name: values[t.name] for t in extracted.main.inputs}
    outputs = run_main(ir.dumps(extracted), inputs=inputs, preserve_all_tensors=True)
    assert outputs
    expected = {name: values[name] for name in outputs}
    assert output_mismatches(expected, outputs) == [], [op.type for op in chunk]
    return len(outputs)


def test_extract_each_op_of_real_model(real_models: list[Path]) -> None:
    data = _real(real_models).read_bytes()
    _, values = _all_tensors(data)
    model = ir.load(data)
    checked = sum(_check_extracted([op], values) for op in model.main.ops)
    assert checked >= len(model.main.ops)


def test_extract_chunks_of_real_models(real_models: list[Path]) -> None:
    for name in (REAL, "embedding_model.tflite"):
        data = _real(real_models, name).read_bytes()
        _, values = _all_tensors(data)
        model = ir.load(data)
        ops = model.main.ops
        for start in range(0, len(ops), 12):
            _check_extracted(ops[start : start + 12], values)
        # The whole graph extracted is the whole model again.
        assert _check_extracted(list(ops), values) == len(model.main.outputs)


@pytest.mark.parametrize("name", ["while_loop", "if_cond"])
def test_extract_control_flow_copies_subgraphs(corpus: Corpus, name: str) -> None:
    data = corpus.path(name).read_bytes()
    model = ir.load(data)
    flow = next(op for op in model.main.ops if op.referenced_subgraphs)
    extracted = ir.extract_model([flow])
    assert len(extracted.subgraphs) == 3
    assert sorted(extracted.main.ops[0].referenced_subgraphs.values()) == [1, 2]
    _, values = _all_tensors(data)
    _check_extracted([flow], values)


# --------------------------------------------------------------------------------------------
# the op builder
# --------------------------------------------------------------------------------------------
def test_op_builder_builds_a_runnable_model() -> None:
    rng = np.random.default_rng(11)
    filters = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)  # OHWI
    conv_bias = rng.standard_normal(4).astype(np.float32)
    dense = rng.standard_normal((5, 64)).astype(np.float32)
    dense_bias = rng.standard_normal(5).astype(np.float32)

    model = ir.Model()
    sg = model.add_subgraph("main")
    x = sg.new_tensor("x", (1, 8, 8, 3), np.float32)
    sg.inputs = [x]
    b = OpBuilder(sg)
    conv_options = fb.Conv2DOptionsT()
    conv_options.padding, conv_options.strideH, conv_options.strideW = fb.Padding.VALID, 1, 1
    conv_options.fusedActivationFunction = fb.ActivationFunctionType.RELU
    h = b.CONV_2D(x, filters, conv_bias, options=conv_options, shape=(1, 6, 6, 4))
    pool_options = fb.Pool2DOptionsT()
    pool_options.padding = fb.Padding.VALID
    pool_options.strideH = pool_options.strideW = pool_options.filterHeight = 2
    pool_options.filterWidth = 2
    h = b.MAX_POOL_2D(h, options=pool_options, shape=(1, 3, 3, 4))
    reshape_options = fb.ReshapeOptionsT()
    reshape_options.newShape = [1, 36]
    h = b.RESHAPE(h, np.array([1, 36], np.int32), options=reshape_options, shape=(1, 36))
    h = b.PAD(h, np.array([[0, 0], [14, 14]], np.int32), shape=(1, 64))
    logits = b.FULLY_CONNECTED(
        h, dense, dense_bias, options=fb.FullyConnectedOptionsT(), shape=(1, 5)
    )
    softmax_options = fb.SoftmaxOptionsT()
    softmax_options.beta = 1.0
    y = b.SOFTMAX(logits, options=softmax_options)
    sg.outputs = [y]
    model.signatures = [ir.SignatureDef("serving_default", sg, {"x": x}, {"y": y})]
    assert [op.type for op in b.created] == [
        "CONV_2D",
        "MAX_POOL_2D",
        "RESHAPE",
        "PAD",
        "FULLY_CONNECTED",
        "SOFTMAX",
    ]

    data = _saved(model)
    got = run_model(data, seed=4)["serving_default/y"]
    image = np.random.default_rng(4).standard_normal((1, 8, 8, 3)).astype(np.float32)
    windows = np.lib.stride_tricks.sliding_window_view(image[0], (3, 3), axis=(0, 1))
    conv = np.einsum("hwcij,oijc->hwo", windows, filters) + conv_bias
    conv = np.maximum(conv, 0)
    pooled = conv.reshape(3, 2, 3, 2, 4).max(axis=(1, 3)).reshape(1, 36)
    padded = np.pad(pooled, ((0, 0), (14, 14)))
    logits_ref = padded @ dense.T + dense_bias
    expected = np.exp(logits_ref - logits_ref.max()) / np.exp(logits_ref - logits_ref.max()).sum()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


def test_op_builder_insertion_points() -> None:
    model, sg, _ = _small_model()
    neg, add = sg.ops
    before = OpBuilder(sg, before=add, prefix="pre")
    t = before.ABS(neg.outputs[0])
    before.SQUARE(t)
    after = OpBuilder(sg, after=neg, prefix="post")
    u = after.RELU(neg.outputs[0])
    after.RELU6(u)
    assert [op.type for op in sg.ops] == ["NEG", "RELU", "RELU6", "ABS", "SQUARE", "ADD"]
    assert ir.verify_model(model) == []
    # The extra ops are dead: removing them leaves the original two.
    assert graph_edits.remove_unused(model)["ops"] == 4
    assert [op.type for op in sg.ops] == ["NEG", "ADD"]
    data = _saved(model)
    x_value = np.array([1.5, -2.0], np.float32)
    out = run_main(data, inputs={"x": x_value})
    np.testing.assert_array_equal(next(iter(out.values())), -x_value + [1.0, 2.0])


# --------------------------------------------------------------------------------------------
# the graph's interface and order: tracked, changed through the API only
# --------------------------------------------------------------------------------------------
def test_ops_and_tensors_change_only_through_the_api() -> None:
    _, sg, x = _small_model()
    with pytest.raises(AttributeError):
        sg.ops.append(sg.ops[0])  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        sg.tensors[0] = x  # type: ignore[index]
    with pytest.raises(AttributeError):
        sg.ops = []  # type: ignore[misc]
    with pytest.raises(InvalidModelError, match="own ops"):
        sg.reorder([sg.ops[0]])
    assert [op.type for op in sg.ops] == ["NEG", "ADD"] and sg.ops == list(sg.ops)


def test_the_tensor_says_whether_the_outside_sees_it() -> None:
    model, sg, x = _small_model()
    neg_out, out = sg.ops[0].outputs[0], sg.ops[1].outputs[0]
    assert x.is_graph_input and x.is_interface and not x.is_observable
    assert out.is_graph_output and out.is_observable and not neg_out.is_interface
    model.signatures.append(ir.SignatureDef("serve", sg, {"x": x}, {"y": out}))
    sg.outputs.remove(out)  # a signature output only
    assert not out.is_graph_output and out.is_signature_output and out.is_observable
    signature = model.signatures[0]
    signature.outputs["hidden"] = neg_out
    assert neg_out.is_observable and neg_out.is_signature_output
    del signature.outputs["hidden"]
    assert not neg_out.is_observable
    sg.outputs = [neg_out, neg_out]  # the same tensor twice: held until both go
    sg.outputs.pop()
    assert neg_out.is_graph_output
    sg.replace_all_uses_with(neg_out, out)
    assert not neg_out.is_graph_output and list(sg.outputs) == [out]
    assert signature.outputs == {"y": out} and signature.inputs == {"x": x}


def test_dead_code_removal_keeps_the_interface_and_side_effects() -> None:
    model, sg, x = _small_model()
    spare = sg.new_tensor("spare", (2,), np.float32)
    model.signatures.append(ir.SignatureDef("serve", sg, {"x": x, "spare": spare}, {}))
    OpBuilder(sg).ABS(x)  # read by nobody: removed
    looping = sg.new_tensor("loop_out", (2,), np.float32)
    sg.add_op(ir.Op(ir.OpCode.builtin("STABLEHLO_WHILE"), [x], [looping]))  # control flow: kept
    assert graph_edits.remove_unused_ops(sg) == (1, 1)
    assert [op.type for op in sg.ops] == ["NEG", "ADD", "STABLEHLO_WHILE"]
    assert spare in sg.tensors
