"""``validate``'s three kinds of subject (a ``.tflite``, its ``--steps`` program, a ``.litertlm``
bundle) take one command line: an option that does not apply to the kind given is refused in one
line, exit 2, before anything runs (``tflkit.cli.subjects``), never ignored; ``--html`` and
``--json`` give every kind its page and its document. Real processes, the real engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_tflkit
from tflkit.cli.subjects import NOT_TAKEN
from tflkit.validation.pipeline import KINDS

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
    [("--model-explorer", "me.json"), ("--tolerance", "fp16@rtol=1"), ("--inputs", "x.npz"),
     ("--reference", "ref.npz"), ("--repro", "repro")],
)  # fmt: skip
def test_steps_refuses_what_only_a_tflite_takes(llm_corpus, tmp_path, option, value) -> None:
    model = llm_corpus / "tinyllama.tflite"
    done = run_tflkit("validate", str(model), "--steps", "2", option, str(tmp_path / value))
    _refused(done, option, "steps")
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize(
    ("option", "value"),
    [("--runner", "cpu"), ("--model-explorer", "me.json"), ("--localize", None)],
)
def test_a_bundle_refuses_what_its_engine_does_not_take(llm_bundles, tmp_path, option, value):
    args = [option] + ([] if value is None else [str(tmp_path / value)])
    done = run_tflkit("validate", str(llm_bundles / "tkv_int8_sp.litertlm"), *args)
    _refused(done, option, "bundle")


def test_steps_writes_its_html_page_beside_its_json(llm_corpus, tmp_path) -> None:
    page = tmp_path / "steps.html"
    args = ("validate", str(llm_corpus / "tinyllama.tflite"), "--steps", "2", "-r", "cpu-fp16")
    done = run_tflkit(*args, "--json", "--html", str(page))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    html = page.read_text()
    assert 'data-verdict="pass"' in html and 'data-runner="cpu-fp16"' in html
    for step in report["runs"]["cpu-fp16"]["per_step"]:
        assert f'data-step="{step["step"]}"' in html
        assert f'data-value="{step["max_abs"]!r}"' in html


@pytest.mark.gpu
def test_a_bundle_writes_its_html_page(llm_bundles, gpu, tmp_path) -> None:
    page = tmp_path / "bundle.html"
    bundle = llm_bundles / "tkv_int8_sp.litertlm"
    junit = tmp_path / "bundle.xml"
    done = run_tflkit("validate", str(bundle), "--prompt", "the weather", "--json", "--html",
                      str(page), "--junit", str(junit), timeout=900)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    report, html = json.loads(done.stdout), page.read_text()
    for name, run in report["runs"].items():
        assert f'<tr data-runner="{name}">' in html and f'data-verdict="{run["how"]}"' in html
    for name, items in report["comparisons"].items():
        for c in items:
            assert f'data-value="{c["worst_score_delta"]!r}"' in html, (name, c)
    cases = _cases(junit)
    assert {f"engine {name}" for name in report["runs"]} <= set(cases)
    faults = [c for items in report["comparisons"].values() for c in items if c["fault"]]
    assert sum(1 for v in cases.values() if v == "fail") >= len(faults)


def _cases(path: Path) -> dict[str, str]:
    """JUnit test case -> "pass", "fail" or "skipped"."""
    import xml.etree.ElementTree as ET

    found = {}
    for case in ET.parse(path).iter("testcase"):
        kinds = [child.tag for child in case]
        found[case.get("name")] = "fail" if "failure" in kinds else (
            "skipped" if "skipped" in kinds else "pass")  # fmt: skip
    return found


def test_a_tflite_and_its_steps_write_junit(llm_corpus, tmp_path) -> None:
    """A failing output is a failing test case (every bound at 0 fails the fp16 emulation), one
    case per runner and per pair x output; a steps run has one case per runner."""
    junit = tmp_path / "tflite.xml"
    args = ("validate", str(EXAMPLE), "-r", "cpu", "-r", "cpu-fp16", "-n", "1", "--json")
    done = run_tflkit(*args, "--tolerance", "all@atol=0,rtol=0", "--junit", str(junit))
    assert done.returncode == 1, done.stderr
    report, cases = json.loads(done.stdout), _cases(junit)
    want = {f"{p['pair']} output {o['name']}": o["verdict"] for p in report["comparisons"]
            for o in p["outputs"]}  # fmt: skip
    assert "fail" in want.values() and {k: cases[k] for k in want} == want
    assert cases["runner cpu"] == cases["runner cpu-fp16"] == "pass"
    steps = tmp_path / "steps.xml"
    model = llm_corpus / "tinyllama.tflite"
    done = run_tflkit(
        "validate", str(model), "--steps", "2", "-r", "cpu-fp16", "--junit", str(steps)
    )
    assert done.returncode == 0, done.stderr
    assert _cases(steps) == {"runner cpu-fp16 (2 steps)": "pass"}
