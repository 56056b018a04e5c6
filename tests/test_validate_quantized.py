"""Models quantized by ``tflkit convert --quantize dynamic|int8`` validate against their Keras
source within the quantization contract, and fail when the contract is broken (an int8 model
calibrated on data 50 times narrower than what it meets: its first activations clip).

The source is a small conv net with seeded weights whose outputs follow its inputs (a regression
head, no softmax to flatten them); it is built once with TensorFlow in a child process and
cached. Conversions and the Keras reference run TensorFlow in child processes. The inputs are
the data the model meets (uniform [0, 1]): the reference file ``convert`` writes draws its
inputs from the range the model's own input QUANTIZE covers, which for a model calibrated too
narrowly is the narrow range, where nothing clips. Run as a script to generate: ``python
tests/test_validate_quantized.py OUTDIR``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest_corpus import build_with_script, cache_root, tensorflow_version
from tests.needs import unavailable
from tflkit.validation.pipeline import ValidateOptions, validate

SIZE = 32


def generate(out: Path) -> None:
    """A conv net with seeded He-scaled weights -> ``regressor.keras``."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((SIZE, SIZE, 3), batch_size=1, name="image")
    x = keras.layers.Conv2D(16, 3, activation="relu", name="conv1")(inputs)
    # 4,608 weights: above the 1,024 below which dynamic-range quantization leaves a layer float
    x = keras.layers.Conv2D(32, 3, strides=2, activation="relu", name="conv2")(x)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    outputs = keras.layers.Dense(4, name="head")(x)
    model = keras.Model(inputs, outputs)
    rng = np.random.default_rng(0)
    for layer in model.layers:
        weights = layer.get_weights()
        if weights:
            kernel, bias = weights
            fan_in = int(np.prod(kernel.shape[:-1]))
            kernel = rng.normal(0, np.sqrt(2.0 / fan_in), kernel.shape).astype(np.float32)
            layer.set_weights([kernel, np.full_like(bias, 0.05)])
    model.save(out / "regressor.keras")


@pytest.fixture(scope="session")
def regressor() -> Path:
    version = tensorflow_version()
    if version is None:
        unavailable("TensorFlow is not importable: cannot build the Keras model")
    key = hashlib.sha256(Path(__file__).read_bytes() + version.encode()).hexdigest()[:12]
    out = cache_root() / "validate" / f"regressor-{key}"
    build_with_script(Path(__file__), out, done_marker="regressor.keras", what="Keras regressor")
    return out / "regressor.keras"


def _convert(
    source: Path, out: Path, quantize: str, representative: Path | None, int8_io: bool = False
) -> None:
    from tflkit.converters.api import convert
    from tflkit.converters.base import ConvertOptions

    options = ConvertOptions(quantize=quantize, representative=representative, int8_io=int8_io)
    convert(source, out, options)


def test_quantized_models_hold_the_contract_and_a_broken_calibration_fails(regressor, tmp_path):
    rng = np.random.default_rng(5)
    good = tmp_path / "good.npz"
    np.savez(good, image=rng.uniform(0.0, 1.0, (16, 1, SIZE, SIZE, 3)).astype(np.float32))
    narrow = tmp_path / "narrow.npz"
    np.savez(narrow, image=rng.uniform(0.0, 0.02, (16, 1, SIZE, SIZE, 3)).astype(np.float32))
    data = tmp_path / "data.npz"
    np.savez(data, image=rng.uniform(0.0, 1.0, (3, 1, SIZE, SIZE, 3)).astype(np.float32))
    verdicts = {}
    for name, quantize, calibration in (
        ("dynamic", "dynamic", None),
        ("int8", "int8", good),
        ("int8-narrow", "int8", narrow),
    ):
        out = tmp_path / f"{name}.tflite"
        _convert(regressor, out, quantize, calibration)
        report = validate(out, ValidateOptions(runners=["cpu"], reference=regressor, inputs=data))
        pair = report.pair("cpu:reference")
        assert all(o.tolerance.precision == "int8" for o in pair.outputs)
        verdicts[name] = (pair.verdict, [(o.metrics.max_abs, o.bound) for o in pair.outputs])
    assert verdicts["dynamic"][0] == "pass", verdicts
    assert verdicts["int8"][0] == "pass", verdicts
    assert verdicts["int8-narrow"][0] == "fail", verdicts


def test_int8_inputs_and_outputs_against_the_float_source(regressor, tmp_path):
    """``--int8-io``: the Keras source gets the int8 inputs' real values (dequantized), and its
    float outputs are compared with the model's dequantized ones, in steps."""
    calibration = tmp_path / "calibration.npz"
    rng = np.random.default_rng(5)
    np.savez(calibration, image=rng.uniform(0.0, 1.0, (16, 1, SIZE, SIZE, 3)).astype(np.float32))
    out = tmp_path / "int8-io.tflite"
    _convert(regressor, out, "int8", calibration, int8_io=True)
    report = validate(out, ValidateOptions(runners=["cpu"], reference=regressor, num_inputs=2))
    reference = report.runner("reference")
    assert reference.ok, reference.error
    assert any("dequantized to float32" in note for note in reference.notes)
    (output,) = report.pair("cpu:reference").outputs
    assert output.tolerance.precision == "int8" and output.dequantized
    assert output.verdict == "pass", output.reasons
    assert output.steps is not None and 0 < output.steps <= output.bound_steps
    # convert recorded its reference file the same way: the source fed the real values
    saved = out.with_suffix(".reference.npz")
    assert saved.is_file()
    recorded = validate(out, ValidateOptions(runners=["cpu"], reference=saved))
    assert recorded.pair("cpu:reference").verdict == "pass", recorded.findings


if __name__ == "__main__":
    generate(Path(sys.argv[1]))
