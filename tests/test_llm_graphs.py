"""On-device LLM graphs: tiny decoder-only transformers exported by litert-torch 0.10's generative
API with ``prefill_8`` and ``decode`` signatures and an external KV cache
(``tests/corpus/llm_build.py``: Gemma, TinyLlama, Qwen and Phi-2 configurations with random
weights). ``inspect`` and ``check`` per signature with the composites named, and
``validate --steps`` feeding the cache back step by step.

The corpus is built once into the test cache by the builder's own environment (torch 2.13,
litert-torch 0.10, tensorflow-cpu; made with venv + pip on first use), keyed by a hash of the
builder script (``tests/corpus/llm_steps.py``). LiteRT 2.3's GPU accelerator dies compiling the
composites on lavapipe, so the GPU figures are taken with the composites inlined (rewrite rule
``inline_composite``, proven in ``tests/test_rule_composite.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.cli import run_tflkit
from tests.corpus import llm_build
from tests.corpus.llm_steps import inlined
from tflkit import ir
from tflkit.ir import schema
from tflkit.ir.builder import OpBuilder
from tflkit.report.steps_report import steps_lines
from tflkit.validation.steps import kv_program, steps_report

fb = schema.fb
ARCHS = llm_build.ARCHS
#: litert-torch 0.10 writes Phi-2's layer norm as odml.group_norm
DECODE_COMPOSITES = {"odml.scaled_dot_product_attention", "odml.rms_norm", "odml.group_norm"}


def test_corpus_builds_small_prefill_decode_graphs(llm_corpus):
    manifest = json.loads((llm_corpus / "MANIFEST.json").read_text())
    assert sorted(manifest) == sorted(ARCHS)
    norms = {entry["norm"] for entry in manifest.values()}
    assert {"RMS_NORM", "LAYER_NORM"} <= norms  # Gemma/Llama/Qwen and Phi-2 differ
    for arch, entry in manifest.items():
        path = llm_corpus / entry["file"]
        assert path.stat().st_size < 20_000_000
        program = kv_program(ir.load(path))
        assert (program.prefill, program.decode) == ("prefill_8", "decode"), arch
        assert program.cache == ("kv_cache_k_0", "kv_cache_k_1", "kv_cache_v_0", "kv_cache_v_1")
        assert program.vocab == entry["vocab"] and program.cache_len == entry["kv_cache_len"]


@pytest.mark.parametrize("arch", ["gemma", "phi2"])
def test_check_names_composites_and_reports_decode_first(arch, llm_corpus):
    done = run_tflkit("check", str(llm_corpus / f"{arch}.tflite"), "--json")
    report = json.loads(done.stdout)
    names = {s["index"]: s["name"] for s in report["subgraphs"]}
    decode = next(i for i, n in names.items() if n == "decode")
    composites = [
        o for o in report["ops"] if o["type"] == "STABLEHLO_COMPOSITE" and o["subgraph"] == decode
    ]
    assert composites
    assert all(o["composite"]["name"] in DECODE_COMPOSITES for o in composites), composites
    assert all(o["composite"]["name"] in o["why"] for o in composites)
    assert not any("composite ''" in json.dumps(o) for o in report["ops"])
    # the decode graph (the one that runs per token) comes first in the terminal report
    assert [s["name"] for s in report["subgraphs"]][:2] == ["decode", "prefill_8"]
    text = run_tflkit("check", str(llm_corpus / f"{arch}.tflite")).stdout
    assert "1 decode (signature)" in text
    every = run_tflkit("check", str(llm_corpus / f"{arch}.tflite"), "--all").stdout
    listed = re.findall(r"^\s+(\d+):\d+\s", every, re.M)  # "  1:0     RESHAPE v1 ..."
    assert listed[0] == str(decode) and "0" in listed, listed[:3]
    assert "odml.scaled_dot_product_attention (attention" in " ".join(every.split())


def test_inspect_lists_both_signatures_and_composites(llm_corpus):
    done = run_tflkit("inspect", str(llm_corpus / "qwen.tflite"))
    assert done.returncode == 0, done.stderr
    for word in ("prefill_8", "decode", "kv_cache_k_0", "logits", "STABLEHLO_COMPOSITE"):
        assert word in done.stdout
    assert "odml.rms_norm" in done.stdout and "odml.scaled_dot_product_attention" in done.stdout


def test_validate_steps_reports_per_step_figures(llm_corpus):
    done = run_tflkit(
        "validate", str(llm_corpus / "tinyllama.tflite"), "--steps", "4", "-r", "cpu-fp16", "--json"
    )
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout[-2000:]
    assert report["ok"] and report["steps"] == 4 and len(report["cpu_tokens"]) == 4
    run = report["runs"]["cpu-fp16"]
    assert [s["step"] for s in run["per_step"]] == [0, 1, 2, 3]
    for step in run["per_step"]:
        # fp16 storage moves the logits a little (measured ~1e-3), never to a different token
        assert 0 < step["max_abs"] < 0.05 and step["token"] == step["cpu_token"]
    assert run["first_part"] is None


@pytest.mark.gpu
def test_validate_steps_on_the_gpu_says_what_happened(gpu, llm_corpus):
    """Measured with LiteRT 2.3 on lavapipe: the accelerator dies (SIGSEGV) compiling these
    graphs at their first composite; the report says so, in the compile stage."""
    report = steps_report(
        (llm_corpus / "qwen.tflite").read_bytes(), "qwen", 2, runners=("cpu", "gpu-fp32")
    )
    run = report.runs["gpu-fp32"]
    assert run["executed"]["adapter"], run
    if run["status"] != "ok":
        assert run["status"] in {"crashed", "compile_error"}, run
        assert "compile" in run["error"] and run["executed"]["stage"] == "compile"
        assert any("STABLEHLO_COMPOSITE" in note for note in run["notes"]), run["notes"]


@pytest.mark.gpu
@pytest.mark.parametrize("arch", ["qwen", "phi2"])
def test_validate_steps_runs_on_the_gpu_with_composites_inlined(arch, gpu, llm_corpus, tmp_path):
    data = inlined((llm_corpus / f"{arch}.tflite").read_bytes())  # rule inline_composite
    report = steps_report(data, arch, 4, runners=("cpu", "gpu-fp16", "gpu-fp32"))
    for name, bound in (("gpu-fp32", 1e-4), ("gpu-fp16", 2e-2)):
        run = report.runs[name]
        assert run["status"] == "ok", run
        assert run["executed"]["software_adapter"] is True
        assert [s["step"] for s in run["per_step"]] == [0, 1, 2, 3]
        assert all(0 < s["max_abs"] < bound for s in run["per_step"]), (name, run["per_step"])
        assert run["first_part"] is None and run["tokens"] == report.cpu_tokens


def _plant_overflow(src: Path, dst: Path, from_position: int) -> str:
    """A copy of ``src`` whose decode graph multiplies the input of layer 1's pre-attention RMS
    norm by 1e9 from ``from_position`` on (by 1 before): fp32 holds it and the norm undoes it,
    fp16 overflows to inf. Returns the last planted MUL's output name."""
    model = ir.load(src)
    decode = next(s for s in model.signatures if s.key == "decode")
    graph = decode.subgraph
    norms = [
        op
        for op in graph.ops
        if op.type == "STABLEHLO_COMPOSITE" and op.options2.name == b"odml.rms_norm"
    ]
    norm = norms[2]  # layer 0 pre-attention, layer 0 pre-MLP, then layer 1 pre-attention
    x = norm.inputs[0]
    b = OpBuilder(graph, before=norm, prefix="planted")
    pos = b.CAST(decode.inputs["input_pos"], options=fb.CastOptionsT(), dtype=np.float32)
    on = b.MINIMUM(
        b.MAXIMUM(
            b.SUB(pos, np.float32([from_position - 1]), options=fb.SubOptionsT()), np.float32([0.0])
        ),
        np.float32([1.0]),
    )
    # every constant fits fp16 (an fp16 GPU stores 1e5 as inf); three multiplies make 1e9
    factor = b.ADD(
        b.MUL(on, np.float32([999.0]), options=fb.MulOptionsT()),
        np.float32([1.0]),
        options=fb.AddOptionsT(),
    )
    scaled = x
    for i in range(3):
        scaled = b.MUL(scaled, factor, options=fb.MulOptionsT(), name=f"overflow{i}")
    norm.set_input(0, scaled)
    ir.save(model, dst)
    return scaled.name


