"""``validate``'s three kinds of subject (a ``.tflite``, its ``--steps`` program, a ``.litertlm``
bundle) take one command line: an option that does not apply to the kind given is refused in one
line, exit 2, before anything runs (``tflkit.cli.subjects``), never ignored. Real processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import run_tflkit
from tflkit.cli.subjects import KINDS, NOT_TAKEN

EXAMPLE = Path(__file__).resolve().parents[1] / "tflkit" / "examples" / "tiny_classifier.tflite"


def _refused(done, option: str, kind: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    line = done.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, line
    assert line.startswith(f"tflkit: error: {option} does not apply to {KINDS[kind]} ("), line
    assert line.endswith("nothing ran"), line


def test_every_option_applies_to_some_kind_and_the_tables_name_real_options() -> None:
    text = " ".join(run_tflkit("validate", "--help").stdout.split())
    refused = set().union(*NOT_TAKEN.values())
    for option in refused:
        assert option in text, option
        assert any(option not in NOT_TAKEN[k] for k in KINDS), option


def test_a_tflite_refuses_a_bundles_prompts() -> None:
    _refused(run_tflkit("validate", str(EXAMPLE), "--prompt", "hello"), "--prompt", "tflite")


@pytest.mark.parametrize(
    ("option", "value"),
    [("--html", "out.html"), ("--tolerance", "fp16@rtol=1"), ("--inputs", "x.npz"),
     ("--reference", "ref.npz"), ("--repro", "repro")],
)  # fmt: skip
def test_steps_refuses_what_only_a_tflite_takes(llm_corpus, tmp_path, option, value) -> None:
    model = llm_corpus / "tinyllama.tflite"
    done = run_tflkit("validate", str(model), "--steps", "2", option, str(tmp_path / value))
    _refused(done, option, "steps")
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize(
    ("option", "value"), [("--runner", "cpu"), ("--html", "out.html"), ("--localize", None)]
)
def test_a_bundle_refuses_what_its_engine_does_not_take(llm_bundles, tmp_path, option, value):
    args = [option] + ([] if value is None else [str(tmp_path / value)])
    done = run_tflkit("validate", str(llm_bundles / "tkv_int8_sp.litertlm"), *args)
    _refused(done, option, "bundle")
