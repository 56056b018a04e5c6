"""``validate --steps`` on the other layouts litert-torch 0.10's generative API exports: the
attention mask as an input (``ExportConfig(mask_as_input=True)``), the transposed KV cache
(``kvcache_layout=KV_LAYOUT_TRANSPOSED``: K ``[1, kv_heads, cache, head_dim]``, V
``[1, kv_heads, head_dim, cache]``) and no prefill signature at all (``prefill_seq_len=[]``: the
prompt runs through ``decode`` one token per call), the way some Android apps export their LLM.

The variants (``tests/corpus/llm_build.py``: ``VARIANTS``) are tinyllama with its seed-0 weights,
so their logits must match ``tinyllama.tflite``'s, and PyTorch's
(``tests/corpus/llm_torch_reference.py``). A tiny IR-built decode graph checks the mask builder
and the cache-length detection where the cache (6) is shorter than the head (8).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.cli import run_tflkit
from tests.corpus import llm_build
from tests.corpus.llm_torch_reference import reference_logits
from tflkit import ir
from tflkit.errors import UsageError
from tflkit.ir import schema
from tflkit.ir.builder import OpBuilder
from tflkit.ir.graph import SignatureDef
from tflkit.validation.steps import (
    causal_mask,
    cpu_call,
    kv_program,
    prompt_tokens,
    recorded_feed,
    recording,
    run_steps,
)

fb = schema.fb
VARIANTS = tuple(llm_build.VARIANTS)
STEPS = 4
F32_MIN = float(np.finfo(np.float32).min)


def _variant(llm_corpus: Path, name: str) -> dict:
    base = llm_build.VARIANTS[name][0]
    return json.loads((llm_corpus / "MANIFEST.json").read_text())[base]["variants"][name]


# ------------------------------------------------------------------ the exported variants


@pytest.mark.parametrize("name", VARIANTS)
def test_kv_program_finds_mask_transposed_cache_and_prefill_or_none(name, llm_corpus):
    entry = _variant(llm_corpus, name)
    assert entry["export_config"] == {
        "mask_as_input": True,
        "kvcache_layout": "KV_LAYOUT_TRANSPOSED",
    }
    program = kv_program(ir.load(llm_corpus / entry["file"]))
    s, heads, dim = entry["kv_cache_len"], entry["kv_heads"], entry["head_dim"]
    assert program.cache_len == s and program.cache_len_from == "the mask input's last axis"
    assert program.mask == "mask" and program.mask_specs["decode"] == (
        "mask",
        (1, 1, 1, s),
        "float32",
    )
    for n in program.cache:  # K is BNTH, V is BNHT: the DYNAMIC_UPDATE_SLICE axis says so
        want = (1, heads, s, dim) if "_k_" in n else (1, heads, dim, s)
        assert program.cache_specs[n] == (want, "float32"), n
        assert program.seq_axes[n] == (2 if "_k_" in n else 3), n
    if entry["prefill_lens"]:
        assert (program.prefill, program.prefill_len, program.prompt_calls) == ("prefill_8", 8, 1)
        assert program.mask_specs["prefill_8"] == ("mask", (1, 1, 8, s), "float32")
    else:  # decode-only: an 8-token prompt through decode, 7 calls before step 0
        assert (program.prefill, program.prefill_len, program.prompt_calls) == (None, 8, 7)
        # the old guess (the longest axis of the shortest cache) took the head dim here
        assert s < dim == min(max(shape) for shape, _ in program.cache_specs.values())


def test_variants_compute_what_tinyllama_and_pytorch_compute(llm_corpus):
    """Same weights, another layout: the variants' CPU logits equal tinyllama.tflite's (measured
    bit-identical on XNNPACK) and PyTorch's (measured within 5.4e-7, logits up to ~1)."""
    base = (llm_corpus / "tinyllama.tflite").read_bytes()
    program = kv_program(ir.load(base))
    prompt = prompt_tokens(program)
    want, tokens = run_steps(cpu_call(base), program, prompt, STEPS)
    for name in VARIANTS:
        data = (llm_corpus / f"{name}.tflite").read_bytes()
        variant = kv_program(ir.load(data))
        assert list(prompt_tokens(variant)) == list(prompt)
        got, own = run_steps(cpu_call(data), variant, prompt, STEPS, tokens)
        assert own == tokens, name
        assert max(float(np.abs(a - b).max()) for a, b in zip(got, want, strict=True)) < 1e-5
        truth = reference_logits(name, prompt, STEPS, tokens)  # torch, transposed, mask passed
        assert [int(t.argmax()) for t in truth] == tokens, name
        assert max(float(np.abs(a - b).max()) for a, b in zip(got, truth, strict=True)) < 1e-5


