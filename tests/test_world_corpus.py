"""The whole corpus through the real CLI: declared tags hold, the cheap commands never fail
internally, and a representative slice holds on the real GPU accelerator.

The cheap commands (``inspect``, static ``check``, ``rewrite`` without ``--probe``) run in-process
through ``tflkit.cli.main.main`` (the same code as the installed command, without paying the
interpreter start-up 3 x 76 times) on every generated and world model. They may refuse a model
(exit 1 or 2 with one clear line) but never fail internally: exit 3 or a traceback. The full
sweep with subprocesses, the probe and ``validate`` on every model is ``bench/sweep.py``
(``docs/sweep.md``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest_corpus import Corpus
from tests.corpus import generate
from tests.corpus.fetch import world_names, world_tags
from tests.corpus.tags import TAGS, model_tags
from tflkit.cli.main import EXIT_INTERNAL, main

MODELS = [f"generated/{name}" for name in generate.GENERATORS] + world_names()

#: The GPU slice: control flow (IF), full uint8, dynamic shapes, sparse weights (generated: no
#: real sparse model outside the reserved packages is known).
GPU_SLICE = (
    "openwakeword/hey_jarvis_v0.1",
    "simple-cv/efficientnet_lite0",
    "openwakeword/melspectrogram",
    "generated/sparse_weights",
)


@pytest.fixture(scope="module")
def model_path(request: pytest.FixtureRequest) -> Any:
    def get(name: str) -> Path:
        if name.startswith("generated/"):
            corpus: Corpus = request.getfixturevalue("corpus")
            return corpus.path(name.removeprefix("generated/"))
        world: dict[str, Path] = request.getfixturevalue("world_models")
        return world[name]

    return get


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any] | None]:
    """Run the CLI in-process; fail on an internal error or a traceback; parse ``--json``."""
    code = main(list(args))
    captured = capsys.readouterr()
    where = " ".join(args)
    assert code != EXIT_INTERNAL, f"tflkit {where}: internal error:\n{captured.err[-2000:]}"
    assert "Traceback" not in captured.err, f"tflkit {where}: traceback:\n{captured.err[-2000:]}"
    if code == 2:
        lines = [line for line in captured.err.splitlines() if line.strip()]
        assert lines, f"tflkit {where}: exit {code} without saying why"
    report = json.loads(captured.out) if code in (0, 1) and captured.out.strip() else None
    if report is not None:
        assert "schema" in report, f"tflkit {where}: JSON without a schema field"
    return code, report


def test_declared_tags_match_the_files(world_models: dict[str, Path]) -> None:
    assert sorted(world_models) == sorted(world_names())
    declared = world_tags()
    wrong = {}
    for name, path in world_models.items():
        actual = model_tags(path.read_bytes())
        if actual != declared[name]:
            wrong[name] = (sorted(declared[name]), sorted(actual))
    assert not wrong, f"declared vs measured tags: {wrong}"
    assert all(tags <= set(TAGS) for tags in declared.values())


def test_world_corpus_size(world_models: dict[str, Path]) -> None:
    sources = {name.split("/")[0] for name in world_models}
    assert len(world_models) >= 35, len(world_models)
    assert len(sources) >= 7, sorted(sources)


@pytest.mark.parametrize("name", MODELS)
def test_cheap_commands_never_fail_internally(
    name: str, model_path: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(model_path(name))
    code, report = _run(capsys, "inspect", "--json", path)
    assert code == 0 and report is not None, f"inspect refused a model LiteRT loads ({code})"
    _run(capsys, "check", "--json", path)
    out = tmp_path / "rewritten.tflite"
    code, report = _run(capsys, "rewrite", "--json", "-o", str(out), path)
    if report is not None and report["written"]:
        assert out.is_file()


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_SLICE)
def test_probe_and_validate_on_the_gpu(
    name: str, model_path: Any, gpu: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(model_path(name))
    code, report = _run(capsys, "check", "--probe", "--json", path)
    assert report is not None, f"check --probe exited {code}"
    probe = report["probe"]
    assert probe["status"] in ("ok", "compile_error"), probe
    assert probe["model_agrees"], f"static verdict disagrees with the accelerator: {probe}"
    code, report = _run(
        capsys, "validate", "--json", "-n", "1", "-r", "cpu", "-r", "gpu-fp16", path
    )
    assert code in (0, 1), f"validate exited {code}"
