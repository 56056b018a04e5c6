"""``validate --steps`` with a prompt shorter than the prefill signature: litert-torch's own
``toy_model_with_kv_cache`` (a 100-token ``prefill`` filling its 100-position cache; built with the
bundle corpus, ``tests/corpus/llm_bundle_build.py``) was refused ("the cache holds 100 positions
and the prompt 100, so 1..1 decode steps fit"). A short prompt is padded into the prefill as
LiteRT-LM pads it (its tokens at positions 0.., padding after them, the causal mask), so the
steps run whenever the prompt and the steps fit the cache.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from tests.cli import run_tflkit
from tflkit import ir
from tflkit.errors import UsageError
from tflkit.validation.llm_program import kv_program, prompt_tokens, with_prompt
from tflkit.validation.steps import cpu_call, run_steps


@pytest.fixture(scope="module")
def toy(llm_bundles):
    return llm_bundles / "toy_model_with_kv_cache.tflite"


@pytest.mark.parametrize("length", [2, 8, 40])
def test_a_padded_prompt_gives_what_the_prompt_token_by_token_gives(toy, length):
    """The padding slots never reach a logit: the same prompt run through ``decode`` one token
    per call (no prefill, no padding) gives the same logits at every step."""
    data = toy.read_bytes()
    program = with_prompt(kv_program(ir.load(data)), 8, length)
    assert program.prompt_length == length and program.prefill_len == 100
    prompt = prompt_tokens(program, seed=0)
    padded, tokens = run_steps(cpu_call(data), program, prompt, 8)
    one_by_one = dataclasses.replace(program, prefill=None)
    plain, tokens_plain = run_steps(cpu_call(data), one_by_one, prompt, 8)
    assert tokens == tokens_plain
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(padded, plain, strict=True))
    assert worst <= 1e-5, worst
    shifted = prompt.copy()
    shifted[0] = (shifted[0] + 1) % program.vocab  # the check can see a different prompt
    other, _ = run_steps(cpu_call(data), one_by_one, shifted, 8)
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(padded, other, strict=True)) > 1e-3


def test_validate_steps_8_runs_the_toy_model(toy):
    done = run_tflkit("validate", str(toy), "--steps", "8", "-r", "cpu", "-r", "cpu-ref", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["program"]["prompt_len"] == 93  # the longest that leaves room for 8 steps
    assert len(report["prompt"]) == 93 and len(report["cpu_tokens"]) == 8
    assert report["runs"]["cpu-ref"]["first_part"] is None
    text = " ".join(run_tflkit("validate", str(toy), "--steps", "8", "-r", "cpu").stdout.split())
    assert "after a 93-token prompt padded into prefill (100 tokens" in text


def test_prompts_that_do_not_fit_are_usage_errors(toy):
    program = kv_program(ir.load(toy.read_bytes()))
    with pytest.raises(UsageError, match="the cache holds 100 positions"):
        with_prompt(program, 100, 2)
    with pytest.raises(UsageError, match="takes 100"):
        with_prompt(dataclasses.replace(program, cache_len=200), 8, 101)
    done = run_tflkit("validate", str(toy), "--steps", "101")
    assert done.returncode == 2 and "the cache holds 100 positions" in done.stderr
