"""The accelerator's rejection lines attributed to the ops they are about, not to every op of a
type: ``MUL: Can't parse inputs with const tensors.`` names no tensor, and stands for the MULs
the delegate refused, not for every MUL of the model.

The family: a chain of MUL (by a scalar) and ADD pairs the GPU takes, then MULs by a 5-D
constant over the 4-D activation (``[1, 4, 4, 8] * [1, 1, 4, 4, 8]``), which the accelerator
refuses with that line (measured: ai-edge-litert 2.3.0; a 5-D constant over a 2-D input gets
``Tensor dimensions must be less than 5. <name>`` instead). Applied to every MUL the line leaves
the ADDs in one-op partitions and the count far from the summary's, and the probe said "12 on
GPU, 2 on CPU" and "disagreement MUL x6: static GPU, accelerator CPU" at once.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tflkit import ir
from tflkit.cli.main import EXIT_OK, main
from tflkit.compat.agreement import compare, probe_op_verdicts
from tflkit.compat.static import analyze
from tflkit.gpu.probe import probe
from tflkit.ir.builder import OpBuilder
from tflkit.rewriter.example import options

F32 = np.float32
LINE = "MUL: Can't parse inputs with const tensors."


def _family(on_gpu: int, lifted: int) -> ir.Model:
    """``on_gpu`` MUL+ADD pairs, then ``lifted`` MULs by a 5-D constant (model outputs)."""
    model = ir.Model(description="tflkit probe-attribution family")
    graph = model.add_subgraph("main")
    x = graph.new_tensor("x", [1, 4, 4, 8], F32)
    b = OpBuilder(graph, prefix="f")
    h = x
    for i in range(on_gpu):
        h = b.MUL(h, np.array(1.0 + i / 10, F32), options=options("MulOptions"), name=f"scale{i}")
        h = b.ADD(h, np.array(0.1, F32), options=options("AddOptions"), name=f"shift{i}")
    outs = [
        b.MUL(h, np.full([1, 1, 4, 4, 8], 0.5 + j, F32), options=options("MulOptions"),
              name=f"lift{j}")
        for j in range(lifted)
    ]  # fmt: skip
    outs.append(h)
    graph.inputs, graph.outputs = [x], outs
    model.signatures.append(
        ir.SignatureDef(
            "serving_default", graph, {"x": x}, {f"out{i}": t for i, t in enumerate(outs)}
        )
    )
    return model


def _lifted(model: ir.Model) -> set[int]:
    return {op.index for op in model.main.ops if op.type == "MUL" and len(op.inputs[1].shape) == 5}


@pytest.mark.gpu
@pytest.mark.parametrize(("on_gpu", "lifted"), [(6, 2), (3, 1)])
def test_a_line_naming_no_tensor_is_the_ops_the_summary_counts(
    gpu: str, tmp_path: Any, capsys: pytest.CaptureFixture[str], on_gpu: int, lifted: int
) -> None:
    model = _family(on_gpu, lifted)
    path = tmp_path / "family.tflite"
    ir.save(model, path)
    assert main(["check", "--probe", "--json", str(path)]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    probe_info = report["probe"]
    total = len(model.main.ops)
    assert probe_info["status"] == "ok"
    assert (probe_info["ops_on_gpu"], probe_info["ops_on_cpu"]) == (total - lifted, lifted)
    assert probe_info["disagreements"] == []
    assert probe_info["compared"] == total and probe_info["agree"] == total
    on_cpu = {op["index"] for op in report["ops"] if op["probe_on_gpu"] is False}
    assert on_cpu == _lifted(model)
    for op in report["ops"]:
        if op["index"] in on_cpu:
            assert op["probe_reasons"] == [LINE]
    assert any("stands for" in note for note in probe_info["notes"])
    capsys.readouterr()
    assert main(["check", "--probe", str(path)]) == EXIT_OK
    text = " ".join(capsys.readouterr().out.split())
    assert f"{total - lifted} ops on GPU, {lifted} on CPU" in text
    assert "disagreement" not in text


@pytest.mark.gpu
def test_the_log_alone_names_the_ops_by_their_constant(gpu: str, tmp_path: Any) -> None:
    """The corpus agreement reads the log alone (no static verdicts): the accelerator describes
    each constant it cannot lay out (``dims: [1,1,4,4,8] isn't ...BHWC-convertible``), which
    names the MULs; without that description the ops the line may be about stay unknown,
    never all rejected, and the unexplained count is recorded."""
    model = _family(6, 2)
    result = probe(ir.dumps(model), cache_dir=tmp_path)
    assert result.log.rejections[0].reason == LINE.split(": ", 1)[1]
    assert result.log.unconvertible == [["FLOAT32", [1, 1, 4, 4, 8]]]
    probed = probe_op_verdicts(model, result)
    assert {k[1] for k, v in probed.items() if v.on_gpu is False} == _lifted(model)
    assert all(v.on_gpu is True for k, v in probed.items() if k[1] not in _lifted(model))
    assert not probed.count_mismatches
    assert compare(analyze(model).verdicts, probed).disagreements == []

    result.log.unconvertible = []  # a log without the description
    probed = probe_op_verdicts(model, result)
    muls = {op.index for op in model.main.ops if op.type == "MUL"}
    assert {k[1] for k, v in probed.items() if v.on_gpu is None} == muls
    assert all(v.on_gpu is True for k, v in probed.items() if k[1] not in muls)
    assert probed.count_mismatches and compare(analyze(model).verdicts, probed).disagreements == []
