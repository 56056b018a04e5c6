"""The int8-weight (hybrid) family on trained weights: a small emotion-classifier-like CNN (48x48
grey faces, 7 classes, a softmax head) trained with TensorFlow for a few steps, then converted
with dynamic-range quantization (``optimizations = [tf.lite.Optimize.DEFAULT]``, no
representative data: int8 weights read directly by CONV_2D, float activations).

The architecture is a mini-Xception: two 3x3 convolutions, four residual blocks whose shortcut
is a strided 1x1 convolution (the form ``int8_pointwise_float_weights`` rewrites; the three
with at least 1,024 weights are quantized), separable convolutions, batch norm, global average
pooling. The training images are dataset-like: a bright blob whose place is the class, on a
random grey level with pixel noise, in [0, 1]. After training, each batch norm's scale is
multiplied per channel by ``10 ** U(-spread, spread)``: trained networks have per-channel
scales spanning decades, which a few steps on easy data do not give (``spread=0`` keeps the
trained scales). Deterministic (seeded, TensorFlow's op determinism); builds in 30-60 s.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

SIZE, CLASSES, SAMPLES = 48, 7, 512


def _images(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    yy, xx = np.mgrid[0:SIZE, 0:SIZE] / SIZE
    labels = rng.integers(0, CLASSES, SAMPLES)
    images = np.empty((SAMPLES, SIZE, SIZE, 1), np.float32)
    for i, c in enumerate(labels):
        cx, cy = 0.3 + 0.2 * (c % 3), 0.3 + 0.2 * (c // 3)
        blob = np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / 0.02)
        noise = 0.15 * rng.standard_normal((SIZE, SIZE))
        images[i, ..., 0] = np.clip(0.5 * blob + 0.3 * rng.random() + noise, 0, 1)
    return images, labels


def _network(tf: object) -> object:
    layers = tf.keras.layers  # type: ignore[attr-defined]

    def block(x: object, channels: int) -> object:
        shortcut = layers.Conv2D(channels, 1, strides=2, padding="same", use_bias=False)(x)
        shortcut = layers.BatchNormalization()(shortcut)
        y = layers.SeparableConv2D(channels, 3, padding="same", use_bias=False)(x)
        y = layers.ReLU()(layers.BatchNormalization()(y))
        y = layers.SeparableConv2D(channels, 3, padding="same", use_bias=False)(y)
        y = layers.BatchNormalization()(y)
        y = layers.MaxPooling2D(3, strides=2, padding="same")(y)
        return layers.Add()([y, shortcut])

    inputs = layers.Input((SIZE, SIZE, 1))
    x = inputs
    for _ in range(2):
        x = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(16, 3, use_bias=False)(x)))
    for channels in (32, 64, 128, 256):
        x = block(x, channels)
    x = layers.GlobalAveragePooling2D()(layers.Conv2D(CLASSES, 3, padding="same")(x))
    return tf.keras.Model(inputs, layers.Softmax()(x))  # type: ignore[attr-defined]


def build_trained_hybrid(
    path: Path, *, spread: float = 0.5, head: float = 1.0, epochs: int = 3, seed: int = 0
) -> Path:
    """Train the CNN, spread its batch-norm scales, scale its logits by ``head`` (a confident
    classifier's), write its hybrid int8 ``.tflite`` to ``path`` (and the float one beside
    it, ``*.float.tflite``)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    tf.keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    rng = np.random.default_rng(seed)
    images, labels = _images(rng)
    model = _network(tf)
    model.compile(tf.keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
    spreads = np.random.default_rng(seed + 1)
    model.fit(images, labels, batch_size=32, epochs=epochs, verbose=0, shuffle=False)
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            factor = 10 ** spreads.uniform(-spread, spread, gamma.shape)
            layer.set_weights([gamma * factor, beta * factor, mean, var])
    last = [layer for layer in model.layers if isinstance(layer, tf.keras.layers.Conv2D)][-1]
    last.set_weights([w * head for w in last.get_weights()])
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    path.with_suffix(".float.tflite").write_bytes(converter.convert())
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    path.write_bytes(converter.convert())
    return path
