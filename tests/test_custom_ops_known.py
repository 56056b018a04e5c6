"""Custom ops tflkit knows by name: ``TFLite_Detection_PostProcess`` (and the other custom ops the
standard op resolvers register) has a CPU kernel, so a model holding it loads and the GPU takes
the rest; an Edge TPU compiled model (``edgetpu-custom-op``) is said to be one, once.

Measured (ai-edge-litert 2.3, lavapipe): a PostProcess-only model compiles on the accelerator
with 0 ops on the GPU (its log: ``CUSTOM TFLite_Detection_PostProcess: ...``); with a MUL in
front, the MUL runs on the GPU and the PostProcess on the CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from flatbuffers import flexbuffers

from tflkit import ir
from tflkit.cli.main import main
from tflkit.compat.check import check_report
from tflkit.compat.custom_ops import EDGETPU_SENTENCE
from tflkit.gpu.log import parse_gpu_log
from tflkit.ir.builder import OpBuilder
from tflkit.rewriter.verify import run_cpu

F32 = np.float32
BOXES, CLASSES, DETECTIONS = 16, 3, 5


def postprocess_model(with_mul: bool = False) -> ir.Model:
    """An SSD head's last op alone (or behind a MUL by 1): boxes, scores, constant anchors."""
    model = ir.Model(description="TFLite_Detection_PostProcess case")
    graph = model.add_subgraph("main")
    b = OpBuilder(graph, prefix="pp")
    boxes = graph.new_tensor("boxes", [1, BOXES, 4], F32)
    scores = graph.new_tensor("scores", [1, BOXES, CLASSES + 1], F32)
    graph.inputs = [boxes, scores]
    anchors = np.random.default_rng(0).uniform(0.1, 0.9, (BOXES, 4)).astype(F32)
    options = {
        "max_detections": DETECTIONS,
        "max_classes_per_detection": 1,
        "detections_per_class": 100,
        "use_regular_nms": False,
        "nms_score_threshold": 0.3,
        "nms_iou_threshold": 0.6,
        "num_classes": CLASSES,
        "y_scale": 10.0,
        "x_scale": 10.0,
        "h_scale": 5.0,
        "w_scale": 5.0,
    }
    x = b.MUL(boxes, np.array(1.0, F32), name="scale") if with_mul else boxes
    outputs = b.op(
        "TFLite_Detection_PostProcess",
        [x, scores, b.const(anchors, "anchors")],
        outputs=[
            ([1, DETECTIONS, 4], F32),
            ([1, DETECTIONS], F32),
            ([1, DETECTIONS], F32),
            ([1], F32),
        ],
        custom_options=bytes(flexbuffers.Dumps(options)),
    )
    graph.outputs = list(outputs)
    return model


def edgetpu_model() -> ir.Model:
    """What edgetpu_compiler writes: the network as one ``edgetpu-custom-op`` on uint8 data."""
    model = ir.Model(description="Edge TPU compiled case")
    graph = model.add_subgraph("main")
    x = graph.new_tensor("x", [1, 8, 8, 3], np.uint8)
    graph.inputs = [x]
    y = OpBuilder(graph, prefix="e").op(
        "edgetpu-custom-op", [x], outputs=[([1, 10], np.uint8)], custom_options=bytes(16)
    )
    graph.outputs = [y]
    return model


def test_postprocess_runs_on_the_cpu_interpreter() -> None:
    _, out = run_cpu(ir.dumps(postprocess_model()), seed=0)
    assert len(out) == 4


@pytest.mark.parametrize("with_mul", [False, True], ids=["alone", "behind_mul"])
def test_postprocess_is_a_cpu_op_not_a_fatal_one(with_mul: bool) -> None:
    report = check_report(postprocess_model(with_mul))
    assert report.compiles and not any(i.fatal for i in report.issues)
    (op,) = [o for o in report.ops if o.type == "TFLite_Detection_PostProcess"]
    assert op.status == "rejected" and not op.on_gpu
    assert "registers its CPU kernel" in op.why and "does not load" not in op.why
    assert op.fix is not None and op.fix.kind == "none"
    assert report.gpu_ops == (1 if with_mul else 0)


def test_custom_rejection_lines_name_the_custom_op() -> None:
    log = parse_gpu_log(
        "ERROR: Following operations are not supported by GPU delegate:\n"
        "CUSTOM TFLite_Detection_PostProcess: TFLite_Detection_PostProcess\n"
        "1 operations will run on the GPU, and the remaining 1 operations will run on the CPU.\n"
    )
    (line,) = log.rejections
    assert line.op_type == "TFLite_Detection_PostProcess"
    assert (log.ops_on_gpu, log.ops_on_cpu) == (1, 1)


@pytest.mark.gpu
@pytest.mark.parametrize("with_mul", [False, True], ids=["alone", "behind_mul"])
def test_probe_placement_and_summary_are_one_truth(
    gpu: str, with_mul: bool, tmp_path: Path, capsys
) -> None:
    """The accelerator compiles both models; the per-op placement, the summary counts and the
    static verdict agree (no "0 ops on GPU" beside "accelerator GPU")."""
    path = tmp_path / "pp.tflite"
    path.write_bytes(ir.dumps(postprocess_model(with_mul)))
    code = main(["check", str(path), "--probe", "--json"])
    report = json.loads(capsys.readouterr().out)
    probe = report["probe"]
    assert code == 0 and probe["status"] == "ok" and probe["compiled"]
    on_gpu = [op for op in report["ops"] if op["probe_on_gpu"]]
    assert probe["ops_on_gpu"] == len(on_gpu) == (1 if with_mul else 0)
    assert probe["ops_on_cpu"] == 1
    assert probe["disagreements"] == [] and probe["model_agrees"]


def test_edgetpu_model_is_said_once(tmp_path: Path, capsys) -> None:
    path = tmp_path / "model_edgetpu.tflite"
    path.write_bytes(ir.dumps(edgetpu_model()))
    report = check_report(edgetpu_model())
    (issue,) = [i for i in report.issues if i.fatal]
    assert EDGETPU_SENTENCE in issue.message
    (op,) = report.ops
    assert op.fix is not None and "before Edge TPU compilation" in op.fix.summary
    code = main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("compiled for the Edge TPU") == 1 and err.count("\n") == 1, err
