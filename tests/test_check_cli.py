"""``tflkit check``: summary, reasons, fixes, partitions, probe, Model Explorer, exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tflkit import ir
from tflkit.cli.main import EXIT_OK, main
from tflkit.compat.check import check_report

EXAMPLE = Path(__file__).resolve().parents[1] / "tflkit" / "examples" / "tiny_classifier.tflite"


def check_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["check", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def test_example_static_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code, report = check_json(capsys, str(EXAMPLE))
    assert code == EXIT_OK
    assert report["schema"] == "tflkit.check/2"
    assert report["summary"] == "2 of 7 ops fall back to CPU in 1 partition"
    assert not report["gpu_ready"] and report["compiles"]
    offending = {op["type"]: op for op in report["ops"] if not op["on_gpu"]}
    assert set(offending) == {"ARG_MAX", "LOG_SOFTMAX"}
    assert offending["ARG_MAX"]["reasons"][0]["code"] == "DTYPE"
    assert offending["ARG_MAX"]["fix"]["rule"] == "arg_int64_to_int32"
    assert offending["LOG_SOFTMAX"]["fix"]["rule"] == "log_softmax"
    # The conv/dense trunk stays on the GPU: one GPU partition, then the CPU tail.
    assert [p["device"] for p in report["partitions"]] == ["gpu", "cpu"]
    # Logits (1x10 float32) cross from GPU to CPU once per inference.
    internal = [t for t in report["transfers"] if t["kind"] == "internal"]
    assert [(t["direction"], t["bytes"]) for t in internal] == [("gpu->cpu", 40)]
    assert report["internal_transfer_bytes"] == 40
    assert 0.99 < report["gpu_flops_share"] <= 1.0


def test_strict_exit_code(capsys: pytest.CaptureFixture[str], corpus: Any) -> None:
    assert main(["check", "--strict", str(EXAMPLE)]) == 1
    capsys.readouterr()
    assert main(["check", "--strict", str(corpus.path("conv_dense"))]) == EXIT_OK
    assert "GPU-ready" in capsys.readouterr().out


def test_largest_partition_only_is_simulated() -> None:
    """A rejected op in the middle splits the graph; the delegate takes only the largest part."""
    import numpy as np

    from tflkit.ir.builder import OpBuilder

    model = ir.Model()
    graph = model.add_subgraph("main")
    x = graph.new_tensor("x", (1, 8), np.float32)
    graph.inputs = [x]
    b = OpBuilder(graph)
    y = b.RELU(b.RELU(x))
    y = b.LOG_SOFTMAX(y, options=ir.schema.fb.LogSoftmaxOptionsT())
    y = b.TANH(b.RELU(b.RELU(y)))
    graph.outputs = [y]
    one = check_report(model)
    assert (one.gpu_ops, one.total_ops, one.gpu_partitions) == (3, 6, 1)
    assert [op.not_taken for op in one.ops] == [True, True, False, False, False, False]
    every = check_report(model, max_partitions=None)
    assert (every.gpu_ops, every.gpu_partitions) == (5, 2)


def test_dynamic_shape_that_breaks_compilation(capsys: pytest.CaptureFixture[str]) -> None:
    """A RESHAPE whose shape is computed at run time makes the whole GPU compile fail.

    Measured: the accelerator reports "Failed to modify graph with delegate" for such graphs
    (the ``reshape_runtime_shape`` case of the agreement corpus probes it); a shape that comes
    from SHAPE is computed while the graph is prepared and does not (``reshape_shape_of_input``).
    """
    import numpy as np

    from tflkit.ir.builder import OpBuilder

    model = ir.Model()
    graph = model.add_subgraph("main")
    x = graph.new_tensor("x", (1, 4, 2), np.float32)
    dims = graph.new_tensor("dims", (2,), np.int32)
    graph.inputs = [x, dims]
    b = OpBuilder(graph)
    graph.outputs = [b.RELU(b.RESHAPE(x, dims, shape=(1, 8)))]
    report = check_report(model)
    assert not report.compiles and not report.gpu_ready
    assert report.summary.startswith("GPU compilation fails for the whole model")
    assert report.gpu_ops == 0


@pytest.mark.gpu
def test_probe_agrees_on_the_example(gpu: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = check_json(capsys, "--probe", str(EXAMPLE))
    assert code == EXIT_OK
    probe = report["probe"]
    assert probe["status"] == "ok"
    assert probe["software_gpu"] is True
    assert (probe["ops_on_gpu"], probe["ops_on_cpu"]) == (5, 2)
    assert probe["disagreements"] == [] and probe["compared"] == 7 and probe["agree"] == 7
    assert {op["type"] for op in report["ops"] if op["probe_on_gpu"] is False} == {
        "ARG_MAX",
        "LOG_SOFTMAX",
    }


@pytest.mark.gpu
def test_crash_is_reported_with_its_op(
    gpu: Any, corpus: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = check_json(capsys, "--probe", str(corpus.path("pack_same_tensor")))
    assert code == EXIT_OK  # tflkit survives; the crash is a finding
    assert report["probe"]["status"] == "crashed"
    assert report["probe"]["crash"]["op_type"] == "PACK"
    assert report["probe"]["model_agrees"] is True  # the table predicts the crash as fatal
    assert "crashes" in report["summary"] and not report["gpu_ready"]
    assert main(["check", "--probe", "--strict", str(corpus.path("pack_same_tensor"))]) == 1


def test_model_explorer_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "verdicts.json"
    assert main(["check", "--model-explorer", str(out), str(EXAMPLE)]) == EXIT_OK
    data = json.loads(out.read_text())
    model = ir.load(EXAMPLE)
    (graph,) = data.values()
    results = graph["results"]
    assert len(results) == len(model.main.ops)
    by_type = {op.type: results[op.outputs[0].name]["value"] for op in model.main.ops}
    assert by_type["CONV_2D"] == "GPU"
    assert by_type["LOG_SOFTMAX"] == "CPU: UNSUPPORTED_OP"
    assert by_type["ARG_MAX"] == "CPU: DTYPE"


def test_tflite_gpu_target_and_unknown_target(capsys: pytest.CaptureFixture[str]) -> None:
    code, report = check_json(capsys, "--target", "tflite-gpu", str(EXAMPLE))
    assert code == EXIT_OK and report["target"] == "tflite-gpu"
    assert report["max_partitions"] == 1
    assert main(["check", "--target", "no-such-gpu", str(EXAMPLE)]) == 2
    assert "unknown GPU target" in capsys.readouterr().err
