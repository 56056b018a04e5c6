"""The CI examples a team pastes into theirs (``docs/ci/``) run here: their steps in order
(``tests/ci_steps.py``), in a fresh directory holding a user's models, with the wheel just built
as the package; they install tflkit, find the software GPU, record and check the baselines, run
the pytest plugin, and leave JUnit and the HTML report where the artifacts are collected."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests import ci_steps, package_env
from tests.package_fixtures import Built

DOCS = package_env.ROOT / "docs" / "ci"
FILES = ("github-actions.yml", "gitlab-ci.yml")

SUITE = """\
[defaults]
jobs = 1

[[models]]
name = "classifier"
path = "models/classifier.tflite"
baseline = "baselines/classifier"
"""

MODEL_TEST = """\
def test_classifier_matches_its_baseline(tflkit):
    tflkit.assert_matches_baseline("models/classifier.tflite", "baselines/classifier")
"""


def user_repository(path: Path) -> Path:
    """A repository as a user's: a model, tflkit.toml, a test with the plugin's fixture."""
    (path / "models").mkdir(parents=True)
    (path / "tests").mkdir()
    example = package_env.ROOT / "tflkit/examples/tiny_classifier.tflite"
    shutil.copy(example, path / "models/classifier.tflite")
    (path / "tflkit.toml").write_text(SUITE)
    (path / "tests" / "test_models.py").write_text(MODEL_TEST)
    return path


def _junit(path: Path) -> tuple[int, int]:
    """(test cases, failures + errors) of a JUnit file."""
    root = ET.parse(path).getroot()
    cases = root.findall(".//testcase")
    bad = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    return len(cases), len(bad)


@pytest.mark.parametrize("file", FILES)
def test_the_steps_are_read_in_order(file):
    steps = ci_steps.read_steps(DOCS / file)
    scripts = [s.script for s in steps if s.script]
    order = ["mesa-vulkan-drivers", "pip install", "tflkit doctor", "regress record",
             "regress check", "pytest -p"]  # fmt: skip
    found = [next(i for i, text in enumerate(scripts) if key in text) for key in order]
    assert found == sorted(found), found
    assert all(s.env.get(ci_steps.PACKAGE_VAR) for s in steps if s.script)


@pytest.mark.gpu
@pytest.mark.parametrize("file", FILES)
def test_the_ci_example_runs_here(file, gpu, built: Built, tmp_path: Path):
    python = package_env.runner_venv(tmp_path / "runner", built.wheel)
    repo = user_repository(tmp_path / "repo")
    env = package_env.isolated_env(python.parent.parent)
    log = tmp_path / "steps.log"
    with log.open("w") as handle:
        results = ci_steps.run_steps(
            ci_steps.read_steps(DOCS / file), repo, str(built.wheel), env, log=handle
        )
    text = log.read_text()
    failed = [(step.name, code) for step, code in results if code not in (0, None)]
    assert not failed, (failed, text[-4000:])
    skipped = [step.name for step, code in results if code is None]
    assert all(name.startswith("actions/") for name in skipped), skipped  # the service's own
    assert list((tmp_path / "runner/venv").glob("lib/python*/site-packages/tflkit/__init__.py"))
    assert "GPU accelerator works here" in text
    cases, bad = _junit(repo / "reports/tflkit.xml")
    assert cases >= 3 and bad == 0, (cases, bad)
    cases, bad = _junit(repo / "reports/pytest.xml")
    assert cases == 2 and bad == 0, (cases, bad)  # the suite's model and the fixture's test
    html = (repo / "reports/tflkit.html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "classifier" in html
    assert (repo / "baselines/classifier/manifest.json").is_file()
