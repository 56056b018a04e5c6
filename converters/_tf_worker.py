"""Child process: convert a Keras model or a SavedModel with TensorFlow, record the reference.

Arguments: ``JOB.json``. The job names the source, its kind
(``keras`` or ``saved_model``), the options (:class:`ConvertOptions` as JSON) and a work dir.
The worker writes ``model.tflite``, ``reference.npz`` (a reference file: seeded inputs and the
framework's float32 outputs) and ``result.json`` there. TensorFlow lives only in this process:
the parent may hold the GPU accelerator.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.delegates.reference_io import real_values
from tflkit.errors import UsageError
from tflkit.proc.result_file import RESULT_FILE, write_result

from ._input_shapes import filled, given_shapes
from .calibration import InputSpec, calibration_feeds

Call = Callable[[dict[str, Any]], dict[str, Any]]

_SELECT_OPS = re.compile(r"TF Select ops: (.+)")
_CUSTOM_OPS = re.compile(r"Custom ops: (.+)")
_DETAIL = re.compile(r"^\s+(tf\.\w+\(.*)$", re.MULTILINE)
_WHERE = re.compile(r'fused\["(\w+):", callsite\("([^"@]+)@')


def _keras_source(
    path: Path, unsafe: bool = False
) -> tuple[Any, list[tuple[str, Any]], Call, Any, str]:
    """Load a Keras file; ``unsafe`` lets Keras run the Python code of its Lambda layers."""
    import keras

    try:
        model = keras.saving.load_model(path, compile=False, safe_mode=not unsafe)
    except ValueError as exc:
        if "safe_mode" not in str(exc):
            raise
        raise UsageError(
            f"{path.name} has a Lambda layer holding Python code, which Keras does not run from "
            "a file by default: if you trust the file, pass --unsafe-deserialization"
        ) from None
    return _keras_model(model)


def _keras_model(model: Any) -> tuple[Any, list[tuple[str, Any]], Call, Any, str]:
    """(trackable, [(input name, TensorSpec with dynamic dims)], serve fn body, ref, framework)."""
    import keras
    import tensorflow as tf

    if not getattr(model, "inputs", None):
        raise UsageError("the Keras model has no defined inputs: build it on keras.Input first")
    layer_names = {
        id(layer.output): layer.name
        for layer in model.layers
        if isinstance(layer, keras.layers.InputLayer)
    }
    names = [layer_names.get(id(t), t.name) for t in model.inputs]
    specs = [
        (n, tf.TensorSpec(t.shape, t.dtype, name=n))
        for n, t in zip(names, model.inputs, strict=True)
    ]
    out_names = list(getattr(model, "output_names", None) or [])

    def named(out: Any) -> dict[str, Any]:
        if isinstance(out, dict):
            return dict(out)
        values = list(out) if isinstance(out, list | tuple) else [out]
        if len(out_names) == len(values) and len(set(out_names)) == len(values):
            return dict(zip(out_names, values, strict=True))
        return {f"output_{i}": v for i, v in enumerate(values)}

    def call(feed: dict[str, Any]) -> dict[str, Any]:
        args = [feed[n] for n in names]
        return named(model(args[0] if len(args) == 1 else args, training=False))

    return model, specs, call, call, f"keras {keras.__version__}"


def _saved_model_source(
    path: Path, key: str | None
) -> tuple[Any, list[tuple[str, Any]], Call, Call, str]:
    import tensorflow as tf

    loaded = tf.saved_model.load(str(path))
    signatures = dict(loaded.signatures)
    if not signatures:
        raise UsageError(f"{path} has no signatures: export it with a serving signature")
    if key is not None and key not in signatures:
        raise UsageError(f"{path} has no signature {key!r} (it has {sorted(signatures)})")
    key = key or ("serving_default" if "serving_default" in signatures else next(iter(signatures)))
    fn = signatures[key]
    specs = list(fn.structured_input_signature[1].items())

    def call(feed: dict[str, Any]) -> dict[str, Any]:
        return dict(fn(**feed))

    return loaded, specs, call, call, f"tensorflow {tf.__version__} SavedModel[{key}]"


def _static_specs(specs: list[tuple[str, Any]], options: dict[str, Any]) -> list[InputSpec]:
    """Static shapes: ``input_shapes`` by name, else the unknown batch becomes ``batch``."""
    named, fill = given_shapes(options)
    given = {k: tuple(v) for k, v in named.items()}
    unknown = sorted(set(given) - {n for n, _ in specs})
    if unknown:
        raise UsageError(
            f"--input-shape names {unknown} are not inputs of the model ({[n for n, _ in specs]})"
        )
    out = []
    for name, spec in specs:
        dims = list(spec.shape.as_list()) if spec.shape.rank is not None else None
        if name in given:
            shape = given[name]
            if dims is not None and (
                len(dims) != len(shape)
                or any(d not in (None, s) for d, s in zip(dims, shape, strict=True))
            ):
                raise UsageError(f"--input-shape {name}={shape} does not fit the model's {dims}")
        elif dims is None:
            raise UsageError(
                f"input {name} has an unknown rank: pass --input-shape {name}=D1,D2,..."
            )
        else:
            if dims and dims[0] is None:
                dims[0] = int(options["batch"])
            dims = filled(dims, fill)
            if any(d is None for d in dims):
                shown = ",".join("?" if d is None else str(d) for d in dims)
                raise UsageError(
                    f"input {name} has dynamic dimensions ({shown}); the GPU needs static shapes: "
                    f"pass --input-shape {name}="
                    + ",".join("N" if d is None else str(d) for d in dims)
                )
            shape = tuple(dims)
        out.append(InputSpec(name, tuple(int(d) for d in shape), spec.dtype.name))
    return out


def _static_saved_model(serve: Any, trackable: Any, tf_specs: dict[str, Any], where: Path) -> Path:
    """Save the static-shape serving function as a one-signature SavedModel.

    Converting from a SavedModel freezes every variable into constants; converting the live
    concrete function kept Keras variables as uninitialized resource variables.
    """
    import tensorflow as tf

    path = where / "static_saved_model"
    if _is_keras(trackable):
        import keras

        archive = keras.export.ExportArchive()
        archive.track(trackable)
        specs = list(tf_specs.values())

        def positional(*args: Any) -> dict[str, Any]:
            return serve.python_function(**dict(zip(tf_specs, args, strict=True)))

        archive.add_endpoint("serving_default", positional, input_signature=specs)
        archive.write_out(str(path), verbose=False)
        return path
    module = tf.Module()
    module.source = trackable
    module.serve = serve
    signatures = {"serving_default": serve.get_concrete_function(**tf_specs)}
    tf.saved_model.save(module, str(path), signatures=signatures)
    return path


def _is_keras(obj: Any) -> bool:
    try:
        import keras
    except ImportError:
        return False
    return isinstance(obj, keras.Model)


def _converter(saved: Path, specs: list[InputSpec], options: dict[str, Any]) -> Any:
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(
        str(saved), signature_keys=["serving_default"]
    )
    ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    quantize = options["quantize"]
    if quantize == "int8":
        ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        feeds = calibration_feeds(
            Path(options["representative"]),
            specs,
            steps=int(options["calibration_steps"]),
            value_range=tuple(options["image_range"]),
        )
        converter.representative_dataset = lambda: (dict(f) for f in feeds)
        if options["int8_io"]:
            converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
    if quantize in ("dynamic", "int8") or options["fp16"]:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if options["fp16"]:
        converter.target_spec.supported_types = [tf.float16]
    if options["allow_flex"]:
        ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
    converter.target_spec.supported_ops = ops
    for name, value in options["converter_options"].items():
        setattr(converter, name, bool(value))
    return converter


def _conversion_failure(text: str) -> dict[str, Any]:
    """What the converter could not map to builtins: op names, the layers, the signatures."""
    select = _SELECT_OPS.search(text)
    custom = _CUSTOM_OPS.search(text)
    where: dict[str, list[str]] = {}
    for op, loc in _WHERE.findall(text):
        where.setdefault(op, [])
        if loc not in where[op]:
            where[op].append(loc)
    details = sorted(set(_DETAIL.findall(text)))
    first = next((ln for ln in text.splitlines() if "error:" in ln and "loc(" not in ln), "")
    return {
        "select_ops": [s.strip() for s in select.group(1).split(",")] if select else [],
        "custom_ops": [s.strip() for s in custom.group(1).split(",")] if custom else [],
        "where": where,
        "details": details[:20],
        "message": first.strip()[:500] or text.strip().splitlines()[-1][:500],
    }


def _tflite_input_types(inputs: list[dict[str, Any]], tensors: dict[str, Any]) -> None:
    """Each input's dtype as the ``.tflite`` takes it (int8 under ``--int8-io``, with its scale
    and zero point), the source's kept as ``source_dtype`` where they differ; by name, else by
    position."""
    from tflkit.ir.entry import IoSpec

    if not all(entry["name"] in tensors for entry in inputs):
        tensors = {e["name"]: t for e, t in zip(inputs, tensors.values(), strict=False)}
    for entry in inputs:
        tensor = tensors.get(entry["name"])
        if tensor is None or tensor.dtype is None:
            continue
        spec = IoSpec(entry["name"], tensor, tuple(tensor.shape))
        if spec.dtype.name != entry["dtype"]:
            entry["source_dtype"] = entry["dtype"]
            entry["dtype"] = spec.dtype.name
        if spec.quant is not None:
            entry["scale"], entry["zero_point"] = (float(spec.quant[0]), int(spec.quant[1]))


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Convert the job's Keras model or SavedModel, then record the float reference outputs;
    returns the state (its ``stage`` says how far it got, ``error`` why it stopped)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    state: dict[str, Any] = {"stage": "import"}
    try:
        data, ref = _convert(job, state)
        state["stage"] = "reference"
        _reference(job, data, ref, state)
        state["stage"] = "done"
    except UsageError as exc:
        state.update(error=str(exc), error_kind="usage")
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        state.update(error=text.splitlines()[0][:2000], error_kind=state["stage"])
    return state


def _convert(job: dict[str, Any], state: dict[str, Any]) -> tuple[bytes, Any]:
    """Load the source, freeze its input shapes and convert: the .tflite bytes (also written to
    the work folder) and the source's reference function."""
    work = Path(job["workdir"])
    options = job["options"]
    start = time.perf_counter()
    import tensorflow as tf

    state.update(tensorflow=tf.__version__, import_seconds=time.perf_counter() - start)
    state["stage"] = "load"
    source = Path(job["source"])
    if job["kind"] == "keras":
        unsafe = bool(options.get("unsafe_deserialization"))
        trackable, dyn, body, ref, framework = _keras_source(source, unsafe)
    else:
        trackable, dyn, body, ref, framework = _saved_model_source(source, options["signature"])
    state["framework"] = framework
    try:
        import keras

        state["keras"] = keras.__version__
    except ImportError:
        pass
    specs = _static_specs(dyn, options)
    state["inputs"] = [
        {
            "name": s.name,
            "shape": list(s.shape),
            "dtype": s.dtype,
            "source_shape": [None if d is None else int(d) for d in spec.shape.as_list()],
        }
        for s, (_, spec) in zip(specs, dyn, strict=True)
    ]

    @tf.function
    def serve(**kw: Any) -> dict[str, Any]:
        return body(kw)

    tf_specs = {s.name: tf.TensorSpec(s.shape, s.dtype, name=s.name) for s in specs}
    state["stage"] = "convert"
    start = time.perf_counter()
    saved = _static_saved_model(serve, trackable, tf_specs, work)
    converter = _converter(saved, specs, options)
    try:
        data = converter.convert()
    except Exception as exc:
        state["failure"] = _conversion_failure(str(exc))
        raise
    state["convert_seconds"] = time.perf_counter() - start
    (work / "model.tflite").write_bytes(data)
    return data, ref


