"""The int8-weight (hybrid) family and its float twins (``tests/int8_weight_models.py``): the
static verdict, the default rewrite and what the GPU computes.

Measured by ``PYTHONPATH=. python bench/int8_weights.py`` (table in ``docs/compat-rules.md``):
a CONV_2D reading int8 weights directly with a 1x1 kernel and a stride > 1, and a SAME
TRANSPOSE_CONV whose padding before the input the GPU computes otherwise, are wrong on the GPU
in fp32 and fp16 (by 93% to 210% of the output's peak); every other form is right (within 0.37%).
Here: the static verdict of every form (CPU), the rules' proof on every wrong form (CPU), and on
the GPU a slice of wrong forms and their right neighbours, before and after the default rewrite.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.int8_weight_models import FORM_BY_NAME, FORMS, Form
from tflkit import ir
from tflkit.compat.predicates.conv import gpu_same_padding_before, tflite_transpose_padding_before
from tflkit.compat.static import analyze
from tflkit.gpu.probe import run_jobs
from tflkit.ir.feeds import random_feed
from tflkit.rewriter.passes import run_passes
from tflkit.rewriter.rules import catalog
from tflkit.rewriter.run import checker_gate
from tflkit.rewriter.verify import run_cpu, verify

#: Relative error (of the output's peak) above which the GPU computed something else.
WRONG = 0.05
MISMATCH = "Shape mismatch in GpuModelBuilder"
RULES = {
    "CONV_2D": "int8_pointwise_float_weights",
    "TRANSPOSE_CONV": "transpose_conv_same_to_valid",
}


def wrong_on_gpu(form: Form, float_weights: bool = False) -> bool:
    """What the measurement found: the forms the GPU computes wrong (both precisions)."""
    if form.op == "CONV_2D":
        return not float_weights and form.kernel == 1 and form.strides != (1, 1)
    if form.op != "TRANSPOSE_CONV" or form.padding != "SAME":
        return False
    out = form.size * form.stride
    tflite = tflite_transpose_padding_before(form.size, form.kernel, form.stride, out)
    return tflite != gpu_same_padding_before(form.size, form.kernel, form.stride)


def _static_wrong(model: ir.Model) -> bool:
    verdict = analyze(model, "litert-gpu").verdicts[1]
    codes = [r.code for r in verdict.rejections]
    assert codes in ([], ["WRONG_RESULT"]), verdict.rejections
    return bool(codes)


@pytest.mark.parametrize("float_weights", [False, True], ids=["int8", "float_twin"])
def test_static_verdict_of_every_form(float_weights: bool) -> None:
    """386 models: the table says WRONG_RESULT exactly for the measured wrong forms, and
    nothing else about any op of the family."""
    seen = {f.name: _static_wrong(f.build(float_weights)) for f in FORMS}
    assert seen == {f.name: wrong_on_gpu(f, float_weights) for f in FORMS}
    assert sum(seen.values()) == (8 if float_weights else 37)


WRONG_FORMS = [f for f in FORMS if wrong_on_gpu(f)]


@pytest.mark.parametrize("form", WRONG_FORMS, ids=[f.name for f in WRONG_FORMS])
def test_default_rewrite_fixes_each_wrong_form(form: Form) -> None:
    """The default rewrite fires once on each wrong form, the checker then accepts every op,
    and the rule's contract holds on the CPU (bit-identical for TRANSPOSE_CONV)."""
    model = form.build()
    before = ir.dumps(model)
    result = run_passes(model, list(catalog().defaults()), gate=checker_gate("litert-gpu"))
    assert [f.rule for f in result.fired] == [RULES[form.op]]
    assert [v for v in analyze(model, "litert-gpu").verdicts if not v.ok] == []
    rule = next(r for r in catalog() if r.name == RULES[form.op])
    verdict = verify(before, ir.dumps(model), rule.contract, seeds=(0, 1, 2))
    assert verdict.ok, verdict.problem
    if rule.contract.exact:
        assert all(o.identical for o in verdict.outputs)


