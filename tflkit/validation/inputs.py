"""Input sets for running a model: realistic or seeded random data, files, or a folder of images.

Every runner gets the same input sets. A feed maps the entry point's input names (signature
names, or tensor names for a model without signatures) to arrays.

``kind="realistic"`` gives each input the most plausible data we have
(:mod:`tflkit.validation.samples`):
photographs for image-shaped inputs (normalised with the model's metadata when it has
normalization options, else mapped onto the input's value range), a speech-like signal for
audio-shaped inputs, log-mel spectrograms of it for spectrogram inputs
(:mod:`tflkit.validation.spectrogram`: the model's audio front-end metadata, or a name that says
so), valid
indices for integer inputs that index a table; everything else falls
back to random data, and :attr:`InputSets.kinds` says what each input got.

Random data follows what the model says about each input: floats in [0, 1] (images), [-1, 1]
when the name says so, the metadata's value range, or the float range a following QUANTIZE op
can represent; the full range of int8/uint8 for quantized inputs; valid indices for inputs used
(directly or through CAST/RESHAPE) as GATHER / EMBEDDING_LOOKUP / ONE_HOT indices.
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
from tflkit.ir.shapes import by_feed_name, parse_input_shapes
from tflkit.validation.samples import (
    InputMetadata,
    audio_clip,
    channels_first_image,
    channels_last_image,
    input_metadata,
    photo_paths,
    photos,
)
from tflkit.validation.spectrogram import (
    METADATA_NAME,
    FrontEnd,
    features,
    front_end,
    layout,
    to_range,
)

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
_PASS_THROUGH = {"CAST", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "IDENTITY"}
_AUDIO_HINT = re.compile(r"audio|wav|pcm|signal|speech|waveform", re.IGNORECASE)
KINDS = ("realistic", "random")
#: samples of an audio input whose length is dynamic (one second at 16 kHz)
AUDIO_SAMPLES = 16000


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
    #: per input, what it got: "photo", "audio", "spectrogram", "index", "random" (or "file",
    #: "images")
    kinds: dict[str, str] = field(default_factory=dict)

    @property
    def realistic(self) -> bool:
        """True when no input fell back to random data."""
        return bool(self.kinds) and "random" not in self.kinds.values()

    def summary(self) -> dict[str, Any]:
        """What kind of data the sets hold: source ("realistic", "realistic+random", "random",
        a file...), seed, and per input its data ("photo", "audio", "spectrogram", "index"...)."""
        return {"source": self.source, "seed": self.seed, "data": dict(self.kinds)}

    def to_json(self) -> dict[str, Any]:
        inputs = []
        for spec in self.specs:
            entry = spec.to_json()
            if spec.name in self.ranges:
                entry["range"] = list(self.ranges[spec.name])
            if spec.name in self.kinds:
                entry["data"] = self.kinds[spec.name]
            inputs.append(entry)
        return {
            "count": len(self.feeds),
            "source": self.source,
            "seed": self.seed,
            "inputs": inputs,
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
            axis = _samples_axis(signature)
            if _audio_shaped(name, tensor, signature) and axis is not None and signature[axis] < 0:
                shape = (*shape[:axis], AUDIO_SAMPLES, *shape[axis + 1 :])
            notes.append(
                f"input {name} has dynamic shape {tensor.display_shape}; using {shape} "
                "(set it with --input-shape)"
            )
        else:
            shape = tensor.shape
        specs.append(IoSpec(name, tensor, tuple(shape)))
    return specs


def _samples_axis(signature: Sequence[int]) -> int | None:
    """The samples axis of a waveform-shaped input: [N], [B, N] or [B, N, 1]."""
    rank = len(signature)
    if rank == 3 and signature[-1] == 1:
        return 1
    return rank - 1 if rank in (1, 2) else None


def _audio_shaped(name: str, tensor: ir.Tensor, signature: Sequence[int]) -> bool:
    """A float or int16 waveform: [N], [B, N] or [B, N, 1] with N >= 8000 samples or dynamic,
    or a short one whose name says audio."""
    if tensor.dtype is None or np.dtype(tensor.dtype) not in (np.float32, np.int16):
        return False
    axis = _samples_axis(signature)
    if axis is None or (axis == 1 and signature[0] > 1):
        return False
    samples = signature[axis]
    return samples < 0 or samples >= 8000 or bool(_AUDIO_HINT.search(name))


def index_limit(tensor: ir.Tensor) -> int | None:
    """How many rows the table this integer tensor indexes has (through CAST/RESHAPE...)."""
    seen: set[int] = set()
    todo = [tensor]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for op, slot in current.uses:
            if op.type in _PASS_THROUGH and slot == 0:
                todo.extend(op.outputs[:1])
                continue
            want = _INDEX_OPS.get(op.type)
            if want is not None and want == slot:
                limit = _index_limit(op)
                if limit:
                    return limit
    return None


def value_range(
    spec: IoSpec, meta: InputMetadata | None = None, fallback: tuple[float, float] | None = None
) -> tuple[float, float]:
    """The range random values for ``spec`` are drawn from (inclusive for integers).

    ``fallback``: the real-valued range of a float input the model itself says nothing about
    (no metadata, no QUANTIZE), from a caller that knows better (a quantized reference's grid).
    """
    dtype = spec.dtype
    tensor = spec.tensor
    if dtype.kind == "b":
        return 0, 1
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if spec.quant is not None:
            return info.min, info.max
        limit = index_limit(tensor)
        if limit:
            return 0, limit - 1
        return max(info.min, 0), min(info.max, 9)
    known = real_range(spec, meta)
    if known is not None:
        return known
    if fallback is not None:
        return fallback
    if _SIGNED_HINT.search(spec.name) or _SIGNED_HINT.search(tensor.name):
        return -1.0, 1.0
    return 0.0, 1.0


def real_range(spec: IoSpec, meta: InputMetadata | None = None) -> tuple[float, float] | None:
    """The real values an input covers by the model's own account: its metadata's value range,
    the grid of a quantized input or of the QUANTIZE op that reads a float one; else None."""
    if spec.dtype.kind in "iu" and spec.quant is not None:
        info = np.iinfo(spec.dtype)
        scale, zero = spec.quant
        return (info.min - zero) * scale, (info.max - zero) * scale
    if spec.dtype.kind != "f":
        return None
    if meta is not None and meta.value_min is not None and meta.value_max is not None:
        return meta.value_min, max(meta.value_max, meta.value_min)
    grid = _quantized_by(spec.tensor)
    if grid is None:
        return None
    info = np.iinfo(grid.dtype)
    scale, zero = _scale_zero(grid)
    return (info.min - zero) * scale, (info.max - zero) * scale


def _quantized_by(tensor: ir.Tensor) -> ir.Tensor | None:
    """The per-tensor quantized output of the QUANTIZE op that reads ``tensor`` (a quantized
    model with float inputs), else None."""
    for op in tensor.consumers:
        if op.type == "QUANTIZE" and op.outputs and op.outputs[0].is_quantized:
            scale = op.outputs[0].quantization.scale
            if scale is not None and len(scale) == 1:
                return op.outputs[0]
    return None


def _scale_zero(tensor: ir.Tensor) -> tuple[float, int]:
    q = tensor.quantization
    zero = int(q.zeroPoint[0]) if q.zeroPoint is not None and len(q.zeroPoint) else 0
    return float(q.scale[0]), zero


def input_real_ranges(
    model: ir.Model, signature: str | None = None
) -> dict[str, tuple[float, float] | None]:
    """:func:`real_range` of every input of the entry point, by feed name."""
    _, subgraph, inputs, _ = entry_point(model, signature)
    specs = [IoSpec(name, t, t.shape) for name, t in inputs.items()]
    metas = _metadata(model, subgraph, specs)
    return {s.name: real_range(s, m) for s, m in zip(specs, metas, strict=True)}


def is_quantized(model: ir.Model) -> bool:
    """Int8/uint8 weights or activations anywhere in the main subgraph."""
    return any(
        t.is_quantized and t.dtype is not None and np.dtype(t.dtype).kind in "iu"
        for t in model.main.tensors
    )


def quantize_step(tensor: ir.Tensor) -> float | None:
    """The step of the 8-bit grid a float input is put on by the QUANTIZE op that reads it (a
    quantized model with float inputs), else None."""
    if tensor.dtype is None or np.dtype(tensor.dtype).kind != "f":
        return None
    grid = _quantized_by(tensor)
    return None if grid is None else _scale_zero(grid)[0]


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


def _photo_feed(
    spec: IoSpec, images: list[np.ndarray], low: float, high: float, meta: InputMetadata
) -> tuple[list[np.ndarray], str]:
    """Photos (HxWxC in [0, 1]) as values of ``spec``: normalised, quantized or range-mapped."""
    first = not channels_last_image(spec.shape)
    how = ""
    out = []
    for unit in images:
        if spec.dtype.kind == "f":
            normalized = meta.normalize(unit)
            if normalized is not None:
                value, how = normalized, "metadata normalization (x - mean) / std"
            else:
                value, how = low + unit * (high - low), f"mapped to [{low:g}, {high:g}]"
        else:
            info = np.iinfo(spec.dtype)
            value = np.clip(np.round(unit * 255.0 + max(info.min, -128)), info.min, info.max)
            how = "raw pixels" if info.min == 0 else "pixels - 128"
        if first:
            value = np.transpose(value, (2, 0, 1))
        out.append(value.astype(spec.dtype))
    return out, how


def _spectrogram_feed(
    spec: IoSpec,
    time: int,
    freq: int,
    front: FrontEnd,
    low: float,
    high: float,
    count: int,
    seed: int,
) -> list[np.ndarray]:
    """``count`` log-mel spectrograms of speech-like clips laid out and ranged as ``spec``."""
    out = []
    for k in range(count):
        db = features(front, spec.shape[time], spec.shape[freq], seed + k)
        value = to_range(db, low, high, front.dynamic_range_db)
        if time > freq:
            value = value.T
        if spec.dtype.kind in "iu":
            value = np.round(value)
        out.append(value.reshape(spec.shape).astype(spec.dtype))
    return out


def _spectrogram_note(front: FrontEnd, low: float, high: float) -> str:
    return (
        f"log-mel spectrograms of a speech-like {front.sample_rate / 1000:g} kHz signal "
        f"({front.window_ms:g} ms window, {front.step_ms:g} ms step, {front.low_hz:g}-"
        f"{front.high_hz:g} Hz; {front.source}), the top {front.dynamic_range_db:.0f} dB mapped "
        f"to [{low:g}, {high:g}]"
    )


def _realistic(
    specs: Sequence[IoSpec],
    metas: Sequence[InputMetadata],
    ranges: Mapping[str, tuple[float, float]],
    count: int,
    seed: int,
    notes: list[str],
    front: FrontEnd | None = None,
) -> tuple[list[dict[str, np.ndarray]], dict[str, str]]:
    rng = np.random.default_rng(seed)
    columns: dict[str, list[np.ndarray]] = {}
    kinds: dict[str, str] = {}
    names = [p.name for p in photo_paths()]
    for spec, meta in zip(specs, metas, strict=True):
        shape = spec.shape
        found = layout(spec.name, shape, front)
        if found is not None and (spec.dtype.kind == "f" or spec.quant is not None):
            columns[spec.name] = _spectrogram_feed(spec, *found, *ranges[spec.name], count, seed)
            kinds[spec.name] = "spectrogram"
            notes.append(f"input {spec.name}: {_spectrogram_note(found[2], *ranges[spec.name])}")
            continue
        image = channels_last_image(shape) or channels_first_image(shape)
        if image and (spec.dtype.kind == "f" or spec.quant is not None or spec.dtype == np.uint8):
            n, h, w, c = (
                shape if channels_last_image(shape) else (shape[0], shape[2], shape[3], shape[1])
            )
            pictures = photos(count * n, h, w, c)
            if pictures is not None:
                values, how = _photo_feed(spec, pictures, *ranges[spec.name], meta)
                columns[spec.name] = [np.stack(values[k * n : (k + 1) * n]) for k in range(count)]
                kinds[spec.name] = "photo"
                shown = ", ".join(names[k % len(names)] for k in range(min(count * n, 4)))
                notes.append(f"input {spec.name}: photographs ({shown}), {how}")
                continue
            notes.append(
                f"input {spec.name} looks like an image but no sample photographs are installed "
                "(pip install 'tflkit[images]'): random data"
            )
        if _audio_shaped(spec.name, spec.tensor, shape) or meta.content == "audio":
            scale = 16384.0 if spec.dtype == np.int16 else 1.0
            columns[spec.name] = [
                (audio_clip(int(np.prod(shape)), seed + k) * scale)
                .reshape(shape)
                .astype(spec.dtype)
                for k in range(count)
            ]
            kinds[spec.name] = "audio"
            notes.append(f"input {spec.name}: a speech-like 16 kHz signal, peak 0.5 full scale")
            continue
        if spec.dtype.kind in "iu" and spec.quant is None and index_limit(spec.tensor):
            kinds[spec.name] = "index"
        else:
            kinds[spec.name] = "random"
        columns[spec.name] = [_random(spec, rng, *ranges[spec.name]) for _ in range(count)]
    feeds = [{spec.name: columns[spec.name][k] for spec in specs} for k in range(count)]
    return feeds, kinds


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
                    resized = image.convert(mode).resize((width, height), Image.Resampling.BILINEAR)
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


def _metadata(
    model: ir.Model, subgraph: ir.Subgraph, specs: Sequence[IoSpec]
) -> list[InputMetadata]:
    """The metadata of each input (matched by position in subgraph 0's inputs)."""
    entry = model.metadata_entry("TFLITE_METADATA")
    raw = entry.buffer.data if entry is not None else None
    main_inputs = list(model.main.inputs)
    per_input = input_metadata(bytes(raw) if raw is not None else None, len(main_inputs))
    out = []
    for spec in specs:
        position = next((i for i, t in enumerate(main_inputs) if t is spec.tensor), None)
        usable = subgraph is model.main and position is not None
        out.append(per_input[position] if usable else InputMetadata())
    return out


def make_input_sets(
    model: ir.Model,
    *,
    signature: str | None = None,
    source: str | Path | None = None,
    count: int = 4,
    seed: int = 0,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    kind: str = "random",
    fallback_ranges: Mapping[str, tuple[float, float]] | None = None,
) -> InputSets:
    """``count`` generated feeds (``kind`` "realistic" or seeded "random"), or the feeds in
    ``source`` (.npy, .npz or image folder). ``fallback_ranges``: real-valued ranges for float
    inputs the model says nothing about (see :func:`value_range`)."""
    if count < 1:
        raise UsageError(f"the number of input sets must be at least 1, got {count}")
    if kind not in KINDS:
        raise UsageError(f"input kind must be one of {', '.join(KINDS)}, got {kind!r}")
    _, subgraph, inputs, _ = entry_point(model, signature)
    notes: list[str] = []
    specs = _resolve_shapes(inputs, by_feed_name(model, shapes, signature), notes)
    metas = _metadata(model, subgraph, specs)
    fallback = fallback_ranges or {}
    ranges = {
        spec.name: value_range(spec, meta, fallback.get(spec.name))
        for spec, meta in zip(specs, metas, strict=True)
    }
    for spec, meta in zip(specs, metas, strict=True):
        if spec.name in fallback and spec.dtype.kind == "f" and real_range(spec, meta) is None:
            low, high = fallback[spec.name]
            notes.append(
                f"input {spec.name}: values in [{low:.6g}, {high:.6g}], the range the reference's "
                "quantization covers (this model states none)"
            )
    if source is None and kind == "realistic":
        entry = model.metadata_entry(METADATA_NAME)
        front = front_end(bytes(entry.buffer.data) if entry is not None else None)
        feeds, kinds = _realistic(specs, metas, ranges, count, seed, notes, front)
        source_name = "realistic" if "random" not in kinds.values() else "realistic+random"
        return InputSets(feeds, specs, source_name, seed, ranges, notes, kinds)
    if source is None:
        rng = np.random.default_rng(seed)
        feeds = [
            {spec.name: _random(spec, rng, *ranges[spec.name]) for spec in specs}
            for _ in range(count)
        ]
        kinds = {spec.name: "random" for spec in specs}
        return InputSets(feeds, specs, "random", seed, ranges, notes, kinds)
    path = Path(source)
    if path.is_dir():
        feeds = _from_images(path, specs)
        return InputSets(feeds, specs, f"images:{path}", None, ranges, notes)
    if not path.is_file():
        raise UsageError(f"inputs {path} do not exist")
    feeds = _from_file(path, specs)
    notes += _nonfinite_notes(feeds)
    return InputSets(feeds, specs, f"file:{path}", None, {}, notes)
