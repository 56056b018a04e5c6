"""The accelerator's op counts as the user reads them: numbers when known, a word when not.

The accelerator prints its "N operations will run on the GPU, and the remaining M ..." line only
when it leaves ops on the CPU. A model it compiles without a rejection ran every op on the GPU:
``check --probe`` and ``regress record`` fill that in (all ops, 0) instead of null / "None".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tflkit.cli.main import EXIT_OK, main
from tflkit.report.regress_report import probe_counts


@pytest.mark.gpu
def test_fully_delegated_model_has_counts(
    gpu: str, corpus: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(corpus.path("conv_dense"))  # 3 ops, all taken: the log has no summary line
    assert main(["check", "--probe", "--json", path]) == EXIT_OK
    probe = json.loads(capsys.readouterr().out)["probe"]
    assert probe["status"] == "ok" and probe["disagreements"] == []
    assert (probe["ops_on_gpu"], probe["ops_on_cpu"]) == (3, 0)

    baseline = tmp_path / "baseline"
    args = ["regress", "record", path, "-o", str(baseline), "--runner", "cpu"]
    assert main(args) == EXIT_OK
    out = " ".join(capsys.readouterr().out.split())
    assert "probe ok: 3 on GPU, 0 on CPU" in out and "None" not in out, out
    stored = json.loads((baseline / "manifest.json").read_text())["residency"]["probe"]
    assert (stored["ops_on_gpu"], stored["ops_on_cpu"]) == (3, 0)


def test_counts_missing_from_a_baseline_are_words() -> None:
    """Baselines recorded before the counts were filled, and models that did not compile."""
    assert probe_counts({"status": "ok", "ops_on_gpu": None, "ops_on_cpu": None}) == (
        "all ops on GPU"
    )
    failed = {"status": "compile_error", "ops_on_gpu": None, "ops_on_cpu": None}
    assert probe_counts(failed) == "not compiled"
    assert probe_counts({"status": "ok", "ops_on_gpu": 5, "ops_on_cpu": 2}) == "5 on GPU, 2 on CPU"
