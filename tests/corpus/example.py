"""Build the bundled example model ``tflkit/examples/tiny_classifier.tflite``.

A small image classifier (conv, depthwise conv, pooling, dense) with two things the GPU
delegate rejects, so ``check`` and ``rewrite`` have something to show: a LOG_SOFTMAX head and
an int64 ARG_MAX output. Run:
``python -m tests.corpus.example tflkit/examples/tiny_classifier.tflite``.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: standard deviation of the dense head's weights (see ``build_example``)
HEAD_STDDEV = 10.0


def build_example() -> bytes:
    """The example's ``.tflite`` bytes (seeded weights)."""
    import tensorflow as tf

    tf.keras.utils.set_random_seed(7)
    image = tf.keras.Input((32, 32, 3), batch_size=1, name="image")
    x = tf.keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(image)
    x = tf.keras.layers.DepthwiseConv2D(3, padding="same", activation="relu6")(x)
    x = tf.keras.layers.Conv2D(16, 1, activation="relu")(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    # A head initialised at Keras's default scale gives near-uniform log-probabilities on every
    # photograph (they vary by 0.02, inside fp16's noise), which ``validate`` rightly calls "not
    # meaningful"; a wider head makes the classes differ, as a trained model's do.
    head = tf.keras.initializers.RandomNormal(stddev=HEAD_STDDEV)
    logits = tf.keras.layers.Dense(10, kernel_initializer=head)(x)
    log_probs = tf.keras.layers.Lambda(tf.nn.log_softmax, name="log_probs")(logits)
    label = tf.keras.layers.Lambda(lambda t: tf.argmax(t, axis=-1), name="label")(logits)
    model = tf.keras.Model(image, {"log_probs": log_probs, "label": label})
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    return converter.convert()


def main() -> None:
    target = Path(sys.argv[1])
    target.write_bytes(build_example())
    print(f"wrote {target} ({target.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
