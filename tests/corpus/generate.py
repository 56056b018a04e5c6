"""Generate the test model corpus with real TensorFlow.

Run as ``python -m tests.corpus.generate OUTDIR [NAME ...]``. Each generator returns the bytes of
one small ``.tflite`` model that exercises one feature; the feature is verified (see
``tests.corpus.features``) before the file is written. TensorFlow is imported lazily, inside the
generators, so importing this module is cheap and never loads TensorFlow.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tests import keras_weights
from tests.corpus import keras_models
from tests.corpus.keras_models import KERAS_GENERATORS

SEED = 0
IMAGE = (1, 16, 16, 3)  # NHWC input of the conv+dense family
CLASSES = 10


def _tf() -> Any:
    """Import TensorFlow quietly (lazy: only generators call this)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    return tf


def _rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def _convert(module: Any, *functions: Any, configure: Callable[[Any], None] | None = None) -> bytes:
    """Convert tf.functions of a tf.Module (one signature each) to TFLite bytes."""
    tf = _tf()
    concrete = [f.get_concrete_function() for f in functions]
    converter = tf.lite.TFLiteConverter.from_concrete_functions(concrete, module)
    if configure is not None:
        configure(converter)
    return bytes(converter.convert())


def _spec(shape: tuple[int | None, ...], name: str, dtype: str = "float32") -> Any:
    tf = _tf()
    return tf.TensorSpec(shape, getattr(tf, dtype), name=name)


def _unary(
    fn: Callable[[Any], Any],
    shape: tuple[int | None, ...] = (1, 8),
    configure: Callable[[Any], None] | None = None,
) -> bytes:
    """A one-input model computing ``{"y": fn(x)}``."""
    tf = _tf()

    class Unary(tf.Module):
        @tf.function(input_signature=[_spec(shape, "x")])
        def __call__(self, x: Any) -> dict[str, Any]:
            return {"y": fn(x)}

    module = Unary()
    return _convert(module, module.__call__, configure=configure)


# --- the conv + dense family (float, fp16, sparse, dynamic range, int8, uint8, metadata) --------


def _conv_dense_module() -> Any:
    """conv2d(3x3, 8) + bias + relu -> flatten -> dense(10); deterministic weights."""
    tf = _tf()
    rng = _rng()
    filters = tf.constant(rng.normal(0, 0.3, (3, 3, IMAGE[3], 8)).astype(np.float32))
    conv_bias = tf.constant(rng.normal(0, 0.1, (8,)).astype(np.float32))
    flat = IMAGE[1] * IMAGE[2] * 8
    dense = tf.constant(rng.normal(0, 0.05, (flat, CLASSES)).astype(np.float32))
    dense_bias = tf.constant(rng.normal(0, 0.1, (CLASSES,)).astype(np.float32))

    class ConvDense(tf.Module):
        @tf.function(input_signature=[_spec(IMAGE, "image")])
        def __call__(self, image: Any) -> dict[str, Any]:
            h = tf.nn.conv2d(image, filters, strides=1, padding="SAME")
            h = tf.nn.relu(tf.nn.bias_add(h, conv_bias))
            h = tf.reshape(h, [1, flat])
            return {"logits": tf.matmul(h, dense) + dense_bias}

    return ConvDense()


def _representative_images() -> Callable[[], Iterator[list[np.ndarray]]]:
    def dataset() -> Iterator[list[np.ndarray]]:
        rng = _rng()
        for _ in range(16):
            yield [rng.uniform(-1.0, 1.0, IMAGE).astype(np.float32)]

    return dataset


def _conv_dense(configure: Callable[[Any], None] | None = None) -> bytes:
    module = _conv_dense_module()
    return _convert(module, module.__call__, configure=configure)


def conv_dense() -> bytes:
    """Float32 conv2d + relu + dense: the baseline GPU-friendly model."""
    return _conv_dense()


def fp16_weights() -> bytes:
    """Float16 post-training quantization: fp16 weight buffers feeding DEQUANTIZE ops."""
    tf = _tf()

    def configure(c: Any) -> None:
        c.optimizations = [tf.lite.Optimize.DEFAULT]
        c.target_spec.supported_types = [tf.float16]

    return _conv_dense(configure)


