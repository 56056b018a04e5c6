"""The text-model family, built with TensorFlow and converted with the real TFLite converter.

What users ship as the first ops of a text model: an embedding lookup on ``[1, T]`` ids
(int64 or int32), position arithmetic on the ids, and a mask. Each builder returns ``.tflite``
bytes; the forms:

* ``bert``: token + position embeddings, layer norm, one self-attention block; the position ids
  computed from the ids' shape, a padding mask from the ids or from a mask input;
* ``t5``: T5's relative position buckets (log-spaced, computed from a RANGE of the length) into a
  per-head bias table added to the attention scores;
* ``cnn_tagger``: word embeddings -> CONV_2D -> a tag per token (ARG_MAX);
* ``gru_tagger``: word embeddings -> an unrolled GRU -> a tag per token.

Every id input goes through ONNX's negative-index normalisation
(``where(ids < 0, ids + vocab, ids)``: what onnx2tf writes for each ONNX Gather), so the lookup
reads computed int64 indices as in converted ONNX models. TensorFlow is imported inside the
functions; ``tests/test_text_models.py`` converts, rewrites and probes each.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

VOCAB, WIDTH, LENGTH, HEADS, TAGS = 64, 16, 12, 2, 5
#: T5's bucket count and the distance from which buckets grow logarithmically.
BUCKETS, MAX_DISTANCE = 8, 16


@dataclass(frozen=True)
class TextForm:
    """One member of the family."""

    arch: str
    ids: str = "int64"
    mask: bool = False

    @property
    def name(self) -> str:
        return f"{self.arch}_{self.ids}" + ("_mask" if self.mask else "")


FORMS = tuple(
    TextForm(arch, ids, mask)
    for arch in ("bert", "t5", "cnn_tagger", "gru_tagger")
    for ids in ("int64", "int32")
    for mask in (False, True)
)


def _tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.random.set_seed(0)
    return tf


def _weights(rng: np.random.Generator, *shape: int, spread: float = 0.3) -> np.ndarray:
    return rng.normal(0.0, spread, shape).astype(np.float32)


def _lookup(tf: Any, table: Any, ids: Any) -> Any:
    """ONNX Gather as onnx2tf writes it: negative ids counted from the end, then a gather."""
    vocab = tf.cast(tf.shape(table)[0], ids.dtype)
    return tf.gather(table, tf.where(ids < 0, ids + vocab, ids))


def _layer_norm(tf: Any, x: Any) -> Any:
    mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-5)


def _attention(tf: Any, w: dict[str, Any], x: Any, bias: Any) -> Any:
    """One multi-head self-attention block with an additive score bias ``[1|H, H|1, T, T]``."""
    t, d = LENGTH, WIDTH // HEADS

    def heads(y: Any) -> Any:
        return tf.transpose(tf.reshape(y, [1, t, HEADS, d]), [0, 2, 1, 3])

    q, k, v = (heads(tf.matmul(x, w[n])) for n in ("q", "k", "v"))
    scores = tf.matmul(q, k, transpose_b=True) / float(np.sqrt(d)) + bias
    mixed = tf.matmul(tf.nn.softmax(scores, axis=-1), v)
    return tf.matmul(tf.reshape(tf.transpose(mixed, [0, 2, 1, 3]), [1, t, WIDTH]), w["o"])


def _mask_bias(tf: Any, ids: Any, mask: Any | None) -> Any:
    """0 where a token is real, -1e4 where it is padding (id 0, or 0 in the mask input)."""
    keep = tf.cast(mask if mask is not None else tf.not_equal(ids, 0), tf.float32)
    return tf.reshape((1.0 - keep) * -1e4, [1, 1, 1, LENGTH])


def _bert(tf: Any, w: dict[str, Any], ids: Any, mask: Any | None) -> Any:
    positions = tf.range(tf.shape(ids)[1], dtype=ids.dtype)[None, :]
    x = _lookup(tf, w["tokens"], ids) + _lookup(tf, w["positions"], positions)
    x = _layer_norm(tf, x)
    return x + _attention(tf, w, x, _mask_bias(tf, ids, mask))


def _buckets(tf: Any, relative: Any) -> Any:
    """T5's bidirectional relative position buckets (int64 arithmetic as exported)."""
    half = BUCKETS // 2
    side = tf.cast(relative > 0, relative.dtype) * half
    distance = tf.abs(relative)
    exact = half // 2
    is_small = distance < exact
    far = tf.cast(
        tf.math.log(tf.cast(distance, tf.float32) / exact + 1e-6)
        / float(np.log(MAX_DISTANCE / exact))
        * (half - exact),
        relative.dtype,
    )
    far = tf.minimum(far + exact, half - 1)
    return side + tf.where(is_small, distance, far)


