"""Texts the engine scores sized to the bundle's context: the engine refuses to score a text of
as many tokens as the context ("Input token ids are too long ... 48 >= 48"; measured on the
32-token test bundles: 31 tokens scored, 32 refused, whatever the prompt's length), and a
continuation's text can take more tokens than were decoded (``<unk>`` decodes to five
characters). The text is cut to fit, and the output says so."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.needs import require_module
from tflkit.bundle.engine import context_length, run_engine, unreadable_prompts


def test_the_context_is_where_the_engine_reads_it(llm_bundles: Path) -> None:
    assert context_length(llm_bundles / "tkv_int8_hf.litertlm") == 32
    # litert-torch's default layout: the engine reads the head count as the context
    assert context_length(llm_bundles / "default_int8_hf.litertlm") == 2


def test_a_text_longer_than_the_context_is_scored_cut_to_it(llm_bundles: Path) -> None:
    require_module("litert_lm", "llm")
    text = " ".join(list("abcdefghijklmnopqrstuvwxyz") * 2)
    result = run_engine(
        llm_bundles / "tkv_int8_hf.litertlm",
        "cpu",
        ["the weather today is"],
        score={0: [text]},
        max_output_tokens=4,
        timeout=300,
    )
    assert result.status == "ok", (result.status, result.error)
    (out,) = result.outputs
    assert int(out["scored_cut_from"]) >= 32
    assert 0 < out["scored"].size < 32 and np.isfinite(out["scored"]).all()


def test_a_prompt_the_bundles_tokenizer_does_not_know_is_a_finding(llm_bundles: Path) -> None:
    """The corpus's SentencePiece bundle reads English, not Japanese: the Japanese prompt's ids
    read back as unknown pieces and the run says so; the English one is read as it is."""
    require_module("litert_lm", "llm")
    prompts = ["the weather today is", "日本語のテキスト です"]
    result = run_engine(
        llm_bundles / "tkv_int8_sp_small.litertlm", "cpu", prompts, max_output_tokens=2
    )
    assert result.status == "ok", (result.status, result.error)
    found = unreadable_prompts(result)
    assert len(found) == 1 and "日本語" in found[0] and "read back as" in found[0], found


def test_the_continuation_leaves_room_in_the_context(llm_bundles: Path) -> None:
    """Asked for more tokens than the 32-token context holds after the prompt, the engine
    decodes what fits (the prompt, its start token and the continuation), and scores it."""
    require_module("litert_lm", "llm")
    prompt = "once upon a time there was"
    result = run_engine(llm_bundles / "tkv_int8_hf.litertlm", "cpu", [prompt], max_output_tokens=64)
    assert result.status == "ok", (result.status, result.error)
    (out,) = result.outputs
    room = 32 - len(out["prompt_ids"]) - 2
    assert 0 < out["scores"].size <= room and np.isfinite(out["scores"]).all()
