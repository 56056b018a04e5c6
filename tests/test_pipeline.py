"""The README's demo pipeline on the bundled example: check -> rewrite -> check -> validate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tflkit.cli.main import EXIT_OK, main

EXAMPLE = Path(__file__).resolve().parents[1] / "tflkit" / "examples" / "tiny_classifier.tflite"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.gpu
def test_example_pipeline(gpu: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = EXAMPLE.read_bytes()
    fixed = tmp_path / "fixed.tflite"
    code, rewrite = run_json(capsys, "rewrite", str(EXAMPLE), "-o", str(fixed), "--probe")
    assert code == EXIT_OK and rewrite["written"]
    assert EXAMPLE.read_bytes() == original  # the input is never touched
    assert {f["rule"] for f in rewrite["fired"]} == {"log_softmax", "arg_int64_to_int32"}
    before, after = rewrite["static_before"], rewrite["static_after"]
    assert (before["gpu_ops"], before["total_ops"]) == (5, 7)
    assert (after["gpu_ops"], after["total_ops"]) == (12, 13)
    assert rewrite["probe_before"]["ops_on_gpu"] == 5
    assert rewrite["probe_after"]["ops_on_gpu"] == 12
    verification = rewrite["verification"]
    assert verification["ok"] and verification["problem"] is None
    by_dtype = {o["dtype"]: o for o in verification["outputs"]}
    assert by_dtype["int64"]["identical"]  # ARG_MAX in int32 picks the same class
    # x - max - log(sum(exp)) rounds like the CPU kernel, within a few ulp of its output
    assert 0 < by_dtype["float32"]["max_abs"] <= 1e-6 and by_dtype["float32"]["ok"]

    code, check = run_json(capsys, "check", "--probe", str(fixed))
    assert code == EXIT_OK
    (on_cpu,) = [op for op in check["ops"] if not op["on_gpu"]]
    assert on_cpu["type"] == "CAST" and on_cpu["probe_on_gpu"] is False
    assert check["probe"]["disagreements"] == []

    code, validate = run_json(capsys, "validate", str(fixed))
    assert code == EXIT_OK and validate["verdict"] == "pass"
    by_pair = {c["pair"]: c for c in validate["comparisons"]}
    fp16 = next(o for o in by_pair["gpu-fp16:cpu"]["outputs"] if o["name"] == "log_probs")
    # the example's head is wide enough for its classes to differ on photographs, so the fp16
    # comparison judges them (an untrained head's near-uniform output would be "not meaningful")
    assert fp16["verdict"] == "pass" and fp16["metrics"]["max_abs"] < fp16["bound"]
    fp32 = next(o for o in by_pair["gpu-fp32:cpu"]["outputs"] if o["name"] == "log_probs")
    assert fp32["verdict"] == "pass"
    label = next(o for o in by_pair["gpu-fp32:cpu"]["outputs"] if o["name"] == "label")
    assert label["verdict"] == "pass"  # the int64 output is read back and compared