def test_right_forms_are_left_alone() -> None:
    """No GPU rule fires on a form the GPU computes right; the CPU-side rule fires exactly on
    the forms the CPU computes wrong (the per-tensor depthwise ones)."""
    from tflkit.compat.cpu_kernels import cpu_kernel_hazards

    right = [f for f in FORMS if not wrong_on_gpu(f)]
    for form in right:
        model = form.build()
        cpu_wrong = bool(cpu_kernel_hazards(model))
        result = run_passes(model, list(catalog().defaults()), gate=checker_gate("litert-gpu"))
        fired = [f.rule for f in result.fired]
        assert fired == (["depthwise_int8_scale_per_channel"] if cpu_wrong else []), form.name


#: Wrong forms and their right neighbours, on the GPU (a slice: the bench runs them all).
GPU_SLICE = [
    "int8w_conv_k1_s2_same_d1_pc_b1",
    "int8w_conv_k1_s2x1_valid_d1_pc_b1",
    "int8w_conv_k1_s1_same_d1_pc_b1",
    "int8w_conv_k3_s2_same_d1_pt_b1",
    "int8w_dw_k1_s2_same_d1_pc_b2",
    "int8w_fc_pt_b2",
    "int8w_tconv_k3_s2_same_pc_b1",
    "int8w_tconv_k2_s2_same_pc_b1",
    "int8w_tconv_k3_s2_valid_pc_b1",
]


def _rel(data: bytes, feed: dict, job) -> float:
    assert job.status == "ok" and job.outputs is not None, (job.status, job.error)
    (want,) = run_cpu(data, feed)[1].values()
    (got,) = job.outputs.values()
    return float(np.abs(got.reshape(want.shape) - want).max() / np.abs(want).max())


@pytest.mark.gpu
@pytest.mark.parametrize("enforce_f32", [True, False], ids=["fp32", "fp16"])
def test_gpu_slice_before_and_after_the_rewrite(gpu: str, enforce_f32: bool) -> None:
    """Before: the wrong forms part from the CPU's float twin by their whole peak (and the
    accelerator logs a shape mismatch), their neighbours within 1%. After the default rewrite
    every form agrees with the CPU within 1%, with no shape mismatch where it was wrong."""
    forms = [FORM_BY_NAME[n] for n in GPU_SLICE]
    originals = [ir.dumps(f.build()) for f in forms]
    twins = [ir.dumps(f.build(float_weights=True)) for f in forms]
    rewritten = []
    for form in forms:
        model = form.build()
        run_passes(model, list(catalog().defaults()), gate=checker_gate("litert-gpu"))
        rewritten.append(ir.dumps(model))
    feeds = [random_feed(ir.load(d).main.inputs, 0) for d in originals]
    jobs = run_jobs(originals + rewritten, feeds + feeds, enforce_f32=enforce_f32)
    for i, form in enumerate(forms):
        before, after = jobs[i], jobs[len(forms) + i]
        wrong = wrong_on_gpu(form)
        assert (_rel(twins[i], feeds[i], before) > WRONG) == wrong, form.name
        if wrong:
            assert MISMATCH in before.log, form.name
            assert MISMATCH not in after.log, form.name
        assert _rel(twins[i], feeds[i], after) < 0.02, form.name


