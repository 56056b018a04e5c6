"""Keras architectures of the generated corpus, converted with the real TFLite converter.

Each function builds a small Keras 3 model with seeded, "alive" weights (see
``tests.keras_weights``) and returns the ``.tflite`` bytes; ``tests.corpus.features`` checks that
each has the ops it exists for. Keras and TensorFlow are imported inside the functions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tests.keras_weights import make_alive

SEED = 0
STEPS, FEATURES, UNITS = 10, 8, 16
TOKENS, WIDTH = 6, 16


def _keras() -> tuple[Any, Any]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(SEED)
    return tf, keras


def _convert(model: Any, configure: Callable[[Any], None] | None = None) -> bytes:
    tf, _ = _keras()
    make_alive(model, np.random.default_rng(SEED))
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if configure is not None:
        configure(converter)
    return bytes(converter.convert())


def _dataset(shape: tuple[int, ...]) -> Callable[[], Iterator[list[np.ndarray]]]:
    def samples() -> Iterator[list[np.ndarray]]:
        rng = np.random.default_rng(SEED)
        for _ in range(16):
            yield [rng.uniform(-1, 1, shape).astype(np.float32)]

    return samples


def _full_int8(shape: tuple[int, ...]) -> Callable[[Any], None]:
    def configure(converter: Any) -> None:
        tf, _ = _keras()
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = _dataset(shape)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8

    return configure


def _fp16(converter: Any) -> None:
    tf, _ = _keras()
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]


def _dynamic_range(converter: Any) -> None:
    tf, _ = _keras()
    converter.optimizations = [tf.lite.Optimize.DEFAULT]


def keras_gru() -> bytes:
    """``keras.layers.GRU``: a WHILE loop over the time steps (TFLite has no fused GRU)."""
    _, keras = _keras()
    layers = keras.layers
    return _convert(
        keras.Sequential(
            [keras.Input((STEPS, FEATURES), batch_size=1), layers.GRU(UNITS), layers.Dense(4)]
        )
    )


def keras_bilinear_resize() -> bytes:
    """``UpSampling2D(interpolation="bilinear")`` between convolutions -> RESIZE_BILINEAR."""
    _, keras = _keras()
    layers = keras.layers
    return _convert(
        keras.Sequential(
            [
                keras.Input((8, 8, 3), batch_size=1),
                layers.Conv2D(4, 3, padding="same", activation="relu"),
                layers.UpSampling2D(2, interpolation="bilinear"),
                layers.Conv2D(3, 1),
            ]
        )
    )


def keras_conv2d_transpose() -> bytes:
    """``Conv2DTranspose`` with stride 2 -> TRANSPOSE_CONV."""
    _, keras = _keras()
    layers = keras.layers
    return _convert(
        keras.Sequential(
            [
                keras.Input((8, 8, 4), batch_size=1),
                layers.Conv2DTranspose(4, 3, strides=2, padding="same", activation="relu"),
                layers.Conv2D(2, 1),
            ]
        )
    )


def keras_depth_to_space() -> bytes:
    """A sub-pixel upsampler: conv to 4x channels, then ``depth_to_space`` -> DEPTH_TO_SPACE."""
    tf, keras = _keras()
    layers = keras.layers
    inputs = keras.Input((8, 8, 3), batch_size=1)
    x = layers.Conv2D(12, 3, padding="same")(inputs)
    x = layers.Lambda(lambda t: tf.nn.depth_to_space(t, 2))(x)
    return _convert(keras.Model(inputs, x))


def _attention_model(key_dim: int = 8) -> Any:
    _, keras = _keras()
    layers = keras.layers
    inputs = keras.Input((TOKENS, WIDTH), batch_size=1)
    x = layers.MultiHeadAttention(num_heads=2, key_dim=key_dim)(inputs, inputs)
    x = layers.LayerNormalization()(layers.Add()([inputs, x]))
    return keras.Model(inputs, layers.Dense(4)(layers.GlobalAveragePooling1D()(x)))


def keras_attention() -> bytes:
    """``MultiHeadAttention`` + residual + ``LayerNormalization`` (a transformer encoder half)."""
    return _convert(_attention_model())


def keras_attention_fp16() -> bytes:
    """``keras_attention`` with float16 weights (DEQUANTIZE in front of every weight)."""
    return _convert(_attention_model(), _fp16)


def keras_attention_dynamic_range() -> bytes:
    """Wider ``keras_attention`` with dynamic-range int8 weights (hybrid kernels); the
    converter leaves weights under 1,024 elements in float, hence ``key_dim=32``."""
    return _convert(_attention_model(key_dim=32), _dynamic_range)


def keras_transformer_mlp() -> bytes:
    """Pre-norm MLP block: LayerNormalization, Dense with exact GELU, Dense, residual Add."""
    _, keras = _keras()
    layers = keras.layers
    inputs = keras.Input((TOKENS, WIDTH), batch_size=1)
    x = layers.LayerNormalization()(inputs)
    x = layers.Dense(2 * WIDTH, activation="gelu")(x)
    return _convert(keras.Model(inputs, layers.Add()([inputs, layers.Dense(WIDTH)(x)])))


def keras_mobilenet_block() -> bytes:
    """MobileNetV2 inverted residual: expand, depthwise, project (BatchNorm + ReLU6), Add."""
    _, keras = _keras()
    layers = keras.layers
    inputs = keras.Input((16, 16, 8), batch_size=1)
    x = inputs
    for layer in (
        layers.Conv2D(24, 1, use_bias=False),
        layers.BatchNormalization(),
        layers.ReLU(6.0),
        layers.DepthwiseConv2D(3, padding="same", use_bias=False),
        layers.BatchNormalization(),
        layers.ReLU(6.0),
        layers.Conv2D(8, 1, use_bias=False),
        layers.BatchNormalization(),
    ):
        x = layer(x)
    return _convert(keras.Model(inputs, layers.Add()([inputs, x])))


def keras_conv1d_audio() -> bytes:
    """A 1-D conv audio classifier on a waveform of any length (shape signature ``[1, -1, 1]``;
    "same" padding, so it also runs at the stored length 1)."""
    _, keras = _keras()
    layers = keras.layers
    return _convert(
        keras.Sequential(
            [
                keras.Input((None, 1), batch_size=1),
                layers.Conv1D(8, 9, strides=4, padding="same", activation="relu"),
                layers.Conv1D(8, 5, strides=2, padding="same", activation="relu"),
                layers.GlobalAveragePooling1D(),
                layers.Dense(3),
            ]
        )
    )


UNET_INPUT = (1, 16, 16, 3)


def keras_unet_int8() -> bytes:
    """A tiny U-Net (strided conv, Conv2DTranspose, skip Concatenate), full int8 io."""
    _, keras = _keras()
    layers = keras.layers
    inputs = keras.Input(UNET_INPUT[1:], batch_size=1)
    skip = layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    down = layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(skip)
    up = layers.Conv2DTranspose(8, 3, strides=2, padding="same", activation="relu")(down)
    x = layers.Concatenate()([skip, up])
    model = keras.Model(inputs, layers.Conv2D(2, 1)(x))
    return _convert(model, _full_int8(UNET_INPUT))


KERAS_GENERATORS: dict[str, Callable[[], bytes]] = {
    "keras_gru": keras_gru,
    "keras_bilinear_resize": keras_bilinear_resize,
    "keras_conv2d_transpose": keras_conv2d_transpose,
    "keras_depth_to_space": keras_depth_to_space,
    "keras_attention": keras_attention,
    "keras_attention_fp16": keras_attention_fp16,
    "keras_attention_dynamic_range": keras_attention_dynamic_range,
    "keras_transformer_mlp": keras_transformer_mlp,
    "keras_mobilenet_block": keras_mobilenet_block,
    "keras_conv1d_audio": keras_conv1d_audio,
    "keras_unet_int8": keras_unet_int8,
}