def _reference(job: dict[str, Any], data: bytes, ref: Any, state: dict[str, Any]) -> None:
    """Run the source on the inputs validate will feed the .tflite and save the reference file;
    without flex ops, also measure the CPU interpreter against it."""
    import tensorflow as tf

    from tflkit import ir
    from tflkit.delegates.tf_reference import save_reference
    from tflkit.ir.entry import IoSpec, entry_point
    from tflkit.validation.inputs import make_input_sets

    work, options = Path(job["workdir"]), job["options"]
    model = ir.load(data)
    _tflite_input_types(state["inputs"], entry_point(model)[2])
    state["flex_ops"] = sorted(
        {op.type for sg in model.subgraphs for op in sg.ops if op.type.startswith("Flex")}
    )
    sets = make_input_sets(
        model,
        count=int(options["reference_sets"]),
        seed=int(options["seed"]),
        kind="realistic",  # what validate feeds the model: photographs, audio, indices
    )
    # --int8-io: the float model gets the real values the int8 inputs stand for
    quant = {spec.name: spec.quant for spec in sets.specs if spec.quant is not None}
    refs = []
    for feed in sets.feeds:
        out = ref({k: tf.constant(v) for k, v in real_values(feed, quant).items()})
        refs.append(
            {
                k: np.asarray(v, dtype=np.float32)
                if np.asarray(v).dtype.kind == "f"
                else np.asarray(v)
                for k, v in out.items()
            }
        )
    save_reference(
        work / "reference.npz",
        sets.feeds,
        refs,
        source=str(Path(job["source"])),
        framework=state["framework"],
        inputs=sets.summary(),
    )
    state["reference_inputs"] = sets.summary()
    state["output_names"] = list(refs[0])
    if not state["flex_ops"]:
        outputs = entry_point(model)[3]
        out_quant = {
            n: q for n, t in outputs.items() if (q := IoSpec(n, t, t.shape).quant) is not None
        }
        from .foreign import cpu_vs_reference

        state["cpu_vs_reference_max_abs"] = cpu_vs_reference(data, sets.feeds, refs, out_quant)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    job_path = Path(args[0])
    job = json.loads(job_path.read_text())
    state = run(job)
    write_result(Path(job["workdir"]) / RESULT_FILE, state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
