"""Build MTCNN's p-, r- and o-nets the way mtcnn-tflite 0.0.4 builds them (its own layers, its
own weights file ``mtcnn_weights.npy``, ``Optimize.DEFAULT``), as ``.tflite`` files.

``python tests/corpus/mtcnn_build.py WEIGHTS.npy OUTDIR [P_NET_HEIGHT P_NET_WIDTH]``: run in its
own interpreter (TensorFlow never enters the pytest process). The p-net is fully convolutional;
mtcnn-tflite builds one per image scale, here one for the given size (default 64x64).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def _nets(weights_file: str, p_shape: tuple[int, int, int]):
    import tensorflow as tf
    from tensorflow.keras.layers import Conv2D, Dense, Flatten, Input, MaxPooling2D, PReLU, Softmax
    from tensorflow.keras.models import Model

    weights = np.load(weights_file, allow_pickle=True).tolist()

    def pnet():
        inp = Input(p_shape)
        x = Conv2D(10, 3, padding="valid")(inp)
        x = PReLU(shared_axes=[1, 2])(x)
        x = MaxPooling2D(2, 2, padding="same")(x)
        x = Conv2D(16, 3, padding="valid")(x)
        x = PReLU(shared_axes=[1, 2])(x)
        x = Conv2D(32, 3, padding="valid")(x)
        x = PReLU(shared_axes=[1, 2])(x)
        prob = Softmax(axis=3)(Conv2D(2, 1)(x))
        box = Conv2D(4, 1)(x)
        net = Model(inp, [box, prob])
        net.set_weights(weights["pnet"])
        return net

    def rnet():
        inp = Input((24, 24, 3))
        x = Conv2D(28, 3, padding="valid")(inp)
        x = PReLU(shared_axes=[1, 2])(x)
        x = MaxPooling2D(3, 2, padding="same")(x)
        x = Conv2D(48, 3, padding="valid")(x)
        x = PReLU(shared_axes=[1, 2])(x)
        x = MaxPooling2D(3, 2, padding="valid")(x)
        x = Conv2D(64, 2, padding="valid")(x)
        x = PReLU(shared_axes=[1, 2])(x)
        x = PReLU()(Dense(128)(Flatten()(x)))
        net = Model(inp, [Dense(4)(x), Softmax(axis=1)(Dense(2)(x))])
        net.set_weights(weights["rnet"])
        return net

    def onet():
        inp = Input((48, 48, 3))
        x = Conv2D(32, 3, padding="valid")(inp)
        x = PReLU(shared_axes=[1, 2])(x)
        x = MaxPooling2D(3, 2, padding="same")(x)
        x = Conv2D(64, 3, padding="valid")(x)
        x = PReLU(shared_axes=[1, 2])(x)
        x = MaxPooling2D(3, 2, padding="valid")(x)
        x = Conv2D(64, 3, padding="valid")(x)
        x = PReLU(shared_axes=[1, 2])(x)
        x = MaxPooling2D(2, 2, padding="same")(x)
        x = Conv2D(128, 2, padding="valid")(x)
        x = PReLU(shared_axes=[1, 2])(x)
        x = PReLU()(Dense(256)(Flatten()(x)))
        net = Model(inp, [Dense(4)(x), Dense(10)(x), Softmax(axis=1)(Dense(2)(x))])
        net.set_weights(weights["onet"])
        return net

    for name, build in (("pnet", pnet), ("rnet", rnet), ("onet", onet)):
        converter = tf.lite.TFLiteConverter.from_keras_model(build())
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        yield name, converter.convert()


def main(argv: list[str]) -> int:
    weights, out = argv[0], Path(argv[1])
    height, width = (int(argv[2]), int(argv[3])) if len(argv) >= 4 else (64, 64)
    for name, data in _nets(weights, (height, width, 3)):
        (out / f"mtcnn_{name}.tflite").write_bytes(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
