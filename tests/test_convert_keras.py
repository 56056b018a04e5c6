"""``tflkit convert`` on real Keras architectures (random weights, no downloads) and SavedModels.

The Keras models are built by one generator child process (TensorFlow never enters the pytest
process) and cached by a hash of this file and the TensorFlow version. The generator also drives
the Python API on in-memory objects (a ``keras.Model`` and a ``tf.function``), which only works
where TensorFlow is already imported. Run as a script to generate: ``python
tests/test_convert_keras.py OUTDIR``.
"""

from __future__ import annotations

import hashlib
import json
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
ARCHITECTURES = ("mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "transformer")

#: Tolerances (max abs over the reference sets; the outputs are logits of order 1).
CPU_VS_KERAS = 1e-4  # float32 XNNPACK vs TensorFlow: reassociation only
GPU_FP32_VS_KERAS = 1e-3


def _transformer():
    import keras

    tokens = keras.Input((16, 32), name="tokens")
    attn = keras.layers.MultiHeadAttention(num_heads=4, key_dim=8)(tokens, tokens)
    x = keras.layers.LayerNormalization()(tokens + attn)
    ff = keras.layers.Dense(64, activation="gelu")(x)
    x = keras.layers.LayerNormalization()(x + keras.layers.Dense(32)(ff))
    pooled = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(tokens, keras.layers.Dense(10, name="logits")(pooled), name="encoder")


def generate(out: Path) -> None:
    """The Keras files, a SavedModel needing flex ops, and two in-memory API conversions."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    apps = keras.applications
    shape = (SIZE, SIZE, 3)
    models = {
        "mobilenet_v2": apps.MobileNetV2(input_shape=shape, alpha=0.35, weights=None, classes=10),
        "mobilenet_v3_small": apps.MobileNetV3Small(
            input_shape=shape, alpha=0.75, weights=None, classes=10
        ),
        "efficientnet_b0": apps.EfficientNetB0(input_shape=shape, weights=None, classes=10),
        "transformer": _transformer(),
    }
    for name, model in models.items():
        make_alive(model, rng)
        model.save(out / f"{name}.keras")
    features = keras.Input((8,), name="features")
    affine = keras.layers.Lambda(lambda t: t * 2.0 + 1.0, name="affine")(
        keras.layers.Dense(8)(features)
    )
    scores = keras.layers.Dense(3, name="scores")(affine)
    keras.Model(features, scores, name="with_lambda").save(out / "with_lambda.keras")

    class NeedsFlex(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="x")])
        def serve(self, x):
            det = tf.linalg.det(tf.reshape(x[:, :4], (-1, 2, 2)))
            return {"y": tf.math.erf(x) * det[:, None]}

    flex = NeedsFlex()
    tf.saved_model.save(
        flex, str(out / "flex_saved_model"), signatures={"serving_default": flex.serve}
    )

    from tflkit.converters.keras import convert_keras
    from tflkit.converters.saved_model import convert_function

    report = convert_keras(models["transformer"], out / "api" / "in_memory.tflite")
    (out / "api" / "in_memory.json").write_text(json.dumps(report.to_json(), default=str))
    scale = tf.Variable([[2.0, 3.0, 4.0, 5.0]])

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="features")])
    def scaled(features):
        return {"scaled": tf.nn.relu(features) * scale}

    holder = tf.Module()
    holder.scale = scale
    report = convert_function(scaled, out / "api" / "function.tflite", trackable=holder)
    (out / "api" / "function.json").write_text(json.dumps(report.to_json(), default=str))
    (out / "DONE").write_text("ok")


@pytest.fixture(scope="session")
def models() -> Path:
    version = tensorflow_version()
    if version is None:
        unavailable("TensorFlow is not importable: pip install 'tflkit[convert]'")
    source = Path(__file__).read_bytes() + WEIGHTS_SOURCE.read_bytes()
    key = hashlib.sha256(source + version.encode()).hexdigest()[:12]
    out = cache_root() / "convert" / f"keras-{key}"
    return build_with_script(
        Path(__file__),
        out,
        done_marker="DONE",
        what="Keras model",
        timeout_s=1200,
        subdirs=("api",),
    )


def _cpu_outputs(model: Path, feeds: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(model)).get_signature_runner()
    return [runner(**feed) for feed in feeds]


def _assert_provenance(source: Path, output: Path) -> dict:
    from tflkit import ir
    from tflkit.converters.base import hash_source
    from tflkit.converters.provenance import read_provenance

    model = ir.load(output.read_bytes())
    stamped = read_provenance(model)
    assert stamped is not None, "no tflkit_provenance metadata"
    assert stamped["source"]["sha256"] == hash_source(source)
    assert stamped["versions"]["tensorflow"] == tensorflow_version()
    sidecar = json.loads(output.with_suffix(".provenance.json").read_text())
    assert sidecar["source"] == stamped["source"] and sidecar["options"] == stamped["options"]
    for tensor in model.main.inputs:
        assert -1 not in (tensor.shape_signature or tensor.shape), tensor.name
    return stamped


@pytest.mark.gpu
@pytest.mark.parametrize("name", ARCHITECTURES)
def test_architecture_gpu_ready(models, gpu, tmp_path, name):
    from tflkit.converters.pipeline import convert_gpu_ready
    from tflkit.delegates.tf_reference import load_reference

    source = models / f"{name}.keras"
    output = tmp_path / f"{name}.tflite"
    report = convert_gpu_ready(source, output, timeout=600)

    assert report.verdict == "gpu-ready", (report.still_on_cpu, report.stages)
    assert report.still_on_cpu == []
    (entry,) = report.inputs
    assert entry["shape"][0] == 1 and entry["source_shape"][0] is None  # dynamic batch -> 1
    _assert_provenance(source, output)
    assert Path(report.report_path).is_file()
    saved = json.loads(Path(report.report_path).read_text())
    assert saved["verdict"] == "gpu-ready"

    # The reference file holds Keras' float32 outputs; our own CPU run must match them.
    recorded = load_reference(report.reference_file)
    assert recorded.manifest["framework"].startswith("keras")
    # the recorded holds what validate feeds the model (photographs for an image model), and says so
    kinds = recorded.manifest["input_sets"]
    assert report.reference_inputs == kinds and kinds["source"].startswith("realistic")
    if name != "transformer":
        assert kinds["source"] == "realistic" and set(kinds["data"].values()) == {"photo"}
    cpu = _cpu_outputs(output, recorded.feeds)
    worst = max(
        float(np.abs(c[k].astype(np.float64) - b[k]).max())
        for c, b in zip(cpu, recorded.outputs, strict=True)
        for k in b
    )
    assert worst < CPU_VS_KERAS
    pairs = report.stage("validate").details["pairs"]
    (cpu_max,) = [v["max_abs"] for v in pairs["cpu:reference"].values()]
    assert cpu_max == pytest.approx(worst, rel=1e-6, abs=1e-12)
    # near-uniform probabilities (test weights) can be too flat for the fp16 bound to judge:
    # "not-meaningful" there, never a failure; fp32 and the CPU must pass outright
    verdicts = {(p, o): v["verdict"] for p, outs in pairs.items() for o, v in outs.items()}
    assert all(v in ("pass", "not-meaningful") for v in verdicts.values()), verdicts
    assert all(v == "pass" for (p, _), v in verdicts.items() if "fp16" not in p), verdicts
    (fp32_max,) = [v["max_abs"] for v in pairs["gpu-fp32:reference"].values()]
    assert fp32_max < GPU_FP32_VS_KERAS


def test_flex_ops_named_and_refused(models, tmp_path):
    from tflkit.converters.api import convert
    from tflkit.converters.base import ConversionError

    with pytest.raises(ConversionError) as caught:
        convert(models / "flex_saved_model", tmp_path / "flex.tflite")
    message = str(caught.value)
    assert "Erf" in message and "MatrixDeterminant" in message and "--allow-flex" in message
    assert "GPU" in message
    assert not (tmp_path / "flex.tflite").exists()


def test_flex_ops_allowed_are_cpu_only(models, tmp_path):
    from tflkit.converters.api import convert
    from tflkit.converters.base import ConvertOptions

    source = models / "flex_saved_model"
    output = tmp_path / "flex.tflite"
    report = convert(source, output, ConvertOptions(allow_flex=True))
    assert {op.op for op in report.cpu_only_ops} == {"FlexErf", "FlexMatrixDeterminant"}
    assert all("GPU delegate only takes TFLite builtin ops" in op.why for op in report.cpu_only_ops)
    assert report.inputs == [
        {"name": "x", "shape": [1, 8], "dtype": "float32", "source_shape": [None, 8]}
    ]
    stamped = _assert_provenance(source, output)
    assert stamped["cpu_only_ops"] == ["FlexErf", "FlexMatrixDeterminant"]


def test_weight_formats(models, tmp_path):
    from tflkit import ir
    from tflkit.converters.api import convert
    from tflkit.converters.base import ConvertOptions

    source = models / "mobilenet_v2.keras"
    fp16 = convert(source, tmp_path / "fp16.tflite", ConvertOptions(fp16=True))
    types = {t.type_name for t in ir.load((tmp_path / "fp16.tflite").read_bytes()).main.tensors}
    assert "FLOAT16" in types
    assert max(fp16.cpu_vs_reference_max_abs.values()) < 0.05

    rng = np.random.default_rng(3)
    calib = tmp_path / "calib.npz"
    np.savez(calib, input_layer=rng.uniform(0, 1, (8, SIZE, SIZE, 3)).astype(np.float32))
    options = ConvertOptions(quantize="int8", representative=calib, calibration_steps=8)
    int8 = convert(source, tmp_path / "int8.tflite", options)
    model = ir.load((tmp_path / "int8.tflite").read_bytes())
    convs = [op for op in model.main.ops if op.type == "CONV_2D"]
    assert convs and all(op.inputs[1].type_name == "INT8" for op in convs)
    assert model.main.inputs[0].type_name == "FLOAT32"  # float I/O by default
    assert int8.options["quantize"] == "int8"


def test_in_memory_api(models):
    report = json.loads((models / "api" / "in_memory.json").read_text())
    assert report["source"] == "<in-memory Keras model encoder>"
    assert report["inputs"][0]["name"] == "tokens" and report["inputs"][0]["shape"] == [1, 16, 32]
    assert max(report["cpu_vs_reference_max_abs"].values()) < CPU_VS_KERAS
    function = json.loads((models / "api" / "function.json").read_text())
    assert function["inputs"][0]["name"] == "features"
    assert function["outputs"] == ["scaled"]
    assert function["cpu_vs_reference_max_abs"] == {"scaled": 0.0}
    assert (models / "api" / "function.reference.npz").is_file()


if __name__ == "__main__":
    generate(Path(sys.argv[1]))