def dynamic_range_int8() -> bytes:
    """Dynamic-range quantization: int8 weights, float activations (hybrid kernels)."""
    tf = _tf()

    def configure(c: Any) -> None:
        c.optimizations = [tf.lite.Optimize.DEFAULT]

    return _conv_dense(configure)


def _full_int8(io_type: str) -> bytes:
    tf = _tf()

    def configure(c: Any) -> None:
        c.optimizations = [tf.lite.Optimize.DEFAULT]
        c.representative_dataset = _representative_images()
        c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        c.inference_input_type = getattr(tf, io_type)
        c.inference_output_type = getattr(tf, io_type)

    return _conv_dense(configure)


def full_int8() -> bytes:
    """Full-integer quantization with int8 input and output (representative dataset)."""
    return _full_int8("int8")


def full_uint8_io() -> bytes:
    """Full-integer int8 model whose input and output are uint8 (QUANTIZE at the boundaries)."""
    return _full_int8("uint8")


def metadata() -> bytes:
    """conv_dense with an extra custom metadata entry appended to the flatbuffer."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model_from_bytearray(_conv_dense())
    payload = b'{"producer": "tflkit test corpus", "labels": 10}'
    buffer = fb.BufferT()
    buffer.data = np.frombuffer(payload, dtype=np.uint8)
    model.buffers.append(buffer)
    entry = fb.MetadataT()
    entry.name = "tflkit_corpus"
    entry.buffer = len(model.buffers) - 1
    model.metadata = [*(model.metadata or []), entry]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def sparse_weights() -> bytes:
    """A magnitude-pruned (90 %) dense layer converted with EXPERIMENTAL_SPARSITY -> DENSIFY."""
    tf = _tf()
    rng = _rng()
    weights = rng.normal(0, 0.2, (64, 32)).astype(np.float32)
    weights[np.abs(weights) < np.quantile(np.abs(weights), 0.9)] = 0.0  # magnitude pruning
    kernel = tf.constant(weights)

    def configure(c: Any) -> None:
        c.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY]

    return _unary(lambda x: tf.nn.relu(tf.matmul(x, kernel)), shape=(1, 64), configure=configure)


# --- ops the CPU runtime, the GPU or both handle specially ---------------------------------------


def custom_op() -> bytes:
    """allow_custom_ops: tf.math.erf has no builtin, so it becomes CUSTOM "Erf" (not flex)."""
    tf = _tf()

    def configure(c: Any) -> None:
        c.allow_custom_ops = True

    return _unary(tf.math.erf, configure=configure)


def flex_op() -> bytes:
    """Select TF ops: a bare tf.math.erf becomes the flex op FlexErf."""
    tf = _tf()

    def configure(c: Any) -> None:
        c.target_spec.supported_ops = [
            tf.lite.OpsSet.TFLITE_BUILTINS,
            tf.lite.OpsSet.SELECT_TF_OPS,
        ]

    return _unary(tf.math.erf, configure=configure)


def gelu() -> bytes:
    """tf.nn.gelu(approximate=False) -> the GELU builtin."""
    tf = _tf()
    return _unary(lambda x: tf.nn.gelu(x, approximate=False))


def log_softmax() -> bytes:
    """tf.nn.log_softmax -> LOG_SOFTMAX."""
    tf = _tf()
    return _unary(tf.nn.log_softmax)


def pack_same_tensor() -> bytes:
    """tf.stack([x, x]): PACK taking one tensor twice (aborts the GPU accelerator)."""
    tf = _tf()
    return _unary(lambda x: tf.stack([x, x]))


def int64_argmax() -> bytes:
    """ARG_MAX with an int64 output tensor."""
    tf = _tf()
    return _unary(lambda x: tf.math.argmax(x, axis=-1, output_type=tf.int64), shape=(1, 10))


def rank1_output() -> bytes:
    """A model whose output is rank 1 (shape [4])."""
    tf = _tf()
    kernel = tf.constant(_rng().normal(0, 0.5, (8, 4)).astype(np.float32))
    return _unary(lambda x: tf.reshape(tf.matmul(x, kernel), [4]))


def rank5() -> bytes:
    """5-D tensors: TRANSPOSE and RESHAPE on rank-5 shapes."""
    tf = _tf()

    def fn(x: Any) -> Any:
        t = tf.transpose(x * 2.0, perm=[0, 2, 1, 4, 3])  # [1, 3, 2, 5, 4]
        return tf.reshape(t, [1, 6, 1, 5, 4]) + 1.0

    return _unary(fn, shape=(1, 2, 3, 4, 5))


def string_or_bool() -> bytes:
    """A bool tensor path: GREATER -> SELECT, plus a bool output."""
    tf = _tf()

    class BoolPath(tf.Module):
        @tf.function(input_signature=[_spec((1, 8), "a"), _spec((1, 8), "b")])
        def __call__(self, a: Any, b: Any) -> dict[str, Any]:
            mask = tf.math.greater(a, b)
            return {"y": tf.where(mask, a, b * 2.0), "mask": tf.math.logical_not(mask)}

    module = BoolPath()
    return _convert(module, module.__call__)


# --- control flow, state, signatures ------------------------------------------------------------


def if_cond() -> bytes:
    """tf.cond on a data-dependent predicate -> IF with then/else subgraphs."""
    tf = _tf()

    def fn(x: Any) -> Any:
        return tf.cond(tf.reduce_sum(x) > 0.0, lambda: x * 2.0, lambda: x - 1.0)

    return _unary(fn)


def while_loop() -> bytes:
    """tf.while_loop -> WHILE with cond/body subgraphs."""
    tf = _tf()

    def fn(x: Any) -> Any:
        def body(i: Any, acc: Any) -> tuple[Any, Any]:
            return i + 1, acc * 0.5 + 1.0

        _, y = tf.while_loop(lambda i, acc: i < 5, body, [tf.constant(0), x])
        return y

    return _unary(fn)


def resource_variables() -> bytes:
    """A tf.Variable accumulator: VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE + CALL_ONCE init."""
    tf = _tf()

    class Accumulator(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.total = tf.Variable(tf.zeros([1, 4]))

        @tf.function(input_signature=[_spec((1, 4), "x")])
        def __call__(self, x: Any) -> dict[str, Any]:
            self.total.assign_add(x)
            return {"total": self.total.read_value()}

    def configure(c: Any) -> None:
        c.experimental_enable_resource_variables = True

    module = Accumulator()
    return _convert(module, module.__call__, configure=configure)


def multi_signature() -> bytes:
    """A tf.Module with two signatures, ``encode`` and ``decode``."""
    tf = _tf()
    weights = tf.constant(_rng().normal(0, 0.5, (8, 4)).astype(np.float32))

    class AutoEncoder(tf.Module):
        @tf.function(input_signature=[_spec((1, 8), "x")])
        def encode(self, x: Any) -> dict[str, Any]:
            return {"code": tf.nn.tanh(tf.matmul(x, weights))}

        @tf.function(input_signature=[_spec((1, 4), "code")])
        def decode(self, code: Any) -> dict[str, Any]:
            return {"x_hat": tf.matmul(code, weights, transpose_b=True)}

    module = AutoEncoder()
    return _convert(module, module.encode, module.decode)


# --- dynamic shapes -----------------------------------------------------------------------------


def dynamic_batch() -> bytes:
    """Batch dimension None -> shape_signature [-1, 8]."""
    tf = _tf()
    kernel = tf.constant(_rng().normal(0, 0.5, (8, 4)).astype(np.float32))
    return _unary(lambda x: tf.nn.relu(tf.matmul(x, kernel)), shape=(None, 8))


def dynamic_audio() -> bytes:
    """A fully dynamic 1-D waveform: pre-emphasis filter and RMS energy."""
    tf = _tf()

    class Audio(tf.Module):
        @tf.function(input_signature=[_spec((None,), "waveform")])
        def __call__(self, waveform: Any) -> dict[str, Any]:
            emphasized = waveform[1:] - 0.97 * waveform[:-1]
            rms = tf.sqrt(tf.reduce_mean(tf.square(waveform), keepdims=True) + 1e-6)
            return {"emphasized": emphasized, "rms": rms}

    module = Audio()
    return _convert(module, module.__call__)


# --- recurrent ----------------------------------------------------------------------------------

LSTM_STEPS, LSTM_FEATURES, LSTM_UNITS = 10, 8, 16


def lstm() -> bytes:
    """A Keras-style LSTM layer fused to UNIDIRECTIONAL_SEQUENCE_LSTM with variable state.

    Keras 3 no longer marks its LSTM for fusion (see ``keras3_lstm``); this reproduces the
    composite-function interface tf.keras 2 used (``api_implements="lstm_..."``), which the
    converter replaces by the fused op with variable (stateful) activation and cell tensors.
    """
    tf = _tf()
    rng = _rng()
    units = LSTM_UNITS
    kernel = tf.constant(rng.normal(0, 0.2, (LSTM_FEATURES, 4 * units)).astype(np.float32))
    recurrent = tf.constant(rng.normal(0, 0.2, (units, 4 * units)).astype(np.float32))
    bias = tf.constant(rng.normal(0, 0.1, (4 * units,)).astype(np.float32))

    def standard_lstm(
        inputs: Any, init_h: Any, init_c: Any, kernel: Any, recurrent_kernel: Any, bias: Any
    ) -> tuple[Any, ...]:
        def step(carry: tuple[Any, Any], x_t: Any) -> tuple[Any, Any]:
            h, c = carry
            z = tf.matmul(x_t, kernel) + tf.matmul(h, recurrent_kernel) + bias
            i, f, g, o = tf.split(z, 4, axis=1)
            c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
            return tf.sigmoid(o) * tf.tanh(c), c

        hs, cs = tf.scan(step, tf.transpose(inputs, [1, 0, 2]), initializer=(init_h, init_c))
        return hs[-1], tf.transpose(hs, [1, 0, 2]), hs[-1], cs[-1], tf.constant(0.0)

    fused = tf.function(
        standard_lstm,
        autograph=False,
        experimental_attributes={
            "api_implements": "lstm_tflkit_corpus",
            "api_preferred_device": "CPU",
            "time_major": False,
            "go_backwards": False,
        },
    )

    class Lstm(tf.Module):
        @tf.function(input_signature=[_spec((1, LSTM_STEPS, LSTM_FEATURES), "sequence")])
        def __call__(self, sequence: Any) -> dict[str, Any]:
            zeros = tf.zeros([1, units])
            last, *_ = fused(sequence, zeros, zeros, kernel, recurrent, bias)
            return {"last": last}

    module = Lstm()
    return _convert(module, module.__call__)


def keras3_lstm() -> bytes:
    """A Keras 3 ``keras.layers.LSTM``: converts to a WHILE loop (no fused LSTM op)."""
    tf = _tf()
    import keras

    keras.utils.set_random_seed(SEED)
    model = keras.Sequential(
        [
            keras.Input((LSTM_STEPS, LSTM_FEATURES), batch_size=1),
            keras.layers.LSTM(LSTM_UNITS),
            keras.layers.Dense(4),
        ]
    )
    return bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())


DEEP_BLOCKS, DEEP_WIDTH, DEEP_REJECT_EVERY = 200, 16, 40


def deep_600_ops() -> bytes:
    """A deep chain of 600+ ops (long reports, partitions): 200 gated blocks
    ``x * sigmoid(x @ W_i)`` (FULLY_CONNECTED, LOGISTIC, MUL) with a LOG_SOFTMAX, which the GPU
    rejects, after every 40th block."""
    tf = _tf()
    rng = _rng()
    weights = [
        tf.constant(rng.normal(0, 0.3, (DEEP_WIDTH, DEEP_WIDTH)).astype(np.float32))
        for _ in range(DEEP_BLOCKS)
    ]

    class Deep(tf.Module):
        @tf.function(input_signature=[_spec((1, DEEP_WIDTH), "x")])
        def __call__(self, x: Any) -> dict[str, Any]:
            for i, w in enumerate(weights):
                x = x * tf.sigmoid(tf.matmul(x, w))
                if (i + 1) % DEEP_REJECT_EVERY == 0:
                    x = tf.nn.log_softmax(x)
            return {"y": x}

    module = Deep()
    return _convert(module, module.__call__)


GENERATORS: dict[str, Callable[[], bytes]] = {
    "conv_dense": conv_dense,
    "fp16_weights": fp16_weights,
    "sparse_weights": sparse_weights,
    "dynamic_range_int8": dynamic_range_int8,
    "full_int8": full_int8,
    "full_uint8_io": full_uint8_io,
    "metadata": metadata,
    "custom_op": custom_op,
    "flex_op": flex_op,
    "gelu": gelu,
    "log_softmax": log_softmax,
    "pack_same_tensor": pack_same_tensor,
    "int64_argmax": int64_argmax,
    "rank1_output": rank1_output,
    "rank5": rank5,
    "string_or_bool": string_or_bool,
    "if_cond": if_cond,
    "while_loop": while_loop,
    "resource_variables": resource_variables,
    "multi_signature": multi_signature,
    "dynamic_batch": dynamic_batch,
    "dynamic_audio": dynamic_audio,
    "lstm": lstm,
    "keras3_lstm": keras3_lstm,
    "deep_600_ops": deep_600_ops,
    **KERAS_GENERATORS,
}

#: Files whose content keys the generated corpus cache (editing one regenerates it).
SOURCE_FILES = (Path(__file__), Path(keras_models.__file__), keras_weights.SOURCE)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same directory + os.replace."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def generate(outdir: Path, names: list[str]) -> list[str]:
    """Generate, verify and write each named model; return the error messages (empty if ok)."""
    from tests.corpus.features import check

    outdir.mkdir(parents=True, exist_ok=True)
    errors = []
    for name in names:
        start = time.perf_counter()
        try:
            data = GENERATORS[name]()
            check(name, data)
        except Exception as exc:  # report every broken generator, not only the first
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        write_atomic(outdir / f"{name}.tflite", data)
        took = time.perf_counter() - start
        print(f"{name}: {len(data)} bytes in {took:.2f}s", file=sys.stderr)
    return errors


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].startswith("-"):
        print("usage: python -m tests.corpus.generate OUTDIR [NAME ...]", file=sys.stderr)
        print("models: " + " ".join(GENERATORS), file=sys.stderr)
        return 2
    outdir, names = Path(args[0]), args[1:] or list(GENERATORS)
    unknown = [n for n in names if n not in GENERATORS]
    if unknown:
        print(
            f"unknown model(s): {', '.join(unknown)}; known: {', '.join(GENERATORS)}",
            file=sys.stderr,
        )
        return 2
    errors = generate(outdir, names)
    for error in errors:
        print(f"FAILED {error}", file=sys.stderr)
    return 1 if errors else 0


# --- streaming (appended: state in resource variables) ------------------------------------------

KWS_FEATURES, KWS_WINDOW, KWS_CHANNELS, KWS_HIDDEN, KWS_CLASSES = 40, 8, 16, 32, 4


def streaming_kws() -> bytes:
    """A streaming keyword-spotting step as a wake-word app runs it: one 40-bin feature frame in,
    class scores out; a ring buffer of the last 8 frames feeds a Conv1D over time, and a GRU-style
    recurrent state carries context. Both states are tf.Variables, converted with resource
    variables (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE, zeros assigned by a CALL_ONCE)."""
    tf = _tf()
    rng = _rng()
    f, t, c, h, k = KWS_FEATURES, KWS_WINDOW, KWS_CHANNELS, KWS_HIDDEN, KWS_CLASSES

    def weight(*shape: int, std: float = 0.2) -> Any:
        return tf.constant(rng.normal(0, std, shape).astype(np.float32))

    conv, conv_bias = weight(t, f, c, std=0.1), weight(c, std=0.05)
    wz, uz, wn, un = weight(c, h), weight(h, h), weight(c, h), weight(h, h)
    wo, bo = weight(h, k), weight(k, std=0.05)

    class Step(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.frames = tf.Variable(tf.zeros([1, t - 1, f]), name="frames")
            self.hidden = tf.Variable(tf.zeros([1, h]), name="hidden")

        @tf.function(input_signature=[_spec((1, 1, f), "frame")])
        def __call__(self, frame: Any) -> dict[str, Any]:
            window = tf.concat([self.frames, frame], axis=1)
            self.frames.assign(window[:, 1:, :])
            x = tf.nn.relu(tf.nn.conv1d(window, conv, stride=1, padding="VALID") + conv_bias)
            x = tf.reshape(x, [1, c])
            state = self.hidden.read_value()
            z = tf.sigmoid(tf.matmul(x, wz) + tf.matmul(state, uz))
            n = tf.tanh(tf.matmul(x, wn) + tf.matmul(state * z, un))
            new_state = (1.0 - z) * state + z * n
            self.hidden.assign(new_state)
            return {"scores": tf.nn.softmax(tf.matmul(new_state, wo) + bo)}

    def configure(converter: Any) -> None:
        converter.experimental_enable_resource_variables = True

    module = Step()
    return _convert(module, module.__call__, configure=configure)


GENERATORS["streaming_kws"] = streaming_kws


if __name__ == "__main__":
    sys.exit(main())
