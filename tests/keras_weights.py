"""Random but alive Keras weights for test models (imported only inside TensorFlow processes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

#: Generators that use this module hash it into their cache keys.
SOURCE = Path(__file__)


def make_alive(model: Any, rng: np.random.Generator) -> None:
    """Replace BatchNorm statistics and Dense weights: Keras' defaults zero most activations."""
    import keras

    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            n = layer.gamma.shape[0]
            layer.set_weights(
                [
                    rng.uniform(0.5, 1.5, n),
                    rng.uniform(-0.05, 0.2, n),
                    rng.uniform(-0.1, 0.1, n),
                    rng.uniform(0.5, 1.5, n),
                ]
            )
        elif isinstance(layer, keras.layers.Dense):
            kernel, bias = layer.get_weights()
            layer.set_weights([rng.normal(0, 0.05, kernel.shape), rng.normal(0, 0.1, bias.shape)])
