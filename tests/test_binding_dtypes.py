"""Inputs of dtypes LiteRT's Python binding refuses (int64, int16, uint16, uint32, float64) reach
the runtime as their bytes, on a CPU and a GPU ``CompiledModel``, and a GRU text encoder with
int64 ids validates on the GPU; a refusal in every form is the binding's, never a GPU verdict.
Real runtime, real GPU accelerator (software GPU), models built with real TensorFlow."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.truth_models import CAST_DTYPES, truth_models
from tflkit.cli.main import main
from tflkit.gpu.buffers import BINDING_REFUSED, BindingRefused, write_buffer


@pytest.fixture(scope="module")
def families():
    return truth_models()


def _compiled(path, gpu: bool):
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator as HA
    from ai_edge_litert.options import GpuOptions, Options

    accel = HA.GPU | HA.CPU if gpu else HA.CPU
    options = Options(hardware_accelerators=accel, gpu_options=GpuOptions(enforce_f32=True))
    return CompiledModel.from_file(str(path), options=options)


def _feed(dtype: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {
        "x": rng.integers(0, 1000, (1, 4)).astype(dtype),
        "y": rng.normal(size=(1, 4)).astype(np.float32),
    }


def _interpreter(path, feed):
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter(model_path=str(path)).get_signature_runner()(**feed)


@pytest.mark.parametrize("dtype", CAST_DTYPES)
def test_refused_dtypes_go_through_as_bytes_on_the_cpu(families, dtype):
    path, feed = families / f"cast_{dtype}.tflite", _feed(dtype)
    cm = _compiled(path, gpu=False)
    names = cm.get_signature_list()["serving_default"]
    ins, outs = cm.create_input_buffers(0), cm.create_output_buffers(0)
    with pytest.raises(ValueError, match=f"Unsupported dtype: {dtype}"):
        ins[names["inputs"].index("x")].write(feed["x"])  # what the binding does on its own
    for buf, name in zip(ins, names["inputs"], strict=True):
        write_buffer(buf, feed[name])
    cm.run_by_index(0, ins, outs)
    got = outs[0].read(4, np.float32).reshape(1, 4)
    expected = _interpreter(path, feed)["o"]
    assert np.array_equal(got, expected)  # exact: a CAST of the same integers, one MUL, one ADD
    assert np.array_equal(expected, feed["y"] * 2 + feed["x"].astype(np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", CAST_DTYPES)
def test_refused_dtypes_go_through_as_bytes_on_the_gpu(families, gpu, dtype):
    """The GPU accelerator in its child process (the probe worker) gets the same bytes."""
    from tflkit.gpu.probe import probe

    path, feed = families / f"cast_{dtype}.tflite", _feed(dtype)
    result = probe(path, run=True, input_sets=[feed], enforce_f32=True, use_cache=False)
    assert result.status == "ok", result.error
    expected = _interpreter(path, feed)["o"]
    got = result.output_sets[0]["o"]
    assert np.abs(got - expected).max() <= 1e-6 * np.abs(expected).max()


def test_a_dtype_refused_in_every_form_is_the_bindings(families):
    """An array the binding takes in no form (a string array) raises BindingRefused."""
    cm = _compiled(families / "cast_int16.tflite", gpu=False)
    buf = cm.create_input_buffers(0)[0]
    with pytest.raises(BindingRefused, match=r"the Python binding refused dtype <U3") as caught:
        write_buffer(buf, np.array([["abc"] * 4]))
    assert caught.value.status == BINDING_REFUSED


@pytest.mark.gpu
def test_int64_text_encoder_validates_on_the_gpu(families, gpu, capsys):
    path = families / "text_encoder_int64.tflite"
    code = main(["validate", str(path), "-n", "2", "--json"])
    report = json.loads(capsys.readouterr().out)
    status = {r["runner"]: r["status"] for r in report["runners"]}
    assert status == {"cpu": "ok", "cpu-fp16": "ok", "gpu-fp16": "ok", "gpu-fp32": "ok"}
    assert code == 0 and report["verdict"] == "pass", report["findings"]
    (fp32,) = [c for c in report["comparisons"] if c["pair"] == "gpu-fp32:cpu"]
    max_abs = fp32["outputs"][0]["metrics"]["max_abs"]
    assert 0 <= max_abs < 1e-5
    (ids,) = report["inputs"]["inputs"]
    assert ids["dtype"] == "int64" and ids["data"] == "index"
    # the same figure, by hand: the GPU in fp32 given the ids' bytes against the Interpreter
    from tflkit import ir
    from tflkit.gpu.probe import probe
    from tflkit.validation.inputs import make_input_sets

    sets = make_input_sets(ir.load(path), count=2, seed=0, kind="realistic").feeds
    gpu_run = probe(path, run=True, input_sets=sets, enforce_f32=True, use_cache=False)
    worst = 0.0
    for feed, got in zip(sets, gpu_run.output_sets, strict=True):
        assert feed["ids"].dtype == np.int64
        cpu = next(iter(_interpreter(path, feed).values()))
        worst = max(worst, float(np.abs(next(iter(got.values())) - cpu).max()))
    assert max_abs == pytest.approx(worst, rel=1e-6, abs=1e-12)


def test_a_binding_refusal_leaves_the_verdict_open():
    """A runner the binding refused is no finding: its pair is not compared, the verdict is
    incomplete (exit 1, open), never a GPU failure; the runner's line says the binding."""
    from tflkit.compare.comparator import compare_pair
    from tflkit.delegates.base import RunResult
    from tflkit.report.validate_report import ValidateReport
    from tflkit.validation.verdicts import findings, verdict

    refusal = "the Python binding refused dtype <U3 (TensorBuffer.write: Unsupported dtype)"
    cpu = RunResult("cpu", "ok", outputs=[{"o": np.ones(4, np.float32)}])
    gpu = RunResult("gpu-fp16", BINDING_REFUSED, error=refusal)
    pair = compare_pair(gpu, cpu, [])
    assert pair.verdict == "skipped" and refusal in pair.reason
    report = ValidateReport("m", "", None, {}, [], [cpu, gpu], [pair])
    report.findings = findings([cpu, gpu], [pair], set())
    assert report.findings == []
    verdict(report, [pair], set())
    assert report.verdict == "incomplete"
    assert report.findings == ["nothing was compared for gpu-fp16:cpu"]
