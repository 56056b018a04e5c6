"""Representative data for full-integer quantization: an ``.npz`` or a folder of images.

Pure numpy (and Pillow for images): it runs inside the converter's child process, where the
input specs come from the framework, so it takes plain ``(name, shape, dtype)`` specs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tflkit.errors import UsageError

__all__ = ["InputSpec", "calibration_feeds"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".ppm", ".tif", ".tiff")


@dataclass(frozen=True)
class InputSpec:
    """One static model input as the converter sees it."""

    name: str
    shape: tuple[int, ...]
    dtype: str


def _from_npz(path: Path, specs: Sequence[InputSpec]) -> Iterator[dict[str, np.ndarray]]:
    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read representative dataset {path}: {exc}") from exc
    if isinstance(npz, np.ndarray):
        arrays = {specs[0].name: npz} if len(specs) == 1 else {}
    else:
        with npz:
            arrays = {k: npz[k] for k in npz.files}
        if len(specs) == 1 and len(arrays) == 1:
            arrays = {specs[0].name: next(iter(arrays.values()))}
    missing = [s.name for s in specs if s.name not in arrays]
    if missing:
        raise UsageError(f"{path} has no array for input(s) {missing} (it has {sorted(arrays)})")
    counts = set()
    for spec in specs:
        array = arrays[spec.name]
        if array.shape == spec.shape:
            arrays[spec.name] = array[None]
        elif array.shape[1:] == spec.shape[1:] and spec.shape[0] == 1:
            arrays[spec.name] = array[:, None]  # N samples without the batch axis
        elif array.shape[1:] != spec.shape:
            raise UsageError(
                f"{path}: {spec.name} has shape {array.shape}; expected N samples of {spec.shape}"
            )
        counts.add(arrays[spec.name].shape[0])
    if len(counts) != 1:
        raise UsageError(f"{path}: inputs hold different numbers of samples {sorted(counts)}")
    for k in range(counts.pop()):
        yield {s.name: np.asarray(arrays[s.name][k], dtype=s.dtype) for s in specs}


def _from_images(
    folder: Path, specs: Sequence[InputSpec], value_range: tuple[float, float]
) -> Iterator[dict[str, np.ndarray]]:
    images = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not images:
        raise UsageError(f"{folder} holds no images ({', '.join(IMAGE_SUFFIXES)})")
    if len(specs) != 1 or len(specs[0].shape) != 4 or specs[0].shape[-1] not in (1, 3):
        raise UsageError(
            "an image folder needs a model with one NHWC image input (1 or 3 channels)"
        )
    try:
        from PIL import Image
    except ImportError:
        raise UsageError(
            "reading an image folder needs Pillow: pip install 'tflkit[images]'"
        ) from None
    spec = specs[0]
    batch, height, width, channels = spec.shape
    low, high = value_range
    for start in range(0, len(images) - batch + 1, batch):
        pixels = []
        for path in images[start : start + batch]:
            with Image.open(path) as image:
                mode = "L" if channels == 1 else "RGB"
                resized = image.convert(mode).resize((width, height), Image.Resampling.BILINEAR)
                pixels.append(np.asarray(resized, np.float32).reshape(height, width, channels))
        unit = np.stack(pixels) / 255.0
        yield {spec.name: (low + unit * (high - low)).astype(spec.dtype)}


def calibration_feeds(
    source: Path,
    specs: Sequence[InputSpec],
    *,
    steps: int,
    value_range: tuple[float, float] = (0.0, 1.0),
) -> list[dict[str, np.ndarray]]:
    """At most ``steps`` feeds from an ``.npz`` (arrays named by input) or an image folder."""
    source = Path(source)
    it = _from_images(source, specs, value_range) if source.is_dir() else _from_npz(source, specs)
    feeds = []
    for feed in it:
        feeds.append(feed)
        if len(feeds) >= steps:
            break
    if not feeds:
        raise UsageError(f"{source} gave no calibration sample")
    return feeds
