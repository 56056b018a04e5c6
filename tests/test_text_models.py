"""Text models end on one GPU partition after ``rewrite``: the family of ``tests/text_models.py``
(BERT-like, T5-like, word-level CNN and GRU taggers; int64 and int32 ids; with and without a
mask input), converted by the real TFLite converter.

CPU: each converted model has its lookup rejected (``[1, T]`` indices, int64 arithmetic); the
default rules fire (``int64_to_int32``, ``gather_flat_indices``), the result is verified against
the original on the CPU (bit-identical), and the static checker leaves on the CPU only the CASTs
at the edge where the app writes or reads int64 (none for int32 ids). GPU: the real accelerator
takes every other op in one partition and its fp32 outputs match the CPU's on real ids.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from tests import text_models
from tests.conftest_corpus import build_with_script, cache_root, tensorflow_version
from tests.needs import unavailable
from tests.text_models import FORMS, TextForm, feed
from tflkit import ir
from tflkit.compat.check import check_report
from tflkit.gpu.probe import run_jobs
from tflkit.rewriter.run import rewrite_model
from tflkit.rewriter.verify import run_cpu

IDS = [f.name for f in FORMS]
#: fp32 GPU against the CPU on the software GPU (measured: at most 9.5e-7 over the family; run
#: this test with -s to print each).
FP32_BOUND = 1e-4


@pytest.fixture(scope="session")
def text_dir() -> Path:
    version = tensorflow_version()
    if version is None:
        unavailable("TensorFlow is not importable: the text models cannot be built")
    source = Path(text_models.__file__).read_bytes()
    key = hashlib.sha256(source + (version or "").encode()).hexdigest()[:16]
    return build_with_script(
        Path(text_models.__file__),
        cache_root() / "text" / key,
        done_marker="DONE",
        what="text model",
    )


@pytest.fixture(scope="session")
def rewritten(text_dir: Path) -> dict[str, tuple[bytes, bytes, list[str]]]:
    """Each form: (original, rewritten, rules fired), verified on the CPU by ``rewrite``."""
    out = {}
    for form in FORMS:
        data = (text_dir / f"{form.name}.tflite").read_bytes()
        outcome = rewrite_model(data)
        assert outcome.verification is not None and outcome.verification.ok, form.name
        assert all(o.identical for o in outcome.verification.outputs), form.name
        out[form.name] = (data, outcome.rewritten, [f.rule for f in outcome.passes.fired])
    return out


def _edge_casts(model: ir.Model) -> set[int]:
    """Indices of the CASTs between an int64 graph input or output and an int32 value."""
    edge = set()
    for op in model.main.ops:
        if op.type != "CAST":
            continue
        src, dst = op.inputs[0], op.outputs[0]
        if (src.is_graph_input and src.type_name == "INT64") or (
            dst.is_observable and dst.type_name == "INT64"
        ):
            edge.add(op.index)
    return edge


def _on_cpu(data: bytes) -> tuple[ir.Model, set[int], int]:
    """The model, its ops the static checker leaves on the CPU, and its GPU partitions."""
    model = ir.load(data)
    report = check_report(model)
    cpu = {op.index for op in report.offending_ops if op.subgraph == 0}
    return model, cpu, report.gpu_partitions


@pytest.mark.parametrize("form", FORMS, ids=IDS)
def test_text_model_rewritten_to_one_partition(form: TextForm, rewritten) -> None:
    original, data, fired = rewritten[form.name]
    _, before, _ = _on_cpu(original)
    assert before, "the converted model's lookup must be rejected"
    assert "gather_flat_indices" in fired
    assert ("int64_to_int32" in fired) == (form.ids == "int64")
    model, cpu, partitions = _on_cpu(data)
    assert partitions == 1
    assert cpu == _edge_casts(model), [model.main.ops[i].type for i in cpu]
    if form.ids == "int32" and form.arch != "cnn_tagger":
        assert cpu == set()
    again = rewrite_model(data, check=False)
    assert again.passes.fired == []


@pytest.mark.gpu
def test_text_models_on_the_gpu(rewritten, gpu: str) -> None:
    names = [f.name for f in FORMS]
    feeds = [feed(f) for f in FORMS]
    jobs = run_jobs([rewritten[n][1] for n in names], feeds, enforce_f32=True)
    for form, job, one in zip(FORMS, jobs, feeds, strict=True):
        original, data, _ = rewritten[form.name]
        assert job.status == "ok" and job.outputs is not None, (form.name, job.error)
        model, cpu, _ = _on_cpu(data)
        edge = {model.main.ops[i].type for i in cpu}
        rejected = {line.split(":")[0] for line in job.log.splitlines() if ": " in line}
        assert job.fully_accelerated == (not edge), (form.name, job.log[-600:])
        assert not (rejected & {"GATHER", "LESS", "ADD", "SELECT", "SELECT_V2"}), job.log
        inputs = model.signatures[0].inputs
        _, want = run_cpu(original, {inputs[k].name: v for k, v in one.items()})
        for key, tensor in model.signatures[0].outputs.items():
            got, expected = job.outputs[key].reshape(want[tensor.name].shape), want[tensor.name]
            if expected.dtype.kind == "f":
                worst = float(np.abs(got - expected).max())
                print(f"{form.name}: {key} GPU fp32 vs CPU max abs {worst:.2e}; CPU ops {edge}")
                assert worst <= FP32_BOUND, form.name
            else:
                np.testing.assert_array_equal(got, expected, err_msg=form.name)
