"""tflkit.gpu.probe and gpu_log against the real GPU accelerator (software GPU: Mesa lavapipe).

Models are built with the IR in this process (no TensorFlow); every GPU compile happens in the
probe's child process. Logs are recorded from the real accelerator in each test; the pasted
lines in the parser unit tests are an addition, copied from real runs.
"""

from __future__ import annotations

import ast
import subprocess
import sys

import numpy as np
import pytest

from tflkit import ir
from tflkit.errors import ModelLoadError
from tflkit.gpu.availability import canary_model
from tflkit.gpu.log import matching_ops, parse_gpu_log, signature_aliases
from tflkit.gpu.probe import default_cache_dir, probe, spawn_count
from tflkit.ir.builder import OpBuilder
from tflkit.proc.child_env import child_env

fb = ir.schema.fb


# --- models -------------------------------------------------------------------------------------
def _finish(model: ir.Model, graph: ir.Subgraph, x: ir.Tensor, outputs: list[ir.Tensor]) -> bytes:
    graph.inputs, graph.outputs = [x], outputs
    model.signatures.append(
        ir.SignatureDef(
            "serving_default", graph, {"x": x}, {f"out{i}": t for i, t in enumerate(outputs)}
        )
    )
    return ir.dumps(model)


def rejected_ops_model() -> bytes:
    """ARG_MAX (int64 out), LOG_SOFTMAX, and a rank-5 RESHAPE -> MUL -> RESHAPE -> ADD chain."""
    model = ir.Model(description="probe test: rejections")
    graph = model.add_subgraph("main")
    x = graph.new_tensor("x", (1, 4, 16), np.float32)
    b = OpBuilder(graph, prefix="t")
    arg_options = fb.ArgMaxOptionsT()
    arg_options.outputType = fb.TensorType.INT64
    argmax = b.ARG_MAX(
        x, np.array([2], np.int32), shape=(1, 4), dtype=np.int64, options=arg_options, name="argmax"
    )
    logsm = b.LOG_SOFTMAX(x, options=fb.LogSoftmaxOptionsT(), name="logsm")
    r5 = b.RESHAPE(
        x,
        np.array([1, 2, 2, 2, 8], np.int32),
        shape=(1, 2, 2, 2, 8),
        options=fb.ReshapeOptionsT(),
        name="to5d",
    )
    m5 = b.MUL(r5, np.array(3.0, np.float32), options=fb.MulOptionsT(), name="mul5d")
    r3 = b.RESHAPE(
        m5,
        np.array([1, 4, 16], np.int32),
        shape=(1, 4, 16),
        options=fb.ReshapeOptionsT(),
        name="to3d",
    )
    out = b.ADD(r3, np.array(1.0, np.float32), options=fb.AddOptionsT(), name="add")
    return _finish(model, graph, x, [argmax, logsm, out])


def dynamic_batch_model() -> bytes:
    """Keras' Flatten under a dynamic batch: SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE -> FC.

    x is [1, 2, 2] with shape_signature [-1, 2, 2]. A -1 in a signature alone compiles on the
    GPU (measured); the RESHAPE whose shape is computed at run time is what the delegate refuses.
    """
    model = ir.Model(description="probe test: dynamic batch")
    graph = model.add_subgraph("main")
    x = graph.new_tensor("x", (1, 2, 2), np.float32, shape_signature=(-1, 2, 2))
    b = OpBuilder(graph, prefix="t")
    shape_options = fb.ShapeOptionsT()
    shape_options.outType = fb.TensorType.INT32
    shape = b.SHAPE(x, options=shape_options, shape=(3,), dtype=np.int32, name="shape")
    slice_options = fb.StridedSliceOptionsT()
    slice_options.shrinkAxisMask = 1
    batch = b.STRIDED_SLICE(
        shape,
        np.array([0], np.int32),
        np.array([1], np.int32),
        np.array([1], np.int32),
        options=slice_options,
        shape=(),
        dtype=np.int32,
        name="batch",
    )
    pack = fb.PackOptionsT()
    pack.valuesCount, pack.axis = 2, 0
    new_shape = b.PACK(
        batch, np.array(4, np.int32), options=pack, shape=(2,), dtype=np.int32, name="new_shape"
    )
    flat = b.RESHAPE(x, new_shape, options=fb.ReshapeOptionsT(), shape=(1, 4), name="flatten")
    flat.shape_signature = (-1, 4)
    y = b.FULLY_CONNECTED(
        flat,
        np.ones((3, 4), np.float32),
        None,
        options=fb.FullyConnectedOptionsT(),
        shape=(1, 3),
        name="dense",
    )
    y.shape_signature = (-1, 3)
    return _finish(model, graph, x, [y])


