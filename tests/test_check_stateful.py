"""``check``'s GPU op count against the accelerator's on graphs with side effects.

LiteRT partitions with a chain between the ops that have side effects (resource variables,
IF, WHILE, CALL_ONCE; ``tensorflow/lite/graph_info.cc``), so a READ_VARIABLE that follows an
ASSIGN_VARIABLE cannot be scheduled before it, and the GPU ops around them split into two
partitions of which the accelerator takes only the largest. Data flow alone says one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tflkit import ir
from tflkit.cli.main import main
from tflkit.compat import partition
from tflkit.compat.check import check_report

#: Corpus models with ops the runtime treats as having side effects.
STATEFUL = ("resource_variables", "streaming_kws", "if_cond", "while_loop", "keras_gru")
#: A real model with an IF in its main graph.
WORLD_STATEFUL = "openwakeword/hey_jarvis_v0.1"


def interleaved_kws(corpus: Any, out: Path) -> Path:
    """``streaming_kws`` with its ops in the order of its Python source, the order TF's automatic
    control dependencies give: the frame buffer is assigned (ASSIGN_VARIABLE) before the hidden
    state is read (READ_VARIABLE). The converter put that read first; a streaming model whose
    layers each read, update and assign their own buffer has this order throughout."""
    model = ir.load(corpus.path("streaming_kws").read_bytes())
    graph = model.main
    read_hidden = next(op for op in graph.ops if op.type == "READ_VARIABLE" and op.index > 3)
    assign_frames = next(op for op in graph.ops if op.type == "ASSIGN_VARIABLE")
    new_frames = assign_frames.inputs[1].producer
    assert new_frames is not None and new_frames.type == "STRIDED_SLICE"
    for op in (new_frames, assign_frames):
        graph.remove_op(op)
    graph.insert_op(read_hidden.index, new_frames)
    graph.insert_op(read_hidden.index, assign_frames)
    assert not ir.verify_model(model)
    path = out / "streaming_kws_interleaved.tflite"
    ir.save(model, path)
    return path


def _probe_json(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    code = main(["check", "--json", "--probe", str(path)])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def _main_gpu_ops(report: dict[str, Any]) -> int:
    return next(s["gpu_ops"] for s in report["subgraphs"] if s["index"] == 0)


def test_side_effect_ops_are_the_runtimes(corpus: Any) -> None:
    """The ops the runtime chains: RESOURCE tensors in or out, and control flow."""
    model = ir.load(corpus.path("streaming_kws").read_bytes())
    chained = [(op.index, op.type) for op in partition.side_effect_ops(model.main.ops)]
    assert chained == [
        (0, "CALL_ONCE"),
        (1, "VAR_HANDLE"),
        (2, "VAR_HANDLE"),
        (3, "READ_VARIABLE"),
        (9, "READ_VARIABLE"),
        (19, "ASSIGN_VARIABLE"),
        (23, "ASSIGN_VARIABLE"),
    ]


def test_the_chain_splits_the_interleaved_step(
    corpus: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Statically: the order of the stateful ops cuts the GPU ops in two (6 and 13 ops; the
    delegate takes the 13), where data flow alone puts all 19 in one partition."""
    model = ir.load(interleaved_kws(corpus, tmp_path))
    report = check_report(model)
    gpu = [p for p in report.partitions if p.subgraph == 0 and p.device == "gpu"]
    assert [len(p.ops) for p in gpu] == [13]
    assert report.subgraphs[0].gpu_ops == 13
    monkeypatch.setattr(partition, "side_effect_ops", lambda ops: [])
    assert check_report(model).subgraphs[0].gpu_ops == 19  # the old, data-flow-only count


@pytest.mark.gpu
def test_gpu_op_count_matches_the_accelerator_on_stateful_models(
    gpu: str,
    corpus: Any,
    world_models: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``check``'s main-graph GPU op count equals the one the accelerator prints, on every
    stateful corpus model and the interleaved streaming step (13: fails with data flow only)."""
    paths = {name: corpus.path(name) for name in STATEFUL}
    paths[WORLD_STATEFUL] = world_models[WORLD_STATEFUL]
    paths["streaming_kws_interleaved"] = interleaved_kws(corpus, tmp_path)
    seen = {}
    for name, path in paths.items():
        report = _probe_json(capsys, path)
        assert report["probe"]["status"] == "ok", (name, report["probe"])
        seen[name] = (_main_gpu_ops(report), report["probe"]["ops_on_gpu"])
    assert all(static == probed for static, probed in seen.values()), seen
    assert seen["streaming_kws_interleaved"] == (13, 13)
    assert seen["streaming_kws"] == (19, 19)
