"""Input sets the user gives: arrays in a ``.npy``/``.npz`` file, or a folder of images."""

from __future__ import annotations

import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from tflkit.errors import UsageError, require_extra
from tflkit.ir.entry import IoSpec
from tflkit.validation.inputs.ranges import value_range

__all__ = ["IMAGE_SUFFIXES", "from_arrays", "from_file", "from_images", "image_batches"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".ppm", ".tif", ".tiff")


def from_arrays(
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


def from_file(path: Path, specs: Sequence[IoSpec]) -> list[dict[str, np.ndarray]]:
    """The input sets in a ``.npy`` (one input) or ``.npz`` (arrays named as the inputs)."""
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.ndarray):
            with loaded:
                return from_arrays({k: loaded[k] for k in loaded.files}, specs, str(path))
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise UsageError(f"cannot read inputs {path}: {' '.join(str(exc).split())}") from None
    if isinstance(loaded, np.ndarray):
        if len(specs) != 1:
            raise UsageError(
                f"{path} holds one array but the model takes {len(specs)} inputs: use a .npz "
                f"with arrays named {[s.name for s in specs]}"
            )
        return from_arrays({specs[0].name: loaded}, specs, str(path))
    raise UsageError(f"cannot read inputs {path}: not a .npy or .npz file")


def nonfinite_notes(feeds: Sequence[Mapping[str, np.ndarray]]) -> list[str]:
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
    require_extra("images", "reading an image folder", module="PIL")
    from PIL import Image

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


def from_images(folder: Path, specs: Sequence[IoSpec]) -> list[dict[str, np.ndarray]]:
    """One input set per batch of the folder's images, mapped onto the input's value range."""
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