def pack_same_tensor_model(leading_ops: bool) -> bytes:
    """PACK([t, t]) (tf.stack([x, x])), optionally after MUL+RELU, SUB, TANH; then MUL."""
    model = ir.Model(description="probe test: PACK of one tensor twice")
    graph = model.add_subgraph("main")
    x = graph.new_tensor("x", (1, 8), np.float32)
    b = OpBuilder(graph, prefix="t")
    t = x
    if leading_ops:
        mul = fb.MulOptionsT()
        mul.fusedActivationFunction = fb.ActivationFunctionType.RELU
        t = b.MUL(t, np.array(2.0, np.float32), options=mul, name="mul_relu")
        t = b.SUB(t, np.array(0.5, np.float32), options=fb.SubOptionsT(), name="sub")
        t = b.TANH(t, name="tanh")
    pack = fb.PackOptionsT()
    pack.valuesCount, pack.axis = 2, 0
    stacked = b.PACK(t, t, options=pack, shape=(2, 1, 8), name="stack")
    out = b.MUL(stacked, np.array(3.0, np.float32), options=fb.MulOptionsT(), name="scale")
    return _finish(model, graph, x, [out])


# --- parser unit tests (lines copied from real runs) --------------------------------------------
DESIGN_BLOCK = """\
ERROR: Following operations are not supported by GPU delegate:
ARG_MAX: Tensor type(INT64) is not supported. output_2
LOG_SOFTMAX: Operation is not supported.
RESHAPE: Tensor dimensions must be less than 5. Reshape
8 operations will run on the GPU, and the remaining 4 operations will run on the CPU.
"""
ADAPTER_LINE = (
    "I0000 00:00:1795302963.810478    3697 environment.cc:532] Selected adapter: llvmpipe "
    "(LLVM 15.0.6, 256 bits), arch=software, vendor=mesa, backend=Vulkan, "
    "adapterType=CPU / Software"
)


def test_parser_reads_the_rejection_block_and_summary():
    log = parse_gpu_log(DESIGN_BLOCK)
    assert [(r.op_type, r.reason, r.detail) for r in log.rejections] == [
        ("ARG_MAX", "Tensor type(INT64) is not supported.", "output_2"),
        ("LOG_SOFTMAX", "Operation is not supported.", None),
        ("RESHAPE", "Tensor dimensions must be less than 5.", "Reshape"),
    ]
    assert (log.ops_on_gpu, log.ops_on_cpu) == (8, 4)
    assert log.fatal is None and log.adapter is None


def test_parser_reads_adapter_fatal_and_other_reason_shapes():
    text = "\n".join(
        [
            ADAPTER_LINE,
            "ERROR: Following operations are not supported by GPU delegate:",
            "DEQUANTIZE:",
            "TRANSPOSE_CONV: Max version supported: 3. Requested version 4.",
            "CAST: Not supported Cast case. Input type: INT32 and output type: INT64",
            "No operations will run on the GPU, and all 3 operations will run on the CPU.",
            "F0000 00:00:1795302964.934187    3737 model.cc:218] Check failed: "
            "!IsInput(consumer, value) Node 5 is already a consumer of the value 6",
        ]
    )
    log = parse_gpu_log(text)
    assert log.adapter is not None and log.adapter.is_software
    assert (log.adapter.name, log.adapter.vendor, log.adapter.backend) == (
        "llvmpipe (LLVM 15.0.6, 256 bits)",
        "mesa",
        "Vulkan",
    )
    assert [(r.op_type, r.reason, r.detail) for r in log.rejections] == [
        ("DEQUANTIZE", "", None),
        ("TRANSPOSE_CONV", "Max version supported: 3. Requested version 4.", None),
        ("CAST", "Not supported Cast case. Input type: INT32 and output type: INT64", None),
    ]
    assert (log.ops_on_gpu, log.ops_on_cpu) == (0, 3)
    assert log.fatal_kind == "check_failed"
    assert log.fatal.startswith("Check failed: !IsInput(consumer, value)")
    assert log.fatal_node == 5


