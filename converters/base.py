"""What every converter shares: options, errors, source hashing.

Nothing here imports a framework. The options are plain data that cross into the converter's
child process as JSON (TensorFlow never runs in the process that may hold the GPU).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tflkit.errors import MissingExtraError, TflkitError, UsageError
from tflkit.jsonable import plain_fields

__all__ = [
    "CONVERTER_OPTIONS",
    "ONNX_ROUTES",
    "QUANTIZE_MODES",
    "ConversionError",
    "ConvertOptions",
    "MissingExtraError",
    "check_tf_converter_options",
    "hash_source",
    "parse_converter_options",
    "parse_input_values",
]

QUANTIZE_MODES = ("none", "dynamic", "int8")

#: How an ONNX model is converted: onnx2tf, then onnx2torch + litert-torch when it fails (auto).
ONNX_ROUTES = ("auto", "onnx2tf", "onnx2torch")

#: GPU-relevant TFLiteConverter attributes a user may set with ``--converter-option``, and why.
CONVERTER_OPTIONS: dict[str, str] = {
    "unfold_batchmatmul": "split BATCH_MATMUL into FULLY_CONNECTED ops (older GPU delegates lack "
    "BATCH_MATMUL with two runtime operands)",
    "_experimental_lower_tensor_list_ops": "lower TensorList ops to builtins (True by default; "
    "False keeps them as flex ops, which never run on the GPU)",
    "experimental_enable_resource_variables": "keep resource variables (VAR_HANDLE, "
    "READ_VARIABLE: CPU only); False makes a stateful model fail to convert instead",
    "_experimental_disable_per_channel": "per-tensor instead of per-channel int8 weights",
    "_experimental_unfold_large_splat_constant": "materialize large splat constants (FILL "
    "becomes a constant buffer)",
    "allow_custom_ops": "let unknown TensorFlow ops through as custom ops (CPU only)",
}


class ConversionError(TflkitError):
    """The source model could not be converted; the message says what to change."""


@dataclass
class ConvertOptions:
    """How to convert. The defaults produce what the GPU delegate wants.

    ``input_shapes`` fixes dynamic dimensions by input name; any remaining unknown batch becomes
    ``batch``. ``input_values`` pins ONNX inputs to constants (a sample rate, a flag) so the
    preparation pass folds what depends on them; ``route`` picks the ONNX converter
    (:data:`ONNX_ROUTES`). ``quantize`` is ``none`` (float32, or float16 weights with
    ``fp16``), ``dynamic`` (int8 weights, float activations) or ``int8`` (full integer,
    calibrated on ``representative``: an ``.npz`` or a folder of images). ``python`` is the
    interpreter of an environment holding the ONNX or PyTorch converter (default: the one
    tflkit provisions, see :mod:`tflkit.converters.envs`). ``unsafe_deserialization`` lets
    Keras load Lambda layers (their Python code runs: only for files you trust).
    """

    input_shapes: Mapping[str, Sequence[int]] = field(default_factory=dict)
    input_values: Mapping[str, Sequence[float]] = field(default_factory=dict)
    route: str = "auto"
    batch: int = 1
    allow_flex: bool = False
    fp16: bool = False
    quantize: str = "none"
    representative: Path | None = None
    calibration_steps: int = 100
    image_range: tuple[float, float] = (0.0, 1.0)
    int8_io: bool = False
    signature: str | None = None
    converter_options: Mapping[str, Any] = field(default_factory=dict)
    reference_sets: int = 3
    seed: int = 0
    timeout: float = 900.0
    python: Path | None = None
    unsafe_deserialization: bool = False

    def resolved(self) -> ConvertOptions:
        """A copy whose paths are absolute, resolved against this process's working directory.

        Workers run in a scratch directory: a relative ``--representative`` or ``--python``
        must not be read from there.
        """
        rep = Path(self.representative).expanduser().resolve() if self.representative else None
        python = None
        if self.python is not None:
            given = Path(self.python).expanduser()
            found = shutil.which(str(given)) if given.parent == Path(".") else None
            # not resolve(): a venv's bin/python is a symlink to the base interpreter
            python = Path(found) if found else Path(os.path.abspath(given))
        return replace(self, representative=rep, python=python)

    def validate(self) -> None:
        """Raise :class:`UsageError` for options that contradict each other."""
        if self.route not in ONNX_ROUTES:
            raise UsageError(f"--route takes {', '.join(ONNX_ROUTES)}, not {self.route!r}")
        if self.quantize not in QUANTIZE_MODES:
            raise UsageError(f"--quantize takes {', '.join(QUANTIZE_MODES)}, not {self.quantize!r}")
        if self.fp16 and self.quantize != "none":
            raise UsageError("--fp16 and --quantize are exclusive: choose one weight format")
        if self.quantize == "int8" and self.representative is None:
            raise UsageError(
                "--quantize int8 needs --representative (an .npz of input arrays or a folder "
                "of images) to calibrate activation ranges"
            )
        if self.representative is not None and self.quantize != "int8":
            raise UsageError("--representative is only used with --quantize int8")
        if self.representative is not None and not Path(self.representative).exists():
            raise UsageError(f"representative dataset {self.representative} does not exist")
        if self.python is not None and not Path(self.python).exists():
            raise UsageError(f"--python {self.python} does not exist")
        if self.int8_io and self.quantize != "int8":
            raise UsageError("--int8-io needs --quantize int8")
        if self.batch < 1 or self.reference_sets < 1 or self.calibration_steps < 1:
            raise UsageError("--batch, --reference-sets and --calibration-steps must be >= 1")
        for name, dims in self.input_shapes.items():
            if not dims or any(int(d) < 1 for d in dims):
                raise UsageError(f"--input-shape {name}: every dimension must be >= 1")

    def to_json(self) -> dict[str, Any]:
        return plain_fields(self)


def parse_input_values(items: Sequence[str]) -> dict[str, list[float]]:
    """``["sr=16000", "w=1,0.5"]`` -> ``{"sr": [16000], "w": [1, 0.5]}`` (``--input-value``)."""
    out: dict[str, list[float]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        try:
            values = [float(v) for v in text.split(",")] if sep and text.strip() else []
        except ValueError:
            values = []
        if not name.strip() or not values:
            raise UsageError(f"--input-value takes NAME=V[,V...] with numbers, got {item!r}")
        out[name.strip()] = [int(v) if v.is_integer() else v for v in values]
    return out


def parse_converter_options(items: Sequence[str]) -> dict[str, Any]:
    """``["unfold_batchmatmul=true", "batch_size=1", "keep_ncw_or_nchw_or_ncdhw_input_names=x,y"]``
    -> ``{"unfold_batchmatmul": True, "batch_size": 1, "keep_...": ["x", "y"]}``: true/false,
    numbers, comma lists and text (the values onnx2tf's options take)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(f"--converter-option takes NAME=VALUE, got {item!r}")
        parts = [_option_value(v) for v in value.split(",")]
        out[key.strip()] = parts[0] if len(parts) == 1 else parts
    return out


def _option_value(text: str) -> Any:
    text = text.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def check_tf_converter_options(options: Mapping[str, Any]) -> None:
    """TFLiteConverter flags (Keras, SavedModel): known names, true/false values."""
    unknown = sorted(set(options) - set(CONVERTER_OPTIONS))
    if unknown:
        raise UsageError(
            f"unknown converter option(s) {unknown}; known: {', '.join(CONVERTER_OPTIONS)}"
        )
    for name, value in options.items():
        if not isinstance(value, bool) and value not in (0, 1):
            raise UsageError(f"--converter-option {name} takes true or false, got {value!r}")


def hash_source(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file, or of a directory's relative paths and contents (a SavedModel)."""
    root = Path(path)
    digest = hashlib.sha256()
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for file in files:
        if root.is_dir():
            digest.update(file.relative_to(root).as_posix().encode() + b"\0")
        with file.open("rb") as f:
            for chunk in iter(lambda f=f: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()
