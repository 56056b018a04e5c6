"""Fused activations on every op type that has the option (``tests/fused_activation_models.py``):
the static verdict, what the CPU computes and what the GPU computes.

Measured by ``PYTHONPATH=. python bench/fused_activations.py`` (table in
``docs/compat-rules.md``): LiteRT's CPU kernels of CONV_2D, DEPTHWISE_CONV_2D, ADD, SUB, MUL, DIV,
AVERAGE_POOL_2D and MAX_POOL_2D ignore a fused TANH while the GPU applies it, so those eight
(op, TANH) pairs part (by 83% to 99% of the peak, fp32); every other pair agrees, and the CPU
refuses FULLY_CONNECTED with TANH or SIGN_BIT and CONCATENATION with any activation.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.fused_activation_models import FORMS, Form, cpu_runs, feed_for
from tflkit import ir
from tflkit.compat.predicates.activations import TANH_IGNORED_ON_CPU
from tflkit.compat.static import analyze
from tflkit.gpu.probe import run_jobs
from tflkit.rewriter.passes import run_passes
from tflkit.rewriter.rules import catalog
from tflkit.rewriter.run import checker_gate
from tflkit.rewriter.verify import run_cpu

#: Relative error (of the CPU output's peak) above which the two compute different results.
PARTS = 0.01


def parts(form: Form) -> bool:
    """What the measurement found: the pairs where CPU and GPU compute different results."""
    return form.activation == "TANH" and form.op in TANH_IGNORED_ON_CPU


def _codes(form: Form) -> list[str]:
    return [str(r.code) for r in analyze(form.build(), "litert-gpu").verdicts[0].rejections]


def test_static_verdict_of_every_form() -> None:
    """60 models: WRONG_RESULT exactly on the eight pairs that part, and it is their only
    rejection; SIGN_BIT keeps its own verdict (the GPU does not implement it)."""
    wrong = {f.name: "WRONG_RESULT" in _codes(f) for f in FORMS}
    assert wrong == {f.name: parts(f) for f in FORMS}
    for form in FORMS:
        if parts(form):
            assert _codes(form) == ["WRONG_RESULT"], form.name
    message = analyze(FORMS[4].build(), "litert-gpu").verdicts[0].rejections[0].message
    assert FORMS[4].name == "conv_2d_tanh"
    assert "CPU kernels ignore it and the GPU applies it" in message
    assert "No rewrite fixes it" in message


@pytest.mark.parametrize("op", sorted(TANH_IGNORED_ON_CPU))
def test_cpu_ignores_a_fused_tanh(op: str) -> None:
    """The CPU side of the measurement: the TANH form computes exactly the NONE form."""
    tanh, none = (ir.dumps(Form(op, act).build()) for act in ("TANH", "NONE"))
    feed = feed_for(none)
    (with_tanh,) = run_cpu(tanh, feed)[1].values()
    (without,) = run_cpu(none, feed)[1].values()
    assert np.array_equal(with_tanh, without)
    assert np.abs(without).max() > 2.0  # tanh would have changed it


def test_no_rule_fires_on_the_wrong_forms() -> None:
    """No rewrite can be proven equal on the CPU (it ignores the TANH): none fires."""
    for form in FORMS:
        if parts(form):
            model = form.build()
            result = run_passes(model, list(catalog().defaults()), gate=checker_gate("litert-gpu"))
            assert result.fired == [], form.name


@pytest.mark.gpu
def test_gpu_applies_the_tanh_the_cpu_ignores(gpu: str) -> None:
    """Every form the CPU runs, on the GPU in fp32 (one batch): the eight pairs part from the
    CPU and the GPU's output is tanh of the CPU's; every other pair agrees within 1e-5."""
    forms = [f for f in FORMS if cpu_runs(f)]
    datas = [ir.dumps(f.build()) for f in forms]
    feeds = [feed_for(d) for d in datas]
    jobs = run_jobs(datas, feeds, enforce_f32=True)
    for form, data, feed, job in zip(forms, datas, feeds, jobs, strict=True):
        assert job.status == "ok" and job.outputs is not None, (form.name, job.status, job.error)
        (want,) = run_cpu(data, feed)[1].values()
        (got,) = job.outputs.values()
        got = got.reshape(want.shape)
        rel = float(np.abs(got - want).max() / np.abs(want).max())
        assert (rel > PARTS) == parts(form), (form.name, rel)
        if parts(form):
            assert np.allclose(got, np.tanh(want), atol=1e-5), form.name
        else:
            assert rel < 1e-5, (form.name, rel)
