"""Rewrite TensorFlow-converted corpus models and real models; probe GPU residency before/after.

Prints, per model, ops on GPU / CPU and GPU partitions before and after, as the real accelerator
(software GPU) reports them. Models whose unsupported ops all have rules must end fully on GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tflkit import ir
from tflkit.gpu.probe import probe
from tflkit.report.rewrite_report import Residency
from tflkit.rewriter.run import rewrite_model

#: corpus model -> (input shapes to fix, op types allowed to stay on the CPU afterwards)
CORPUS = {
    "log_softmax": ({}, set()),
    "pack_same_tensor": ({}, set()),
    "gelu": ({}, set()),
    "conv_dense": ({}, set()),
    "int64_argmax": ({}, {"CAST"}),  # int64 graph output: the CAST at the edge stays on CPU
    "rank5": ({}, {"RESHAPE"}),  # 5-D graph input and output: their RESHAPEs stay on CPU
    "dynamic_batch": ({"x": [2, 8]}, set()),
    "sparse_weights": ({}, set()),  # DENSIFY folded
}


def _verified(outcome) -> None:
    """A changed model was verified on the CPU and holds; an unchanged one is the input."""
    if outcome.changed:
        assert outcome.verification is not None, "a rewritten model went unverified"
        assert outcome.verification.ok, outcome.verification.problem
    else:
        assert outcome.verification is None and outcome.passes.fired == []


def _residency(data: bytes, num_ops: int) -> Residency:
    return Residency.from_probe(probe(data, locate_crash=False), num_ops)


def _show(name: str, before: Residency, after: Residency, fired: list[str]) -> None:
    print(
        f"\n{name}: before {before.status} gpu={before.ops_on_gpu} cpu={before.ops_on_cpu} "
        f"partitions={before.partitions} | after {after.status} gpu={after.ops_on_gpu} "
        f"cpu={after.ops_on_cpu} partitions={after.partitions} | fired={fired}"
    )


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_model(name: str, corpus, gpu: str) -> None:
    shapes, residual = CORPUS[name]
    data = Path(corpus.path(name)).read_bytes()
    outcome = rewrite_model(data, input_shapes=shapes or None)
    _verified(outcome)
    fired = [f.rule for f in outcome.passes.fired]
    before = _residency(data, len(outcome.model.main.ops))
    after = _residency(outcome.rewritten, len(outcome.model.main.ops))
    _show(name, before, after, fired)
    assert after.status == "ok", after
    assert {r.split(":")[0] for r in after.rejections} <= residual
    if not residual:
        assert after.fully_accelerated
    again = rewrite_model(outcome.rewritten, check=False)
    assert again.passes.fired == []


@pytest.mark.gpu
def test_real_models(real_models: list[Path], gpu: str) -> None:
    for path in real_models:
        data = path.read_bytes()
        outcome = rewrite_model(data)
        _verified(outcome)
        before = _residency(data, len(outcome.model.main.ops))
        after = _residency(outcome.rewritten, len(outcome.model.main.ops))
        _show(path.name, before, after, [f.rule for f in outcome.passes.fired])
        assert after.status == "ok"
        assert (after.ops_on_cpu or 0) <= (before.ops_on_cpu or 0)


@pytest.mark.gpu
def test_sparse_model_ends_on_the_gpu(corpus, gpu: str) -> None:
    """A sparse model (the generated ``sparse_weights``: no real sparse model outside the reserved
    packages is known): its DENSIFY folds, every op runs on the GPU, bit-identical."""
    data = corpus.path("sparse_weights").read_bytes()
    outcome = rewrite_model(data)
    _verified(outcome)
    assert outcome.changed and {f.rule for f in outcome.passes.fired} == {"fold_densify"}
    assert all(o.identical for o in outcome.verification.outputs)
    before = _residency(data, len(ir.load(data).main.ops))
    after = _residency(outcome.rewritten, len(outcome.model.main.ops))
    _show("sparse_weights", before, after, [f.rule for f in outcome.passes.fired])
    assert before.ops_on_cpu and after.status == "ok" and after.fully_accelerated


def test_input_shape_fixes_shapes_known_only_at_run_time(world_models: dict[str, Path]) -> None:
    """BirdNET computes RESHAPE shapes from SHAPE/RANGE arithmetic that TFLite resolves only
    while running: fixed at --input-shape INPUT=1,144000 they must come from a real run (a
    RESHAPE to 2 elements broke the rewritten model before). Its STFT framing then folds
    (slice ends, RANGE limits), so the graph no longer fails to compile as a whole; its 2 MB
    table of frame indices (an ADD of constants) stays unfolded: the model would grow."""
    from tflkit.compat import static

    data = world_models["birdnet/BirdNET_GLOBAL_6K_V2.4_Model_FP32"].read_bytes()
    outcome = rewrite_model(data, input_shapes={"INPUT": [1, 144000]}, seeds=(0,))
    _verified(outcome)
    assert outcome.changed and outcome.dynamic_inputs == []
    fired = {f.rule for f in outcome.passes.fired}
    # the framing arithmetic folds op by op (fold_constants) or into its readers' inputs
    assert "fold_range" in fired and fired & {"fold_shape_inputs", "fold_constants"}
    assert not static.analyze(data).compiles and static.analyze(outcome.model).compiles
    assert any("grow the model" in s.reason for s in outcome.passes.skipped)
