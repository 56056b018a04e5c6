"""Families of generated models behind validate's honesty checks, built with real TensorFlow.

Run as ``python tests/truth_models.py DIR`` (the tests do it once through
:func:`truth_models`, cached under a hash of this file and the TensorFlow version):

- ``text_encoder_int64.tflite``: a GRU text encoder whose token ids are int64 (Embedding ->
  GRU -> Dense), the family of "Unsupported dtype: int64" from the Python binding;
- ``cast_<dtype>.tflite``: ``y * 2 + cast(x)`` with ``x`` of each dtype the binding refuses
  (int64, int16, uint16, uint32, float64);
- ``many_scalars.tflite``: 85 rank-1 inputs of dynamic length stored as ``[1]`` (a
  speech-quality-like model of per-utterance features): ``shape_signature [-1]``, ``shape [1]``;
- ``pairwise.tflite``: two such inputs whose outer products grow as N^2 (memory budget);
- ``mask_*.tflite``, ``softmax_*.tflite`` (:data:`MASKS`): sigmoid and softmax segmentation
  heads, saturated and not, portrait and landscape (the log-domain rule's false alarms);
- ``long_dense_int8.tflite``: a full-int8 keyword-spotter-like net (a 10x8 conv over a 49x40
  spectrogram, stride 2, then a 4,000-long dense layer and a softmax): fp16 sums that long round
  ~sqrt(4000) times more than one value does (the int8-fp16 flip witness);
- ``ids_float.tflite``: token ids that arrive as float32 and are CAST to int32 before an
  embedding, plus an int32 ``length`` that masks the sequence (index-like inputs).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

VOCAB, TOKENS, WIDTH = 500, 16, 32
SCALARS = 85
#: the long dense head's logit spread (std over seeded inputs): at 6, GPU fp16 is 8 softmax
#: steps off the CPU, fp32 exact, one-step flips move it 4-15 steps over seeds 1-3 (at 2: 2-4)
LONG_DENSE_LOGIT_STD = 6.0
CAST_DTYPES = ("int64", "int16", "uint16", "uint32", "float64")


def _tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    return tf


def _concrete(tf: Any, module: Any, fn: Any) -> bytes:
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [fn.get_concrete_function()], module
    )
    return bytes(converter.convert())


def text_encoder_int64() -> bytes:
    """int64 ids [1, 16] -> Embedding(500, 32) -> GRU(32, unrolled) -> Dense(8)."""
    tf = _tf()
    ids = tf.keras.Input((TOKENS,), batch_size=1, dtype=tf.int64, name="ids")
    x = tf.keras.layers.Embedding(VOCAB, WIDTH)(ids)
    x = tf.keras.layers.GRU(WIDTH, unroll=True)(x)
    out = tf.keras.layers.Dense(8)(x)
    model = tf.keras.Model(ids, out)
    return bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())


def cast_model(dtype: str) -> bytes:
    """``o = y * 2 + cast(x, float32)``, ``x`` [1, 4] of ``dtype``, ``y`` [1, 4] float32."""
    tf = _tf()
    spec = [
        tf.TensorSpec([1, 4], getattr(tf, dtype), name="x"),
        tf.TensorSpec([1, 4], tf.float32, name="y"),
    ]

    class Cast(tf.Module):
        @tf.function(input_signature=spec)
        def f(self, x: Any, y: Any) -> Any:
            return {"o": y * 2.0 + tf.cast(x, tf.float32)}

    module = Cast()
    return _concrete(tf, module, module.f)


def many_scalars() -> bytes:
    """85 float inputs of shape signature [-1] stored as [1] -> concat -> Dense(16) -> Dense(1)."""
    tf = _tf()
    rng = np.random.default_rng(0)
    w1 = tf.constant(rng.normal(0, 0.2, (SCALARS, 16)).astype(np.float32))
    w2 = tf.constant(rng.normal(0, 0.3, (16, 1)).astype(np.float32))
    spec = [tf.TensorSpec([None], tf.float32, name=f"feature_{i:02d}") for i in range(SCALARS)]

    class Quality(tf.Module):
        @tf.function(input_signature=spec)
        def f(self, *features: Any) -> Any:
            x = tf.stack([tf.reduce_mean(f) for f in features])[None, :]
            return {"mos": tf.sigmoid(tf.matmul(tf.tanh(tf.matmul(x, w1)), w2)) * 4.0 + 1.0}

    module = Quality()
    return _concrete(tf, module, module.f)


def pairwise() -> bytes:
    """Two rank-1 inputs [?] stored as [1]; each one's outer product with itself, averaged: an
    N-sample input needs N^2 floats (16,000 samples: 1 GB a tensor), the family of models that
    eat the machine when fed audio lengths they do not take."""
    tf = _tf()
    spec = [tf.TensorSpec([None], tf.float32, name=f"track_{i}") for i in range(2)]

    class Pairwise(tf.Module):
        @tf.function(input_signature=spec)
        def f(self, *tracks: Any) -> Any:
            return {"score": tf.stack([tf.reduce_mean(t[:, None] * t[None, :]) for t in tracks])}

    module = Pairwise()
    return _concrete(tf, module, module.f)


def ids_float() -> bytes:
    """float32 ids [1, 16] CAST to int32 -> GATHER of an embedding whose row 0 (padding) is
    zeros; an int32 length [1] masks the tokens past it; mean over tokens -> Dense(4)."""
    tf = _tf()
    rng = np.random.default_rng(1)
    rows = rng.normal(0, 1, (VOCAB, WIDTH)).astype(np.float32)
    rows[0] = 0.0  # id 0 is padding: random floats in [0, 1) all cast to it
    table = tf.constant(rows)
    dense = tf.constant(rng.normal(0, 0.3, (WIDTH, 4)).astype(np.float32))
    spec = [
        tf.TensorSpec([1, TOKENS], tf.float32, name="token_ids"),
        tf.TensorSpec([1], tf.int32, name="length"),
    ]

    class Encoder(tf.Module):
        @tf.function(input_signature=spec)
        def f(self, token_ids: Any, length: Any) -> Any:
            x = tf.gather(table, tf.cast(token_ids, tf.int32))
            mask = tf.cast(tf.range(TOKENS)[None, :] < length[:, None], tf.float32)
            pooled = tf.reduce_sum(x * mask[..., None], 1) / tf.cast(length, tf.float32)[:, None]
            return {"embedding": tf.matmul(pooled, dense)}

    module = Encoder()
    return _concrete(tf, module, module.f)


#: the mask/head family: (name, height, width, logit bias, head); bias -20: saturated
MASKS = (
    ("mask_portrait_saturated", 256, 144, -20.0, "sigmoid"),
    ("mask_landscape_saturated", 144, 256, -20.0, "sigmoid"),
    ("mask_portrait_plain", 256, 144, 0.0, "sigmoid"),
    ("mask_landscape_plain", 144, 256, 0.0, "sigmoid"),
    ("softmax_portrait_saturated", 256, 144, -20.0, "softmax"),
    ("softmax_landscape_plain", 144, 256, 0.0, "softmax"),
)


def mask_model(height: int, width: int, bias: float, head: str) -> bytes:
    """A person-segmentation-like net: 8 conv layers (tanh/relu, stride 8), bilinear upsampling
    to the image's size, a 1x1 conv whose bias sets how saturated the head is, and a sigmoid
    (one channel) or a softmax (two) head, at [1, H, W, C] like the image input."""
    tf = _tf()
    image = tf.keras.Input((height, width, 3), batch_size=1, name="image")
    x = image
    for i in range(8):
        x = tf.keras.layers.Conv2D(32, 3, padding="same", strides=2 if i < 3 else 1)(x)
        x = tf.keras.layers.Activation("relu" if i % 2 else "tanh")(x)
    x = tf.keras.layers.UpSampling2D(8, interpolation="bilinear")(x)
    channels = 1 if head == "sigmoid" else 2
    init = tf.keras.initializers.Constant([bias] + [0.0] * (channels - 1))
    x = tf.keras.layers.Conv2D(channels, 1, bias_initializer=init)(x)
    x = tf.keras.layers.Activation(head, name="mask")(x)
    model = tf.keras.Model(image, x)
    for layer in model.layers:  # logits of several units: gain 3 on the default init
        if isinstance(layer, tf.keras.layers.Conv2D):
            kernel, b = layer.get_weights()
            layer.set_weights([kernel * 3.0, b])
    return bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())


def long_dense_int8() -> bytes:
    """[1, 49, 40, 1] -> Conv2D(8, 10x8, stride 2, relu) -> 4,000 values -> Dense(4) ->
    softmax, quantized to int8 inputs, weights and outputs on seeded spectrogram-like data."""
    tf = _tf()
    spectrogram = tf.keras.Input((49, 40, 1), batch_size=1, name="spectrogram")
    x = tf.keras.layers.Conv2D(8, (10, 8), strides=2, padding="same", activation="relu")(
        spectrogram
    )
    x = tf.keras.layers.Flatten()(x)
    x = tf.keras.layers.Dense(4)(x)
    model = tf.keras.Model(spectrogram, tf.keras.layers.Softmax(name="labels")(x))
    rng = np.random.default_rng(0)
    # logits of a few units, as a trained head gives (not one class saturating the softmax)
    dense = model.layers[-2]
    probe = rng.normal(0.0, 1.0, (32, 49, 40, 1)).astype(np.float32)
    logits = tf.keras.Model(spectrogram, dense.output)(probe).numpy()
    kernel, bias = dense.get_weights()
    dense.set_weights([kernel * (LONG_DENSE_LOGIT_STD / float(logits.std())), bias])

    def calibration() -> Any:
        for _ in range(32):
            yield [rng.normal(0.0, 1.0, (1, 49, 40, 1)).astype(np.float32)]

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = calibration
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int8
    return bytes(converter.convert())


def build(out: Path) -> None:
    (out / "text_encoder_int64.tflite").write_bytes(text_encoder_int64())
    for dtype in CAST_DTYPES:
        (out / f"cast_{dtype}.tflite").write_bytes(cast_model(dtype))
    (out / "many_scalars.tflite").write_bytes(many_scalars())
    (out / "ids_float.tflite").write_bytes(ids_float())
    (out / "long_dense_int8.tflite").write_bytes(long_dense_int8())
    (out / "pairwise.tflite").write_bytes(pairwise())
    for name, height, width, bias, head in MASKS:
        (out / f"{name}.tflite").write_bytes(mask_model(height, width, bias, head))
    (out / "DONE").write_text("ok\n")


def truth_models() -> Path:
    """The built family folder (built once per version of this file and of TensorFlow)."""
    from tests.conftest_corpus import build_with_script, cache_root, tensorflow_version
    from tests.needs import unavailable

    version = tensorflow_version()
    if version is None:
        unavailable("TensorFlow is not importable: cannot build the model families")
    key = hashlib.sha256(Path(__file__).read_bytes() + version.encode()).hexdigest()[:12]
    out = cache_root() / "truth" / f"families-{key}"
    return build_with_script(Path(__file__), out, done_marker="DONE", what="truth families")


if __name__ == "__main__":
    build(Path(sys.argv[1]))