@pytest.mark.gpu
def test_check_validate_and_repro_tell_the_truth(gpu: str, tmp_path, capsys) -> None:
    """The report's model, reduced to its op: check says it is not GPU-ready (WRONG_RESULT,
    fix: the rule) and the probe shows the accelerator's shape-mismatch line; validate fails
    in both precisions, notes the line on each GPU runner and says fp16 is not the cause; the
    repro says fp16 and fp32 and its script runs fp32."""
    import json

    from tflkit.cli.main import main
    from tflkit.gpu.log import parse_gpu_log

    line = (
        "W0000 00:00:1.0  1 gpu_model_builder.cc:3901] Shape mismatch in GpuModelBuilder::"
        "UpdateOutputTensors(output of convolution1x1(conv_generic)). Requested shape:{bhwdc, "
        "{1, 8, 8, 1, 16}} vs reference shape: {bhwdc, {1, 15, 15, 1, 16}}"
    )
    assert parse_gpu_log(line).shape_mismatches == [line.split("] ", 1)[1]]
    path = tmp_path / "pointwise.tflite"
    path.write_bytes(ir.dumps(FORM_BY_NAME["int8w_conv_k1_s2_same_d1_pc_b1"].build()))
    assert main(["check", str(path), "--probe", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert not report["gpu_ready"] and report["summary"].startswith("not GPU-ready")
    (conv,) = [op for op in report["ops"] if op["type"] == "CONV_2D"]
    assert conv["status"] == "rejected" and conv["fix"]["rule"] == RULES["CONV_2D"]
    assert any(MISMATCH in w for w in report["probe"]["warnings"])
    repro = tmp_path / "repro"
    args = ["validate", str(path), "-r", "cpu", "-r", "gpu-fp16", "-r", "gpu-fp32", "-n", "1"]
    assert main([*args, "--repro", str(repro), "--json"]) == 1
    checked = json.loads(capsys.readouterr().out)
    runners = {r["runner"]: r for r in checked["runners"]}
    for name in ("gpu-fp16", "gpu-fp32"):
        assert any("wrong-result signal" in n for n in runners[name]["notes"]), runners[name]
    assert any("gpu-fp32 fails too" in n for n in checked["notes"]), checked["notes"]
    readme = (repro / "README.md").read_text()
    assert readme.startswith("# LiteRT GPU accelerator (fp16 and fp32): CONV_2D")
    assert "enforce_f32=True" in (repro / "repro.py").read_text()


def test_check_and_validate_say_when_the_cpu_is_the_one_wrong(gpu: str, tmp_path, capsys) -> None:
    """A per-tensor int8 DEPTHWISE_CONV_2D: check stays GPU-ready and notes that the CPU computes
    the op wrong; validate says so beside its GPU-vs-CPU verdicts."""
    import json

    from tflkit.cli.main import main

    path = tmp_path / "depthwise.tflite"
    path.write_bytes(ir.dumps(FORM_BY_NAME["int8w_dw_k3_s1_same_d1_pt_b1"].build()))
    assert main(["check", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["gpu_ready"], report["summary"]
    (issue,) = [i for i in report["issues"] if i["code"] == "CPU_WRONG_RESULT"]
    assert issue["op_index"] == 1 and not issue["fatal"] and "the CPU's" in issue["message"]
    args = ["validate", str(path), "-r", "cpu", "-r", "gpu-fp32", "-n", "1", "--json"]
    main(args)
    checked = json.loads(capsys.readouterr().out)
    assert any(n.startswith("op #1 DEPTHWISE_CONV_2D: its int8 weights") for n in checked["notes"])


def test_inspect_warns_of_ops_computed_wrong() -> None:
    """Once "no GPU warnings" on the report's model; now a WRONG_ON_GPU warning names the op."""
    from tflkit.inspection import inspect_model

    report = inspect_model(FORM_BY_NAME["int8w_conv_k1_s2_same_d1_pc_b1"].build())
    (warning,) = [w for w in report.warnings if w.code == "WRONG_ON_GPU"]
    assert warning.items == ["#1 CONV_2D"]
    right = inspect_model(FORM_BY_NAME["int8w_conv_k1_s1_same_d1_pc_b1"].build())
    assert not [w for w in right.warnings if w.code == "WRONG_ON_GPU"]


def test_cpu_kernel_hazard_is_named_exactly_where_the_cpu_computes_wrong() -> None:
    """Measured here on the CPU, every form of the family: the hybrid kernel against the float
    twin (what the weights mean). ``cpu_kernel_hazards`` names the op exactly where the CPU is
    off by more than half the output's peak (the per-tensor DEPTHWISE_CONV_2D forms), and
    nowhere the CPU is within its own int8 rounding (at most 0.0087 of the peak)."""
    from tflkit.compat.cpu_kernels import cpu_kernel_hazards

    named, off = {}, {}
    for form in FORMS:
        model = form.build()
        data, twin = ir.dumps(model), ir.dumps(form.build(float_weights=True))
        feed = random_feed(model.main.inputs, 0)
        got = next(iter(run_cpu(data, feed)[1].values())).astype(np.float64)
        want = next(iter(run_cpu(twin, feed)[1].values())).astype(np.float64)
        rel = float(np.abs(got - want).max() / np.abs(want).max())
        assert rel > 0.5 or rel < 0.02, (form.name, rel)
        off[form.name] = rel > 0.5
        named[form.name] = bool(cpu_kernel_hazards(model))
    assert named == off
    assert sum(off.values()) == 32
