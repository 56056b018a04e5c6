"""The test model corpus: every generated model has its feature and runs (or fails as expected)
on the real LiteRT CPU interpreter; the real third-party models load and run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

from tests.conftest_corpus import REPO, Corpus
from tests.corpus import generate
from tests.corpus.features import CPU_FAILURES, FeatureMissing, check

DYNAMIC_DIM = 5  # size given to every -1 dimension before running a dynamic model


def _zeros(details: dict) -> np.ndarray:
    shape = [DYNAMIC_DIM if d == -1 else d for d in details["shape_signature"]]
    return np.zeros(shape, dtype=details["dtype"])


def run_with_zeros(interpreter: Interpreter) -> dict[str, np.ndarray]:
    """Run every signature (or the main subgraph of a model without any) on zero inputs."""
    outputs: dict[str, np.ndarray] = {}
    signatures = interpreter.get_signature_list()
    for key in signatures:
        runner = interpreter.get_signature_runner(key)
        inputs = {n: _zeros(d) for n, d in runner.get_input_details().items()}
        for out_name, value in runner(**inputs).items():
            outputs[f"{key}/{out_name}"] = value
    if not signatures:
        for d in interpreter.get_input_details():
            if -1 in d["shape_signature"]:
                interpreter.resize_tensor_input(d["index"], _zeros(d).shape)
        interpreter.allocate_tensors()
        for d in interpreter.get_input_details():
            interpreter.set_tensor(d["index"], _zeros(d))
        interpreter.invoke()
        for d in interpreter.get_output_details():
            outputs[d["name"]] = interpreter.get_tensor(d["index"])
    return outputs


def _assert_sane(outputs: dict[str, np.ndarray]) -> None:
    assert outputs, "the model produced no outputs"
    for name, value in outputs.items():
        assert value.size > 0, f"{name} is empty"
        if np.issubdtype(value.dtype, np.floating):
            assert np.isfinite(value).all(), f"{name} has non-finite values"


@pytest.mark.parametrize("name", list(generate.GENERATORS))
def test_generated_model(corpus: Corpus, name: str) -> None:
    path = corpus.path(name)
    data = path.read_bytes()
    assert 0 < len(data) < 4_000_000, f"{name} is {len(data)} bytes"
    check(name, data)
    if name in CPU_FAILURES:
        with pytest.raises(RuntimeError, match=CPU_FAILURES[name]):
            run_with_zeros(Interpreter(model_path=str(path)))
    else:
        _assert_sane(run_with_zeros(Interpreter(model_path=str(path))))


def test_resource_variables_keep_state(corpus: Corpus) -> None:
    runner = Interpreter(model_path=str(corpus.path("resource_variables"))).get_signature_runner()
    ones = np.ones((1, 4), np.float32)
    first, second = runner(x=ones)["total"], runner(x=ones)["total"]
    np.testing.assert_array_equal(first, ones)
    np.testing.assert_array_equal(second, 2 * ones)


def test_dynamic_audio_any_length(corpus: Corpus) -> None:
    runner = Interpreter(model_path=str(corpus.path("dynamic_audio"))).get_signature_runner()
    for length in (400, 16000):
        wave = np.sin(np.linspace(0, 60, length, dtype=np.float32))
        out = runner(waveform=wave)
        np.testing.assert_allclose(out["emphasized"], wave[1:] - 0.97 * wave[:-1], atol=1e-6)
        np.testing.assert_allclose(out["rms"], [np.sqrt(np.mean(wave**2) + 1e-6)], rtol=1e-5)


def test_feature_check_rejects_a_model_without_the_feature(corpus: Corpus) -> None:
    with pytest.raises(FeatureMissing, match="DENSIFY"):
        check("sparse_weights", corpus.path("conv_dense").read_bytes())


def test_corpus_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="conv_dense"):
        Corpus(tmp_path).path("no_such_model")


def test_generate_cli_rejects_unknown_name(tmp_path: Path) -> None:
    assert generate.main([str(tmp_path), "no_such_model"]) == 2
    assert not list(tmp_path.iterdir())


def test_corpus_modules_do_not_import_tensorflow() -> None:
    code = (
        "import sys, tests.corpus.generate, tests.corpus.fetch, tests.conftest_corpus; "
        "sys.exit('tensorflow' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr or "importing the corpus modules loaded TensorFlow"


def test_real_models_run(real_models: list[Path]) -> None:
    assert len(real_models) >= 5, [p.name for p in real_models]
    for path in real_models:
        assert path.suffix == ".tflite"
        outputs = run_with_zeros(Interpreter(model_path=str(path)))
        _assert_sane(outputs)