def test_parser_reads_no_adapter():
    text = (
        "Warning: vkCreateInstance: Found no drivers!\n"
        "ERROR: [delegate_webgpu.cc:359] Failed to initialize WebGPU environment: INTERNAL: "
        "No adapters found\n"
    )
    log = parse_gpu_log(text)
    assert log.fatal_kind == "no_adapter"
    assert "No adapters found" in log.fatal
    assert log.adapter is None


# --- real accelerator ----------------------------------------------------------------------------
@pytest.mark.gpu
def test_real_rejections_name_ops_and_tensors(gpu, tmp_path):
    data = rejected_ops_model()
    result = probe(data, run=True, cache_dir=tmp_path)
    model = ir.load(data)
    ops = model.main.ops

    assert result.status == "ok", result.log_text
    assert result.compiled and not result.is_fully_accelerated
    log = result.log
    assert parse_gpu_log(result.log_text) == log
    assert log.adapter is not None
    lines = {(r.op_type, r.reason, r.detail) for r in log.rejections}
    by_name = {op.outputs[0].name: op for op in ops}
    argmax, to5d, mul5d = by_name["t/argmax"], by_name["t/to5d"], by_name["t/mul5d"]
    assert lines == {
        # a signature output: the runtime calls it by its signature name
        ("ARG_MAX", "Tensor type(INT64) is not supported.", "out0"),
        ("LOG_SOFTMAX", "Operation is not supported.", None),
        ("MUL", "Tensor dimensions must be less than 5.", "t/to5d"),
        ("RESHAPE", "Tensor dimensions must be less than 5.", "t/to5d"),
        ("RESHAPE", "Tensor dimensions must be less than 5.", "t/mul5d"),
    }
    # The trailing word is the name of the offending tensor: an input or output of the op.
    aliases = signature_aliases(model.signatures[0])
    located = {
        (r.op_type, r.detail): [op.index for op in matching_ops(r, ops, aliases)]
        for r in log.rejections
    }
    assert located[("ARG_MAX", "out0")] == [argmax.index]
    assert located[("LOG_SOFTMAX", None)] == [by_name["t/logsm"].index]
    assert located[("MUL", "t/to5d")] == [mul5d.index]
    assert sorted(located[("RESHAPE", "t/to5d")] + located[("RESHAPE", "t/mul5d")]) == [
        to5d.index,
        by_name["t/to3d"].index,
    ]
    assert (log.ops_on_gpu, log.ops_on_cpu) == (1, 5)
    assert log.ops_on_gpu + log.ops_on_cpu == result.num_ops == len(ops)
    # int64 outputs come back too (read as raw bytes: TensorBuffer.read has no int64 path).
    assert "out0" not in result.unreadable_outputs
    assert result.outputs["out0"].dtype == np.int64
    assert result.outputs["out1"].shape == (1, 4, 16)
    assert np.isfinite(result.outputs["out2"]).all()


@pytest.mark.gpu
def test_real_dynamic_batch_fails_compile_with_reason(gpu, tmp_path):
    result = probe(dynamic_batch_model(), cache_dir=tmp_path)
    assert result.status == "compile_error"
    assert not result.compiled and not result.is_fully_accelerated
    assert result.log.dynamic_tensors
    assert result.log.fatal_kind == "delegate_failed"
    assert "Failed to modify graph with delegate" in result.error
    assert result.exit_code == 0


@pytest.mark.gpu
def test_real_fully_accelerated_log(gpu, tmp_path):
    result = probe(canary_model(), cache_dir=tmp_path)
    assert result.status == "ok" and result.is_fully_accelerated
    assert result.log.rejections == [] and result.log.fatal is None
    assert result.log.gpu_kernels == 1
    assert result.compile_seconds < result.wall_seconds


@pytest.mark.gpu
@pytest.mark.parametrize("leading_ops", [False, True])
def test_pack_of_one_tensor_twice_is_a_crash_finding(gpu, tmp_path, leading_ops):
    data = pack_same_tensor_model(leading_ops)
    before = spawn_count()
    result = probe(data, cache_dir=tmp_path)  # the caller survives: we are still here

    assert result.status == "crashed" and result.crashed
    assert result.stage == "compile"
    assert result.exit_code != 0  # measured: glog's fatal handler exits with status 1
    assert result.exit_description is not None
    assert result.log.fatal_kind == "check_failed"
    assert result.log.fatal.startswith("Check failed: !IsInput(consumer, value)")
    site = result.crash_site
    assert site is not None, result.crash_note
    pack = next(op for op in ir.load(data).main.ops if op.type == "PACK")
    assert (site.op_index, site.op_type) == (pack.index, "PACK")
    assert site.isolated is True
    assert 2 <= spawn_count() - before <= 1 + site.compiles  # equal sub-models hit the cache


