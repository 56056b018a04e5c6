"""Index-like inputs get index-like values, and an inconclusive verdict says which comparison
and why, in the terminal, JSON and HTML. A model built with TensorFlow whose token ids arrive
as float32 (CAST to int32 before an embedding whose padding row 0 is zeros) and whose int32
length masks the tokens: random floats in [0, 1) all cast to the padding id, so the output is
the constant 0. Real runtime, real GPU accelerator (software GPU)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.cli import run_tflkit
from tests.truth_models import TOKENS, VOCAB, truth_models
from tflkit import ir
from tflkit.validation.inputs import make_input_sets


@pytest.fixture(scope="module")
def model():
    return truth_models() / "ids_float.tflite"


def test_ids_and_lengths_get_whole_numbers_in_their_span(model):
    sets = make_input_sets(ir.load(model), count=8, seed=0, kind="realistic")
    assert sets.kinds == {"token_ids": "index", "length": "length"}
    ids = np.stack([f["token_ids"] for f in sets.feeds])
    lengths = np.stack([f["length"] for f in sets.feeds])
    assert ids.dtype == np.float32 and np.array_equal(ids, np.round(ids))
    assert ids.min() >= 0 and ids.max() <= VOCAB - 1 and len(np.unique(ids)) > 50
    assert lengths.dtype == np.int32 and lengths.min() >= 1 and lengths.max() <= TOKENS
    ranges = {i["name"]: i["range"] for i in sets.to_json()["inputs"]}
    assert ranges == {"token_ids": [0, VOCAB - 1], "length": [1, TOKENS]}


@pytest.mark.gpu
def test_index_inputs_make_the_output_meaningful(model, gpu):
    done = run_tflkit("validate", str(model), "-n", "2", "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["verdict"] == "pass", report["findings"]
    for pair in report["comparisons"]:
        assert [o["verdict"] for o in pair["outputs"]] == ["pass"], pair["pair"]
    # the noise calibration left the ids as they were: fp32 noise of one ulp's size
    assert report["sensitivity"]["fp32"]["embedding"]["max_abs"] < 1e-5


@pytest.mark.gpu
def test_an_inconclusive_verdict_says_which_comparison_and_why(model, gpu, tmp_path):
    html = tmp_path / "report.html"
    done = run_tflkit(
        "validate", str(model), "-n", "2", "--input-kind", "random", "--html", str(html)
    )
    assert done.returncode == 1
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("verdict:")]
    assert line.startswith("verdict: inconclusive: nothing meaningful compared in cpu-fp16:cpu")
    assert "gpu-fp16:cpu" in line or "gpu-fp16:cpu" in done.stdout
    text = " ".join(done.stdout.split())
    assert "the expected output is the constant 0 on these inputs" in text
    assert "inputs length, token_ids got random data" in text
    page = html.read_text()
    assert "nothing meaningful compared in" in page and "constant 0" in page
    as_json = run_tflkit("validate", str(model), "-n", "2", "--input-kind", "random", "--json")
    report = json.loads(as_json.stdout)
    assert report["verdict"] == "inconclusive"
    (why,) = [f for f in report["findings"] if f.startswith("inconclusive: ")]
    for pair in ("cpu-fp16:cpu", "gpu-fp16:cpu", "gpu-fp32:cpu"):
        assert pair in why
    assert "output embedding" in why and "constant 0" in why
