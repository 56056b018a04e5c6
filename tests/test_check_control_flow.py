"""Control flow and resource variables: the static verdicts match the accelerator op by op.

Measured on the LiteRT GPU accelerator (ai-edge-litert 2.3, lavapipe): IF, WHILE, CALL_ONCE and
the resource-variable ops stay on the CPU; every subgraph they call is delegated as a graph of
its own. wyoming-openwakeword's hey_jarvis_v0.1 (an ONNX export) has a RESHAPE whose shape input
is an empty [0] tensor (a scalar result): the accelerator takes it and runs 25 of the 26
main-graph ops, so a "compilation fails for the whole model" verdict was false, and the probe
must call such a claim a disagreement.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tflkit import ir
from tflkit.cli.main import EXIT_OK, main
from tflkit.compat.check import check_report
from tflkit.compat.probe_verdicts import attach_probe
from tflkit.gpu.probe import probe

JARVIS = "openwakeword/hey_jarvis_v0.1"
STATE_OPS = {"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"}


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["check", "--json", *args]) == EXIT_OK
    return json.loads(capsys.readouterr().out)


def _cpu_ops(report: dict[str, Any], key: str) -> set[tuple[int, int]]:
    return {(op["subgraph"], op["index"]) for op in report["ops"] if op[key] is False}


def test_if_model_static_verdict(world_models: dict[str, Path], capsys: Any) -> None:
    report = _check(capsys, str(world_models[JARVIS]))
    assert report["compiles"], report["summary"]
    on_cpu = [op for op in report["ops"] if not op["on_gpu"]]
    assert [(op["subgraph"], op["type"]) for op in on_cpu] == [(0, "IF")]
    fix = on_cpu[0]["fix"]
    assert fix["kind"] == "none" and "its subgraphs run on the GPU" in fix["summary"]
    body = next(s for s in report["subgraphs"] if s["role"] == "body" and s["ops"])
    assert body["gpu_ops"] == body["ops"] == 26  # the branch is a GPU graph of its own


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name", [JARVIS, "resource_variables", "streaming_kws", "while_loop", "keras_gru"]
)
def test_cpu_ops_are_exactly_the_accelerators(
    gpu: Any, name: str, world_models: dict[str, Path], corpus: Any, capsys: Any
) -> None:
    """``check`` names exactly the ops the accelerator leaves on the CPU, in every subgraph
    (CALL_ONCE initialisers, WHILE bodies, IF branches included)."""
    path = world_models[name] if name == JARVIS else corpus.path(name)
    report = _check(capsys, "--probe", str(path))
    probe_info = report["probe"]
    assert probe_info["status"] == "ok" and probe_info["model_agrees"] is True
    assert probe_info["disagreements"] == [] and probe_info["agree"] == probe_info["compared"]
    rejected = {(op["subgraph"], op["index"]) for op in report["ops"] if not op["supported"]}
    assert rejected == _cpu_ops(report, "probe_on_gpu"), name
    if name in ("resource_variables", "streaming_kws"):  # the state has one fix, initialiser
        state = [op for op in report["ops"] if op["type"] in STATE_OPS]  # included
        assert state and all(op["fix"]["rule"] == "streaming_state" for op in state)
        assert {op["fix"]["kind"] for op in state} == {"opt_in_rule"}
    if name == "keras_gru":
        loop = next(op for op in report["ops"] if op["type"] == "WHILE")
        assert loop["fix"]["kind"] == "convert" and "RNN as WHILE" in loop["fix"]["summary"]


@pytest.mark.gpu
def test_a_false_whole_model_failure_claim_is_a_disagreement(
    gpu: Any, world_models: dict[str, Path]
) -> None:
    """The claim "compilation fails for the whole model" says no op runs on the GPU; the
    accelerator ran 25 main-graph ops and the IF's branch: each is a disagreement."""
    path = world_models[JARVIS]
    model = ir.load(path)
    report = check_report(model)
    report.compiles = False  # what the table said before it knew empty shape tensors
    attach_probe(report, model, probe(path))
    assert report.probe is not None and report.probe.model_agrees is False
    wrong = {(d.subgraph, d.op_index) for d in report.probe.disagreements}
    ran = {(op.subgraph, op.index) for op in report.ops if op.probe_on_gpu}
    assert wrong == ran and len([k for k in ran if k[0] == 0]) == 25
    assert "but the accelerator compiles it" in report.summary
