"""``check --probe`` per signature: every signature of a multi-signature model compiled alone on
the GPU accelerator (an LLM graph's ``decode`` first: it runs once per token), a crash bisected
within that signature's own subgraph (:func:`tflkit.gpu.probe.probe_signatures`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_tflkit
from tests.conftest_corpus import REPO
from tflkit import ir
from tflkit.compat.probe_verdicts import probe_each_signature
from tflkit.gpu.probe import probe_signatures, signature_model, signature_order
from tflkit.rewriter.rules.composite import inline_all


@pytest.fixture(scope="module")
def gemma_path(llm_corpus: Path) -> Path:
    return llm_corpus / "gemma.tflite"


def test_signature_model_keeps_the_ops_and_names(gemma_path):
    model = ir.load(gemma_path)
    assert signature_order(model) == ["decode", "prefill_8"]  # prefill_8 is subgraph 0
    data, names = signature_model(model, "decode")
    alone = ir.load(data)
    decode = model.signature("decode")
    assert [op.type for op in alone.main.ops] == [op.type for op in decode.subgraph.ops]
    assert names == {k: t.name for k, t in decode.inputs.items()}
    # the empty shape of a RESHAPE to a scalar (INT32[0], no producer) is no input
    assert all(0 not in tuple(t.shape) for t in alone.main.inputs)
    assert len(alone.subgraphs) > 1  # the composites' decompositions came along
    one = ir.load(REPO / "tflkit" / "examples" / "tiny_classifier.tflite")
    assert probe_signatures(one) == {}  # one signature: the whole-model probe is that


@pytest.mark.gpu
def test_check_probe_reports_each_signature_decode_first(gpu, gemma_path, tmp_path):
    """Measured, LiteRT 2.3 on lavapipe: each signature alone crashes at its first
    odml.rms_norm composite, decode's at its op 20, prefill_8's at its op 21."""
    done = run_tflkit("check", str(gemma_path), "--probe", "--json")
    report = json.loads(done.stdout)
    found = report["probe"]["signatures"]
    assert [s["signature"] for s in found] == ["decode", "prefill_8"]
    assert [s["subgraph"] for s in found] == [1, 0]
    for one, op in zip(found, (20, 21), strict=True):
        assert one["status"] == "crashed", one
        assert one["crash"]["op_type"] == "STABLEHLO_COMPOSITE odml.rms_norm", one
        assert one["crash"]["op_index"] == op and "SIGSEGV" in one["crash"]["message"]
    graph = ir.load(gemma_path).signature("decode").subgraph
    assert graph.ops[20].type == "STABLEHLO_COMPOSITE"  # an index into decode's own subgraph
    assert (
        "per signature: decode crashes at STABLEHLO_COMPOSITE odml.rms_norm (op 20)"
        in (report["summary"])
    )
    assert report["gpu_ready"] is False
    page = tmp_path / "check.html"
    text = run_tflkit("check", str(gemma_path), "--probe", "--html", str(page)).stdout  # cached
    table = page.read_text().split('id="probe-signatures"', 1)[1].split("</table>", 1)[0]
    assert table.index('<td class="l">decode</td>') < table.index("prefill_8"), table
    lines = [line for line in text.splitlines() if line.startswith("signature ")]
    assert lines[0].startswith("signature decode (subgraph 1, compiled alone): crashes"), text
    assert "prefill_8" in lines[1]


@pytest.mark.gpu
def test_each_signature_compiles_with_the_composites_inlined(gpu, gemma_path):
    model = ir.load(gemma_path)
    inline_all(model)
    found = probe_each_signature(model)
    assert [p.signature for p in found] == ["decode", "prefill_8"]
    for one in found:
        assert one.status == "ok" and one.crash is None, one
        assert one.total_ops == len(model.signature(one.signature).subgraph.ops)
        assert 0 < one.ops_on_gpu < one.total_ops  # the accelerator takes one partition
        assert "GATHER_ND" in one.cpu_op_types  # the causal mask's lookup by position
    assert found[0].line().startswith("decode (subgraph 1, compiled alone): ok")
