"""validate on a real Keras architecture (MobileNetV2, alpha 0.35, 96x96, random weights, static
batch 1) converted with TensorFlow in a child process, against the Keras model as reference.

The figures of the report are checked against numbers computed here with numpy on outputs this
test obtains itself: the Keras outputs recorded by the generator process, the CPU Interpreter run
here, the GPU run through the probe. Run as a script to generate: ``python
tests/test_validate_keras.py OUTDIR``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest_corpus import build_with_script, cache_root, tensorflow_version
from tests.keras_weights import SOURCE as WEIGHTS_SOURCE
from tests.keras_weights import make_alive
from tests.needs import unavailable

SIZE = 96
SETS = 3


def generate(out: Path) -> None:
    """MobileNetV2 -> .keras + .tflite (static batch 1) + inputs + Keras outputs."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(
        input_shape=(SIZE, SIZE, 3), alpha=0.35, weights=None, classes=10
    )
    rng = np.random.default_rng(0)
    make_alive(model, rng)  # random but alive: default BN stats zero most activations
    model.save(out / "mobilenet_v2.keras")
    saved = out / "saved_model"
    spec = tf.TensorSpec([1, SIZE, SIZE, 3], tf.float32, "image")
    model.export(saved, format="tf_saved_model", input_signature=[spec], verbose=False)
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved))
    (out / "mobilenet_v2.tflite").write_bytes(converter.convert())
    rng = np.random.default_rng(7)
    images = rng.uniform(-1.0, 1.0, (SETS, 1, SIZE, SIZE, 3)).astype(np.float32)
    np.savez(out / "inputs.npz", image=images)
    np.save(out / "keras_outputs.npy", np.stack([model(x, training=False).numpy() for x in images]))


@pytest.fixture(scope="session")
def mobilenet() -> Path:
    version = tensorflow_version()
    if version is None:
        unavailable("TensorFlow is not importable: cannot build the Keras model")
    source = Path(__file__).read_bytes() + WEIGHTS_SOURCE.read_bytes()
    key = hashlib.sha256(source + version.encode()).hexdigest()[:12]
    out = cache_root() / "validate" / f"mobilenet_v2-{key}"
    return build_with_script(
        Path(__file__), out, done_marker="keras_outputs.npy", what="MobileNetV2"
    )


def _interpreter_outputs(model: Path, images: np.ndarray) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(model)).get_signature_runner()
    return np.stack([next(iter(runner(**{"image": x}).values())) for x in images])


@pytest.mark.gpu
def test_mobilenet_v2_against_keras(mobilenet, gpu, tmp_path):
    from tflkit.gpu.probe import probe
    from tflkit.validation.pipeline import ValidateOptions, validate

    model = mobilenet / "mobilenet_v2.tflite"
    images = np.load(mobilenet / "inputs.npz")["image"]
    keras_out = np.load(mobilenet / "keras_outputs.npy")
    saved = tmp_path / "reference.npz"
    report = validate(
        model,
        ValidateOptions(
            runners=["cpu", "gpu-fp16", "gpu-fp32"],
            reference=mobilenet / "mobilenet_v2.keras",
            save_reference=saved,
            inputs=mobilenet / "inputs.npz",
        ),
    )
    assert {r.runner: r.status for r in report.runners} == {
        "cpu": "ok",
        "gpu-fp16": "ok",
        "gpu-fp32": "ok",
        "reference": "ok",
    }
    assert report.runner("reference").executed["runtime"].startswith("keras")
    assert report.runner("gpu-fp16").executed["fully_accelerated"] is True
    assert report.verdict == "pass", report.findings
    (name,) = [o["name"] for o in report.outputs]

    # CPU vs Keras, independently: our own Interpreter run and the generator's Keras outputs.
    cpu = _interpreter_outputs(model, images)
    m = report.pair("cpu:reference").outputs[0].metrics
    d = cpu.astype(np.float64) - keras_out.astype(np.float64)
    assert m.max_abs == pytest.approx(np.abs(d).max(), rel=1e-9, abs=1e-12)
    assert m.rmse == pytest.approx(np.sqrt(np.mean(d**2)), rel=1e-9, abs=1e-12)
    assert m.top1 == np.mean(
        cpu.reshape(SETS, 10).argmax(1) == keras_out.reshape(SETS, 10).argmax(1)
    )

    # GPU fp16 vs Keras, independently: our own GPU run of the same inputs.
    mine = probe(model, run=True, input_sets=[{"image": x} for x in images], use_cache=False)
    gpu = np.stack([o[name] for o in mine.output_sets])
    g = report.pair("gpu-fp16:reference").outputs[0].metrics
    dg = gpu.astype(np.float64) - keras_out.astype(np.float64)
    assert g.max_abs == pytest.approx(np.abs(dg).max(), rel=1e-6)
    cos = np.dot(gpu.ravel(), keras_out.ravel()) / (
        np.linalg.norm(gpu.ravel().astype(np.float64)) * np.linalg.norm(keras_out.ravel())
    )
    assert g.cosine == pytest.approx(cos, rel=1e-6)
    # fp16 is measurably worse than fp32, and fp32 GPU is close to the CPU.
    f32 = report.pair("gpu-fp32:cpu").outputs[0].metrics
    f16 = report.pair("gpu-fp16:cpu").outputs[0].metrics
    assert f32.max_abs < f16.max_abs

    # The saved replays the reference without TensorFlow: same figures.
    replay = validate(model, ValidateOptions(runners=["cpu"], reference=saved))
    assert replay.runner("reference").executed["runtime"] == "reference file"
    again = replay.pair("cpu:reference").outputs[0].metrics
    assert again.max_abs == m.max_abs and again.cosine == m.cosine


if __name__ == "__main__":
    generate(Path(sys.argv[1]))