def _t5(tf: Any, w: dict[str, Any], ids: Any, mask: Any | None) -> Any:
    length = tf.shape(ids, out_type=ids.dtype)[1]
    position = tf.range(length, dtype=ids.dtype)
    relative = position[None, :] - position[:, None]
    bias = tf.transpose(_lookup(tf, w["relative"], _buckets(tf, relative)), [2, 0, 1])[None]
    x = _layer_norm(tf, _lookup(tf, w["tokens"], ids))
    if mask is not None:
        bias = bias + _mask_bias(tf, ids, mask)
    return x + _attention(tf, w, x, bias)


def _cnn_tagger(tf: Any, w: dict[str, Any], ids: Any, mask: Any | None) -> Any:
    x = _lookup(tf, w["tokens"], ids)[:, None]  # [1, 1, T, D]
    x = tf.nn.relu(tf.nn.conv2d(x, w["conv"], 1, "SAME") + w["conv_bias"])
    logits = tf.matmul(x[:, 0], w["tags"])
    if mask is not None:
        logits = logits * tf.cast(mask, tf.float32)[..., None]
    return tf.argmax(logits, axis=-1)


def _gru_tagger(tf: Any, w: dict[str, Any], ids: Any, mask: Any | None) -> Any:
    x = _lookup(tf, w["tokens"], ids)
    h = tf.zeros([1, WIDTH])
    outputs = []
    for t in range(LENGTH):  # unrolled: TFLite's GRU is a WHILE loop
        zr = tf.sigmoid(tf.matmul(x[:, t], w["gru_x"][:, : 2 * WIDTH]) + tf.matmul(h, w["gru_h"]))
        z, r = zr[:, :WIDTH], zr[:, WIDTH:]
        c = tf.tanh(tf.matmul(x[:, t], w["gru_x"][:, 2 * WIDTH :]) + tf.matmul(r * h, w["gru_c"]))
        h = z * h + (1.0 - z) * c
        outputs.append(h)
    logits = tf.matmul(tf.stack(outputs, axis=1), w["tags"])
    if mask is not None:
        logits = logits * tf.cast(mask, tf.float32)[..., None]
    return logits


_ARCHS: dict[str, Callable[..., Any]] = {
    "bert": _bert,
    "t5": _t5,
    "cnn_tagger": _cnn_tagger,
    "gru_tagger": _gru_tagger,
}


def _weight_set(tf: Any) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    d = WIDTH
    arrays = {
        "tokens": _weights(rng, VOCAB, d, spread=1.0),
        "positions": _weights(rng, LENGTH, d, spread=1.0),
        "relative": _weights(rng, BUCKETS, HEADS, spread=1.0),
        **{n: _weights(rng, d, d) for n in ("q", "k", "v", "o")},
        "conv": _weights(rng, 1, 3, d, d),
        "conv_bias": _weights(rng, d, spread=0.1),
        "tags": _weights(rng, d, TAGS),
        "gru_x": _weights(rng, d, 3 * d),
        "gru_h": _weights(rng, d, 2 * d),
        "gru_c": _weights(rng, d, d),
    }
    return {k: tf.constant(v) for k, v in arrays.items()}


def build(form: TextForm) -> bytes:
    """The ``.tflite`` bytes of ``form`` (inputs ``ids`` and, with a mask, ``mask``)."""
    tf = _tf()
    dtype = tf.int64 if form.ids == "int64" else tf.int32
    weights = _weight_set(tf)
    arch = _ARCHS[form.arch]
    specs = [tf.TensorSpec([1, LENGTH], dtype, name="ids")]
    if form.mask:
        specs.append(tf.TensorSpec([1, LENGTH], dtype, name="mask"))

    class Text(tf.Module):
        @tf.function(input_signature=specs)
        def serve(self, ids: Any, mask: Any | None = None) -> dict[str, Any]:
            return {"output": arch(tf, weights, ids, mask)}

    module = Text()
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.serve.get_concrete_function()], module
    )
    return bytes(converter.convert())


def feed(form: TextForm, seed: int = 0) -> dict[str, np.ndarray]:
    """Ids in the vocabulary (some padding at the end), and the matching mask."""
    rng = np.random.default_rng(seed)
    dtype = np.int64 if form.ids == "int64" else np.int32
    ids = rng.integers(1, VOCAB, (1, LENGTH)).astype(dtype)
    ids[0, -3:] = 0
    out = {"ids": ids}
    if form.mask:
        out["mask"] = (ids != 0).astype(dtype)
    return out


def main(argv: list[str]) -> int:
    """``python tests/text_models.py DIR``: every form as ``DIR/NAME.tflite``, then ``DONE``."""
    from pathlib import Path

    out = Path(argv[0])
    for form in FORMS:
        (out / f"{form.name}.tflite").write_bytes(build(form))
    (out / "DONE").write_text("\n".join(f.name for f in FORMS) + "\n")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