@pytest.mark.gpu
def test_timeout_is_a_finding_and_is_not_cached(gpu, tmp_path):
    data = canary_model()
    before = spawn_count()
    result = probe(data, timeout=0.05, cache_dir=tmp_path)
    assert result.status == "timeout" and result.timed_out
    assert not result.compiled
    assert result.signal == "SIGKILL"
    assert list(tmp_path.rglob("*.json")) == []
    again = probe(data, cache_dir=tmp_path)
    assert again.status == "ok" and not again.from_cache
    assert spawn_count() - before == 2


@pytest.mark.gpu
def test_second_call_is_served_from_cache_without_spawning(gpu, tmp_path):
    data = canary_model()
    first = probe(data, run=True, cache_dir=tmp_path)
    spawned = spawn_count()
    second = probe(data, run=True, cache_dir=tmp_path)

    assert not first.from_cache and second.from_cache
    assert spawn_count() == spawned
    assert second.worker_pid == first.worker_pid
    assert second.log == first.log and second.status == first.status == "ok"
    for name, value in first.outputs.items():
        np.testing.assert_array_equal(second.outputs[name], value)
    for name, value in first.inputs.items():
        np.testing.assert_array_equal(second.inputs[name], value)
    other = probe(data, run=True, enforce_f32=True, cache_dir=tmp_path)  # another key
    assert not other.from_cache and spawn_count() == spawned + 1


def test_not_a_model_is_one_clear_error(tmp_path):
    text = tmp_path / "notes.tflite"
    text.write_text("this is not a model\n")
    before = spawn_count()
    with pytest.raises(ModelLoadError, match="not a TFLite model"):
        probe(text, cache_dir=tmp_path)
    with pytest.raises(ModelLoadError, match="cannot read model"):
        probe(tmp_path / "missing.tflite", cache_dir=tmp_path)
    assert spawn_count() == before
    assert text.read_text() == "this is not a model\n"


def test_truncated_model_is_one_clear_error(tmp_path):
    data = canary_model()
    truncated = tmp_path / "truncated.tflite"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="cannot load"):
        probe(truncated, cache_dir=tmp_path)
    assert truncated.read_bytes() == data[: len(data) // 2]


def test_cache_dir_is_decided_in_one_place(tmp_path):
    assert default_cache_dir(tmp_path) == tmp_path
    assert default_cache_dir().parts[-3:] == (".cache", "tflkit", "probe")


# --- no GPU: gpu_available and the gpu fixture --------------------------------------------------
NO_DRIVER = {"VK_ICD_FILENAMES": "/nonexistent/tflkit-no-icd.json"}  # a real loader, no driver
FIXTURE_USER = """\
import pytest


@pytest.mark.gpu
def test_needs_gpu(gpu):
    assert gpu
"""


def _child_env(**extra: str) -> dict[str, str]:
    env = child_env()
    env.update(extra)
    return env


def test_gpu_available_says_why_without_a_vulkan_driver():
    code = "from tflkit.gpu.availability import gpu_available; print(repr(gpu_available()))"
    out = (
        subprocess.run(
            [sys.executable, "-c", code],
            env=_child_env(**NO_DRIVER),
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    ok, reason = ast.literal_eval(out)
    assert ok is False
    assert "no Vulkan driver" in reason and "No adapters found" in reason


@pytest.mark.parametrize(("ci", "outcome"), [("true", "1 error"), ("", "1 skipped")])
def test_gpu_fixture_fails_in_ci_and_skips_elsewhere(tmp_path, ci, outcome):
    (tmp_path / "test_user.py").write_text(FIXTURE_USER)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.gpu_fixture",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rs",
            "test_user.py",
        ],
        cwd=tmp_path,
        env=_child_env(CI=ci, **NO_DRIVER),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert outcome in proc.stdout, proc.stdout + proc.stderr
    assert "GPU accelerator unavailable: no Vulkan driver" in proc.stdout
    assert (proc.returncode != 0) == (ci == "true")
