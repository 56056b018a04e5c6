"""The opt-in streaming rewrite on a TensorFlow-converted streaming step (``streaming_kws``).

The original keeps a ring buffer of frames and a recurrent state in resource variables; after
``rewrite --rule streaming_state`` both are explicit inputs and outputs, the stateful original and
the stateless result agree bit for bit over a sequence of steps on the CPU, and the GPU
accelerator takes every op of the step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tflkit import ir
from tflkit.cli.main import main
from tflkit.gpu.probe import probe
from tflkit.rewriter.contract import EXACT
from tflkit.rewriter.rules.streaming import (
    PROOF_STEPS,
    RESOURCE_OPS,
    STATE_METADATA,
    verify_sequence,
)
from tflkit.rewriter.run import rewrite_model


@pytest.fixture(scope="module")
def streaming(corpus) -> tuple[bytes, bytes]:
    """(original, rewritten) bytes of the streaming corpus model."""
    data = Path(corpus.path("streaming_kws")).read_bytes()
    outcome = rewrite_model(data, rule_names=["streaming_state"])
    assert outcome.verification is not None and outcome.verification.ok
    return data, outcome.rewritten


def test_state_becomes_inputs_and_outputs(corpus, streaming: tuple[bytes, bytes]) -> None:
    original, rewritten = (ir.load(b) for b in streaming)
    assert {op.type for op in original.iter_ops()} >= set(RESOURCE_OPS)
    assert not {op.type for op in rewritten.iter_ops()} & set(RESOURCE_OPS)
    assert len(rewritten.subgraphs) == 1  # the initializer is gone
    plan = json.loads(rewritten.metadata_entry(STATE_METADATA).buffer.tobytes())["states"]
    assert sorted(s["variable"] for s in plan) == ["frames", "hidden"]
    shapes = {s["variable"]: s["shape"] for s in plan}
    assert shapes == {"frames": [1, 7, 40], "hidden": [1, 32]}
    assert all(s["output"] and s["initial"] == "zeros" for s in plan)
    sig = rewritten.signatures[0]
    assert {"state_frames", "state_hidden"} <= set(sig.inputs)
    assert {"state_frames_next", "state_hidden_next"} <= set(sig.outputs)
    assert PROOF_STEPS >= 20


def test_sequence_proof_holds_and_can_fail(streaming: tuple[bytes, bytes]) -> None:
    original, rewritten = streaming
    verdict = verify_sequence(original, rewritten, EXACT, steps=PROOF_STEPS, seed=5)
    assert verdict.ok and all(o.identical for o in verdict.outputs)
    # a plan that starts the ring buffer from ones instead of zeros must be caught
    model = ir.load(rewritten)
    document = json.loads(model.metadata_entry(STATE_METADATA).buffer.tobytes())
    for state in document["states"]:
        if state["variable"] == "frames":
            size = 1
            for d in state["shape"]:
                size *= d
            state["initial"], state["initial_values"] = "constant (see metadata)", [1.0] * size
    model.set_metadata(STATE_METADATA, json.dumps(document).encode())
    wrong = verify_sequence(original, ir.dumps(model), EXACT, steps=PROOF_STEPS)
    assert not wrong.ok and "differ beyond the contract" in (wrong.problem or "")


def test_cli_reports_how_to_feed_state(
    corpus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "stateless.tflite"
    args = ["rewrite", str(corpus.path("streaming_kws")), "-o", str(out), "--rule"]
    assert main([*args, "streaming_state", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verification"]["ok"]
    assert f"at each of {PROOF_STEPS} steps" in report["verification"]["contract"]
    fed = {s["input"]: s["output"] for s in report["streaming"]}
    assert fed == {"state/frames": "state/frames/next", "state/hidden": "state/hidden/next"}
    assert main([*args, "streaming_state"]) == 0
    text = capsys.readouterr().out
    assert "feed each state output back" in text and "first step: zeros" in text


@pytest.mark.gpu
def test_gpu_takes_the_whole_step(streaming: tuple[bytes, bytes], gpu: str) -> None:
    original, rewritten = streaming
    before = probe(original, locate_crash=False)
    assert before.log.ops_on_cpu, "the stateful step should leave variable ops on the CPU"
    after = probe(rewritten, locate_crash=False)
    assert after.status == "ok", after.log_text[-800:]
    assert after.log.rejections == [] and not after.log.ops_on_cpu
    assert after.is_fully_accelerated