def test_planted_fp16_overflow_is_found_at_its_step_and_op(llm_corpus, tmp_path):
    src = llm_corpus / "qwen.tflite"
    program = kv_program(ir.load(src))
    planted_step = 2
    dst = tmp_path / "qwen_planted.tflite"
    planted = _plant_overflow(src, dst, program.prefill_len - 1 + planted_step)
    report = steps_report(dst.read_bytes(), "planted", 4, runners=("cpu", "cpu-fp16"))
    clean = steps_report(src.read_bytes(), "clean", 4, runners=("cpu", "cpu-fp16"))
    assert clean.cpu_tokens == report.cpu_tokens  # fp32 holds the planted scale
    run = report.runs["cpu-fp16"]
    part = run["first_part"]
    assert part is not None and part["step"] == planted_step, run["per_step"]
    assert all(np.isfinite(s["max_abs"]) for s in run["per_step"][:planted_step])
    # the first planted multiply whose output leaves fp16's range (x * 1e3 * 1e3 here)
    first = part["ops"][0]
    assert (first["op_type"], first["signature"]) == ("MUL", "decode"), part
    assert first["output"].startswith(planted.rsplit("overflow", 1)[0] + "overflow"), part
    assert "overflows fp16" in first["what"]
    lines = "\n".join(steps_lines(report))
    assert f"parts from the CPU at step {planted_step}" in lines
    assert "fix: cpu-fp16 part: add -r gpu-fp32" in lines
    assert clean.fix is None


@pytest.mark.gpu
def test_planted_fp16_overflow_shows_on_the_gpu_at_its_step(gpu, llm_corpus, tmp_path):
    src = llm_corpus / "qwen.tflite"
    program = kv_program(ir.load(src))
    planted_step = 2
    dst = tmp_path / "qwen_planted.tflite"
    _plant_overflow(src, dst, program.prefill_len - 1 + planted_step)
    data = inlined(dst.read_bytes())  # the accelerator crashes on the composites themselves
    report = steps_report(data, "planted", 4, runners=("cpu", "gpu-fp16", "gpu-fp32"))
    fp16, fp32 = report.runs["gpu-fp16"], report.runs["gpu-fp32"]
    assert fp16["status"] == "ok" and fp32["status"] == "ok", (fp16, fp32)
    assert fp16["first_part"]["step"] == planted_step, fp16["per_step"]
    assert all(np.isfinite(s["max_abs"]) for s in fp16["per_step"][:planted_step])
    assert fp32["first_part"] is None  # fp32 on the GPU holds it: the fix LiteRT offers
    assert report.fix is not None and report.fix.startswith("run the GPU in fp32"), report.fix
    assert f"fix: {report.fix}" in steps_lines(report)
    assert report.to_json()["fix"] == report.fix
