"""Texts the engine scores sized to the bundle's context: the engine refuses to score a text of
as many tokens as the context ("Input token ids are too long ... 48 >= 48"; measured on the
32-token test bundles: 31 tokens scored, 32 refused, whatever the prompt's length), and a
continuation's text can take more tokens than were decoded (``<unk>`` decodes to five
characters). The text is cut to fit, and the output says so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tflkit.bundle.engine import context_length, run_engine


def test_the_context_is_where_the_engine_reads_it(llm_bundles: Path) -> None:
    assert context_length(llm_bundles / "tkv_int8_hf.litertlm") == 32
    # litert-torch's default layout: the engine reads the head count as the context
    assert context_length(llm_bundles / "default_int8_hf.litertlm") == 2


def test_a_text_longer_than_the_context_is_scored_cut_to_it(llm_bundles: Path) -> None:
    pytest.importorskip("litert_lm")
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
