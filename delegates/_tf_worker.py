"""Child process: run a Keras model or a SavedModel with TensorFlow on given input sets.

Arguments: ``--source S --inputs I.npz --names N.json
--result R.json --outputs O.npz [--signature KEY]``. ``I.npz`` holds ``s{k}_in_{i}`` (inputs in
the order of ``N.json``); outputs are written as ``s{k}_out_{j}`` with their names in the result
JSON. TensorFlow lives only here: the parent process may hold the GPU accelerator.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.proc.result_file import write_result


def _flatten(result: Any, names: list[str] | None) -> tuple[list[str], list[np.ndarray]]:
    if isinstance(result, dict):
        keys = list(result)
        return keys, [np.asarray(result[k]) for k in keys]
    if isinstance(result, list | tuple):
        values = [np.asarray(v) for v in result]
        labels = names if names and len(names) == len(values) else None
        return labels or [f"output_{i}" for i in range(len(values))], values
    return (names[:1] if names else ["output_0"]), [np.asarray(result)]


def _keras_call(path: Path) -> tuple[Any, list[str], list[str] | None, str]:
    import keras

    model = keras.saving.load_model(path, compile=False)
    in_names = [getattr(t, "name", f"input_{i}").split(":")[0] for i, t in enumerate(model.inputs)]
    out_names = list(getattr(model, "output_names", None) or []) or None

    def call(feed: dict[str, np.ndarray]) -> Any:
        named = set(feed) == set(in_names)
        args = [feed[n] for n in in_names] if named else list(feed.values())
        return model(args if len(args) > 1 else args[0], training=False)

    return call, in_names, out_names, f"keras {keras.__version__}"


def _saved_model_call(path: Path, key: str | None) -> tuple[Any, list[str], None, str]:
    import tensorflow as tf

    loaded = tf.saved_model.load(str(path))
    signatures = dict(loaded.signatures)
    if not signatures:
        raise ValueError(f"{path} has no signatures")
    key = key or ("serving_default" if "serving_default" in signatures else next(iter(signatures)))
    fn = signatures[key]
    spec_names = list(fn.structured_input_signature[1])

    def call(feed: dict[str, np.ndarray]) -> Any:
        if set(feed) == set(spec_names):
            kwargs = feed
        else:
            kwargs = dict(zip(spec_names, feed.values(), strict=True))
        return {
            k: v.numpy() for k, v in fn(**{k: tf.constant(v) for k, v in kwargs.items()}).items()
        }

    return call, spec_names, None, f"tensorflow {tf.__version__} SavedModel[{key}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tflkit.delegates._tf_worker")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--names", type=Path, required=True)
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--outputs", type=Path, required=True)
    parser.add_argument("--signature")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    state: dict[str, Any] = {"stage": "load"}
    try:
        start = time.perf_counter()
        if args.source.is_dir():
            call, in_names, out_names, framework = _saved_model_call(args.source, args.signature)
        else:
            call, in_names, out_names, framework = _keras_call(args.source)
        state.update(load_seconds=time.perf_counter() - start, framework=framework)
        names = json.loads(args.names.read_text())
        arrays: dict[str, np.ndarray] = {}
        times = []
        with np.load(args.inputs, allow_pickle=False) as npz:
            count = len(npz.files) // max(len(names), 1)
            for k in range(count):
                feed = {n: npz[f"s{k}_in_{i}"] for i, n in enumerate(names)}
                start = time.perf_counter()
                labels, values = _flatten(call(feed), out_names)
                times.append(time.perf_counter() - start)
                arrays.update({f"s{k}_out_{j}": v for j, v in enumerate(values)})
                state["output_names"] = labels
        np.savez(args.outputs, **arrays)
        state.update(stage="done", sets=count, infer_seconds=times, input_names=in_names)
    except Exception as exc:
        state.update(error=f"{type(exc).__name__}: {exc}".splitlines()[0])
    write_result(args.result, state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