@pytest.mark.parametrize("name", VARIANTS)
def test_validate_steps_cli_runs_the_variant_on_the_cpu(name, llm_corpus):
    done = run_tflkit(
        "validate", str(llm_corpus / f"{name}.tflite"), "--steps", "4",
        "-r", "cpu", "-r", "cpu-ref", "-r", "cpu-fp16", "--json",
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    report = json.loads(done.stdout)
    assert report["ok"] and len(report["cpu_tokens"]) == 4
    assert report["program"]["prefill"] == ("prefill_8" if "tkv" in name else None)
    for runner, bound in (("cpu-ref", 1e-5), ("cpu-fp16", 0.05)):
        per = report["runs"][runner]["per_step"]
        assert [s["step"] for s in per] == [0, 1, 2, 3]
        assert all(s["max_abs"] < bound and s["token"] == s["cpu_token"] for s in per), per
    # fp16 hazards: one list per decode step, the prompt's calls kept apart
    assert len(report["runs"]["cpu-fp16"]["executed"]["step_hazards"]) == 4
    path = str(llm_corpus / f"{name}.tflite")
    text = run_tflkit("validate", path, "--steps", "2", "-r", "cpu").stdout
    assert "mask input 'mask'" in " ".join(text.split())
    if "decode_only" in name:
        assert "one token per call (no prefill signature" in " ".join(text.split())


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS)
def test_validate_steps_cli_on_the_gpu_after_tflkit_rewrite(name, gpu, llm_corpus, tmp_path):
    """LiteRT 2.3 on lavapipe dies compiling odml.* composites; ``tflkit rewrite`` inlines them
    by default. Measured: gpu-fp32 within 6.3e-7 of the CPU, gpu-fp16 within 2.6e-3."""
    out = tmp_path / f"{name}_inlined.tflite"
    done = run_tflkit("rewrite", str(llm_corpus / f"{name}.tflite"), "-o", str(out))
    assert done.returncode == 0 and out.is_file(), done.stderr[-2000:]
    assert "STABLEHLO_COMPOSITE" not in {op.type for g in ir.load(out).subgraphs for op in g.ops}
    done = run_tflkit(
        "validate", str(out), "--steps", "4", "-r", "cpu", "-r", "gpu-fp16", "-r", "gpu-fp32",
        "--json",
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert done.returncode == 0, json.dumps(report["runs"])[-3000:]
    for runner, bound in (("gpu-fp32", 1e-4), ("gpu-fp16", 2e-2)):
        run = report["runs"][runner]
        assert run["status"] == "ok" and run["executed"]["adapter"], run
        assert all(0 <= s["max_abs"] < bound for s in run["per_step"]), (runner, run["per_step"])
        assert run["first_part"] is None and run["tokens"] == report["cpu_tokens"]


# ------------------------------------------------------------------ a tiny IR-built decode graph


def tiny_decode(
    cache: int = 6, heads: int = 2, dim: int = 8, *, mask: str | None = "mask", extra: str = ""
) -> bytes:
    """A decode-only graph in litert-torch's transposed layout: K ``[1, heads, cache, dim]`` and
    V ``[1, heads, dim, cache]`` written at ``input_pos`` with the token's value; logits
    ``[1, 1, cache]``: per cache position the sum of K (heads * dim * the token stored there)
    plus the mask. Greedy = the position holding the largest token so far. ``mask`` names a
    float32 ``[1, 1, 1, cache]`` input (or an int32 one if it starts with ``int:``); ``extra`` an
    input tflkit cannot feed."""
    model = ir.Model()
    graph = model.add_subgraph("decode")
    b = OpBuilder(graph, prefix="tiny")
    inputs = {
        "tokens": graph.new_tensor("tokens", (1, 1), np.int32),
        "input_pos": graph.new_tensor("input_pos", (1,), np.int32),
        "kv_cache_k_0": graph.new_tensor("k", (1, heads, cache, dim), np.float32),
        "kv_cache_v_0": graph.new_tensor("v", (1, heads, dim, cache), np.float32),
    }
    if mask is not None:
        dtype = np.int32 if mask.startswith("int:") else np.float32
        inputs[mask.removeprefix("int:")] = graph.new_tensor("mask", (1, 1, 1, cache), dtype)
    if extra:
        inputs[extra] = graph.new_tensor(extra, (1, 4), np.float32)
    graph.inputs = list(inputs.values())
    value = b.CAST(inputs["tokens"], options=fb.CastOptionsT(), dtype=np.float32)
    zero = np.int32([0])
    pos = inputs["input_pos"]
    at_k = b.CONCATENATION(
        zero, zero, pos, zero, options=fb.ConcatenationOptionsT(axis=0), shape=(4,)
    )
    at_v = b.CONCATENATION(
        zero, zero, zero, pos, options=fb.ConcatenationOptionsT(axis=0), shape=(4,)
    )
    k_up = b.MUL(np.ones((1, heads, 1, dim), np.float32), value, options=fb.MulOptionsT())
    v_up = b.MUL(np.ones((1, heads, dim, 1), np.float32), value, options=fb.MulOptionsT())
    k = b.DYNAMIC_UPDATE_SLICE(inputs["kv_cache_k_0"], k_up, at_k, name="k_out")
    v = b.DYNAMIC_UPDATE_SLICE(inputs["kv_cache_v_0"], v_up, at_v, name="v_out")
    scores = b.SUM(
        k, np.int32([1, 3]), options=fb.ReducerOptionsT(keepDims=False), shape=(1, cache)
    )
    if mask is not None and not mask.startswith("int:"):
        flat = b.RESHAPE(inputs[mask], np.int32([1, cache]), shape=(1, cache))
        scores = b.ADD(scores, flat, options=fb.AddOptionsT())
    logits = b.RESHAPE(scores, np.int32([1, 1, cache]), shape=(1, 1, cache), name="logits")
    graph.outputs = [logits, k, v]
    outputs = {"logits": logits, "kv_cache_k_0": k, "kv_cache_v_0": v}
    model.signatures.append(SignatureDef("decode", graph, inputs, outputs))
    return ir.dumps(model)


def test_causal_mask_is_zero_up_to_the_position_and_float_min_after():
    m = causal_mask((1, 1, 1, 5), "float32", [2])
    assert m.dtype == np.float32 and m.shape == (1, 1, 1, 5)
    assert m[0, 0, 0].tolist() == [0, 0, 0, F32_MIN, F32_MIN]
    block = causal_mask((1, 1, 3, 4), "float32", range(3))  # prefill's [T, S] block
    assert (block[0, 0] == np.triu(np.full((3, 4), F32_MIN, np.float32), 1)).all()
    half = causal_mask((1, 1, 1, 3), "float16", [0])
    assert half.dtype == np.float16 and half[0, 0, 0].tolist() == [0, -65504.0, -65504.0]


def test_cache_length_from_the_mask_and_from_the_update_axis_not_the_longest_axis():
    with_mask = kv_program(ir.load(tiny_decode()))
    assert (with_mask.cache_len, with_mask.cache_len_from) == (6, "the mask input's last axis")
    assert dict(with_mask.seq_axes) == {"kv_cache_k_0": 2, "kv_cache_v_0": 3}
    assert min(max(s) for s, _ in with_mask.cache_specs.values()) == 8  # the old guess: head dim
    without = kv_program(ir.load(tiny_decode(mask=None)))
    assert without.cache_len == 6 and "DYNAMIC_UPDATE_SLICE" in without.cache_len_from
    assert without.mask is None and without.prefill is None
    # decode-only, cache 6: a 5-token prompt (4 decode calls), then up to 2 steps
    assert (without.prefill_len, without.prompt_calls) == (5, 4)


def test_tiny_decode_only_model_runs_with_the_mask_built_each_step():
    data = tiny_decode()
    program = kv_program(ir.load(data))
    prompt = np.int32([3, 1, 4, 1, 5])  # 4 tokens at positions 0..3 through decode, then steps
    logits, greedy = run_steps(cpu_call(data), program, prompt, 2, forced=[2, 0])
    for k, (got, pos) in enumerate(zip(logits, (4, 5), strict=True)):
        stored = [*prompt, 2][: pos + 1]
        want = [16.0 * t for t in stored] + [F32_MIN] * (6 - pos - 1)
        assert got.tolist() == want, k
    assert greedy == [4, 4]  # the position of the largest stored token (5, at position 4)


def test_localize_recording_skips_the_prompt_calls_of_a_decode_only_model(tmp_path):
    data = tiny_decode()
    program = kv_program(ir.load(data))
    call = recording(cpu_call(data), program, tmp_path)
    run_steps(call, program, np.int32([3, 1, 4, 1, 5]), 2, forced=[2, 0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_0.npz", "step_1.npz"]
    step0, step1 = recorded_feed(tmp_path, 0), recorded_feed(tmp_path, 1)
    assert step0["input_pos"].tolist() == [4] and step0["tokens"].tolist() == [[5]]
    assert step0["mask"][0, 0, 0].tolist() == [0, 0, 0, 0, 0, F32_MIN]
    assert step1["mask"][0, 0, 0].tolist() == [0] * 6


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"extra": "lora_scale"}, ["'lora_scale' [1, 4] float32", "cannot feed", "mask/"]),
        ({"mask": "int:mask"}, ["'mask' is [1, 1, 1, 6] int32", "float32 or float16"]),
    ],
)
def test_inputs_it_cannot_feed_are_usage_errors_naming_them(kwargs, words, tmp_path):
    data = tiny_decode(**kwargs)
    with pytest.raises(UsageError) as caught:
        kv_program(ir.load(data))
    assert all(w in str(caught.value) for w in words), str(caught.value)
    path = tmp_path / "tiny.tflite"
    path.write_bytes(data)
    done = run_tflkit("validate", str(path), "--steps", "1")
    assert done.returncode == 2 and "Traceback" not in done.stderr + done.stdout
    assert words[0] in " ".join((done.stderr + done.stdout).split())
