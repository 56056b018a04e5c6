"""Input sets for running a model: seeded random data per dtype, files, or a folder of images.

Every runner gets the same input sets. A feed maps the entry point's input names (signature
names, or tensor names for a model without signatures) to arrays. Random data follows what the
model says about each input: floats in [0, 1] (images), [-1, 1] when the name says so, or the
float range a following QUANTIZE op can represent; the full range of int8/uint8 for quantized
inputs; valid indices for inputs used as GATHER / EMBEDDING_LOOKUP / ONE_HOT indices.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tflkit import ir
from tflkit.errors import UsageError
from tflkit.input_shapes import by_feed_name, parse_input_shapes

__all__ = [
    "InputSets",
    "IoSpec",
    "entry_point",
    "make_input_sets",
    "parse_input_shapes",
    "value_range",
]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".ppm", ".tif", ".tiff")
_SIGNED_HINT = re.compile(r"norm|signed|audio|wave|pcm|sample|centered|minus", re.IGNORECASE)
_INDEX_OPS = {"GATHER": 1, "GATHER_ND": 1, "EMBEDDING_LOOKUP": 0, "ONE_HOT": 0}


@dataclass(frozen=True)
class IoSpec:
    """One input or output of an entry point: the feed name, its tensor and concrete shape."""

    name: str
    tensor: ir.Tensor
    shape: tuple[int, ...]

    @property
    def dtype(self) -> np.dtype:
        dtype = self.tensor.dtype
        if dtype is None:
            raise UsageError(f"{self.name}: tensors of type {self.tensor.type_name} not supported")
        return np.dtype(dtype)

    @property
    def quant(self) -> tuple[float, int] | None:
        """(scale, zero point) of a per-tensor quantized tensor."""
        q = self.tensor.quantization
        if q is None or q.scale is None or len(q.scale) != 1:
            return None
        zero = int(q.zeroPoint[0]) if q.zeroPoint is not None and len(q.zeroPoint) else 0
        return float(q.scale[0]), zero

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "tensor": self.tensor.name,
            "dtype": self.dtype.name,
            "shape": list(self.shape),
        }
        if self.tensor.is_dynamic:
            data["shape_signature"] = list(self.tensor.shape_signature or ())
        if self.quant is not None:
            data["scale"], data["zero_point"] = self.quant
        return data


@dataclass
class InputSets:
    """The feeds every runner gets, and where they came from."""

    feeds: list[dict[str, np.ndarray]]
    specs: list[IoSpec]
    source: str
    seed: int | None = None
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "count": len(self.feeds),
            "source": self.source,
            "seed": self.seed,
            "inputs": [
                {**spec.to_json(), "range": list(self.ranges[spec.name])}
                if spec.name in self.ranges
                else spec.to_json()
                for spec in self.specs
            ],
            "notes": self.notes,
        }


def entry_point(
    model: ir.Model, signature: str | None = None
) -> tuple[str | None, ir.Subgraph, dict[str, ir.Tensor], dict[str, ir.Tensor]]:
    """(signature key or None, subgraph, inputs by feed name, outputs by name).

    Without signatures the main subgraph's tensors are named by their tensor names (that is what
    both the Interpreter and the GPU accelerator call them).
    """
    if model.signatures:
        if signature is None:
            chosen = model.signatures[0]
        else:
            try:
                chosen = model.signature(signature)
            except KeyError as exc:
                raise UsageError(str(exc.args[0])) from None
        return chosen.key, chosen.subgraph, dict(chosen.inputs), dict(chosen.outputs)
    if signature is not None:
        raise UsageError(f"the model has no signatures, so --signature {signature!r} is unknown")
    main = model.main
    return None, main, {t.name: t for t in main.inputs}, {t.name: t for t in main.outputs}


def _resolve_shapes(
    tensors: Mapping[str, ir.Tensor], overrides: Mapping[str, tuple[int, ...]], notes: list[str]
) -> list[IoSpec]:
    unknown = set(overrides) - set(tensors)
    if unknown:
        raise UsageError(f"--input-shape names {sorted(unknown)}; inputs are {sorted(tensors)}")
    specs = []
    for name, tensor in tensors.items():
        signature = tensor.shape_signature or tensor.shape
        if name in overrides:
            shape = overrides[name]
            if len(shape) != len(signature) or any(
                s >= 0 and s != d for s, d in zip(signature, shape, strict=True)
            ):
                raise UsageError(
                    f"--input-shape {name}={','.join(map(str, shape))} does not fit the "
                    f"model's shape {tensor.display_shape}"
                )
        elif tensor.is_dynamic:
            shape = tuple(d if d >= 0 else 1 for d in signature)
            notes.append(
                f"input {name} has dynamic shape {tensor.display_shape}; using {shape} "
                "(set it with --input-shape)"
            )
        else:
            shape = tensor.shape
        specs.append(IoSpec(name, tensor, tuple(shape)))
    return specs


def value_range(spec: IoSpec) -> tuple[float, float]:
    """The range random values for ``spec`` are drawn from (inclusive for integers)."""
    dtype = spec.dtype
    tensor = spec.tensor
    if dtype.kind == "b":
        return 0, 1
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if spec.quant is not None:
            return info.min, info.max
        for op, slot in tensor.uses:
            want = _INDEX_OPS.get(op.type)
            if want is None or want != slot:
                continue
            limit = _index_limit(op)
            if limit:
                return 0, limit - 1
        return max(info.min, 0), min(info.max, 9)
    for op in tensor.consumers:
        if op.type == "QUANTIZE" and op.outputs and op.outputs[0].is_quantized:
            out = op.outputs[0]
            scale = float(out.quantization.scale[0])
            zero = int(out.quantization.zeroPoint[0]) if len(out.quantization.zeroPoint) else 0
            info = np.iinfo(out.dtype)
            return (info.min - zero) * scale, (info.max - zero) * scale
    if _SIGNED_HINT.search(spec.name) or _SIGNED_HINT.search(tensor.name):
        return -1.0, 1.0
    return 0.0, 1.0


def _index_limit(op: ir.Op) -> int | None:
    """How many valid indices the table an index input points into has."""
    if op.type == "ONE_HOT":
        depth = op.inputs[1]
        return int(depth.data.reshape(-1)[0]) if depth is not None and depth.is_constant else None
    params = op.inputs[0] if op.type != "EMBEDDING_LOOKUP" else op.inputs[1]
    if params is None or not params.shape:
        return None
    axis = 0
    if op.type == "GATHER" and op.options is not None:
        axis = int(getattr(op.options, "axis", 0) or 0)
    return int(params.shape[axis]) if params.shape[axis] > 0 else None


def _random(spec: IoSpec, rng: np.random.Generator, low: float, high: float) -> np.ndarray:
    dtype = spec.dtype
    if dtype.kind == "f":
        return rng.uniform(low, high, spec.shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, spec.shape).astype(bool)
    return rng.integers(int(low), int(high), spec.shape, endpoint=True).astype(dtype)


def _from_arrays(
    arrays: Mapping[str, np.ndarray], specs: Sequence[IoSpec], where: str
) -> list[dict[str, np.ndarray]]:
    """Feeds from arrays keyed by feed (or tensor) name; a leading extra axis holds several sets."""
    by_name: dict[str, np.ndarray] = {}
    for spec in specs:
        for key in (spec.name, spec.tensor.name):
            if key in arrays:
                by_name[spec.name] = np.asarray(arrays[key])
                break
        else:
            if len(specs) == 1 and len(arrays) == 1:
                by_name[spec.name] = np.asarray(next(iter(arrays.values())))
            else:
                raise UsageError(
                    f"{where} has no array for input {spec.name!r} (it has {sorted(arrays)})"
                )
    names = {key for spec in specs for key in (spec.name, spec.tensor.name)}
    extra = sorted(set(arrays) - names)
    if extra and not (len(specs) == 1 and len(arrays) == 1):
        raise UsageError(
            f"{where} has arrays {extra} that are not model inputs (inputs: "
            f"{[s.name for s in specs]})"
        )
    counts = set()
    for spec in specs:
        array = by_name[spec.name]
        if not _castable(array.dtype, spec.dtype):
            raise UsageError(
                f"{where}: {spec.name} holds {array.dtype} values; the input takes "
                f"{spec.dtype} (convert them explicitly)"
            )
        if array.shape == spec.shape:
            by_name[spec.name] = array[None]
        elif array.shape[1:] != spec.shape:
            raise UsageError(
                f"{where}: {spec.name} has shape {array.shape}; the input takes {spec.shape} "
                f"(or N sets of it: (N, {', '.join(map(str, spec.shape))}))"
            )
        counts.add(by_name[spec.name].shape[0])
    if len(counts) != 1:
        raise UsageError(f"{where}: inputs hold different numbers of sets {sorted(counts)}")
    count = counts.pop()
    if count == 0:
        raise UsageError(f"{where} holds 0 input sets (empty arrays)")
    return [
        {spec.name: np.ascontiguousarray(by_name[spec.name][k], spec.dtype) for spec in specs}
        for k in range(count)
    ]


def _castable(have: np.dtype, want: np.dtype) -> bool:
    """Whether values of ``have`` convert to ``want`` without changing kind (ints to floats ok)."""
    return np.can_cast(have, want, "same_kind") or (have.kind in "biu" and want.kind == "f")


def _from_file(path: Path, specs: Sequence[IoSpec]) -> list[dict[str, np.ndarray]]:
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.ndarray):
            with loaded:
                return _from_arrays({k: loaded[k] for k in loaded.files}, specs, str(path))
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise UsageError(f"cannot read inputs {path}: {' '.join(str(exc).split())}") from None
    if isinstance(loaded, np.ndarray):
        if len(specs) != 1:
            raise UsageError(
                f"{path} holds one array but the model takes {len(specs)} inputs: use a .npz "
                f"with arrays named {[s.name for s in specs]}"
            )
        return _from_arrays({specs[0].name: loaded}, specs, str(path))
    raise UsageError(f"cannot read inputs {path}: not a .npy or .npz file")


def _nonfinite_notes(feeds: Sequence[Mapping[str, np.ndarray]]) -> list[str]:
    """One note per input whose given values hold NaN or Inf (outputs will be labelled)."""
    notes = []
    for name in feeds[0] if feeds else ():
        values = [np.asarray(feed[name]) for feed in feeds]
        if values[0].dtype.kind != "f":
            continue
        nans = sum(int(np.isnan(v).sum()) for v in values)
        infs = sum(int(np.isinf(v).sum()) for v in values)
        if nans or infs:
            total = sum(v.size for v in values)
            notes.append(
                f"input {name} holds {nans} NaN and {infs} Inf of {total} values: outputs "
                "may be NaN/Inf too, and metrics count only finite pairs"
            )
    return notes


def image_batches(folder: Path, shape: Sequence[int]) -> list[np.ndarray]:
    """The images of ``folder``, sorted, resized to one NHWC ``shape`` batch at a time.

    Values are float32 in [0, 1]; a last batch the images do not fill is dropped.
    """
    images = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not images:
        raise UsageError(f"{folder} holds no images ({', '.join(IMAGE_SUFFIXES)})")
    if len(shape) != 4 or shape[-1] not in (1, 3):
        raise UsageError(
            "an image folder needs a model with one NHWC image input (1 or 3 channels)"
        )
    try:
        from PIL import Image
    except ImportError:
        raise UsageError(
            "reading an image folder needs Pillow: pip install 'tflkit[images]'"
        ) from None
    batch, height, width, channels = (int(d) for d in shape)
    mode = "L" if channels == 1 else "RGB"
    batches = []
    for start in range(0, len(images) - batch + 1, batch):
        pixels = []
        for path in images[start : start + batch]:
            try:
                with Image.open(path) as image:
                    resized = image.convert(mode).resize(
                        (width, height), Image.Resampling.BILINEAR
                    )
            except (OSError, ValueError) as exc:  # not an image, truncated, unsupported
                raise UsageError(f"{path}: not a readable image ({exc})") from None
                pixels.append(np.asarray(resized, np.float32).reshape(height, width, channels))
        batches.append(np.stack(pixels) / np.float32(255.0))
    if not batches:
        raise UsageError(f"{folder}: {len(images)} images do not fill one batch of {batch}")
    return batches


def _from_images(folder: Path, specs: Sequence[IoSpec]) -> list[dict[str, np.ndarray]]:
    if len(specs) != 1:
        raise UsageError("an image folder needs a model with one NHWC image input")
    spec = specs[0]
    low, high = value_range(spec)
    feeds = []
    for unit in image_batches(folder, spec.shape):
        if spec.dtype.kind == "f":
            array = (low + unit * (high - low)).astype(spec.dtype)
        else:
            info = np.iinfo(spec.dtype)
            array = np.clip(np.round(info.min + unit * 255.0), info.min, info.max)
            array = array.astype(spec.dtype)
        feeds.append({spec.name: array})
    return feeds


def make_input_sets(
    model: ir.Model,
    *,
    signature: str | None = None,
    source: str | Path | None = None,
    count: int = 4,
    seed: int = 0,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> InputSets:
    """``count`` seeded random feeds, or the feeds in ``source`` (.npy, .npz or image folder)."""
    if count < 1:
        raise UsageError(f"the number of input sets must be at least 1, got {count}")
    _, _, inputs, _ = entry_point(model, signature)
    notes: list[str] = []
    specs = _resolve_shapes(inputs, by_feed_name(model, shapes, signature), notes)
    ranges = {spec.name: value_range(spec) for spec in specs}
    if source is None:
        rng = np.random.default_rng(seed)
        feeds = [
            {spec.name: _random(spec, rng, *ranges[spec.name]) for spec in specs}
            for _ in range(count)
        ]
        return InputSets(feeds, specs, "random", seed, ranges, notes)
    path = Path(source)
    if path.is_dir():
        feeds = _from_images(path, specs)
        return InputSets(feeds, specs, f"images:{path}", None, ranges, notes)
    if not path.is_file():
        raise UsageError(f"inputs {path} do not exist")
    feeds = _from_file(path, specs)
    notes += _nonfinite_notes(feeds)
    return InputSets(feeds, specs, f"file:{path}", None, {}, notes)
