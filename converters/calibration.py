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
from tflkit.validation.inputs import image_batches

__all__ = ["InputSpec", "calibration_feeds"]


@dataclass(frozen=True)
class InputSpec:
    """One static model input as the converter sees it."""

    name: str
    shape: tuple[int, ...]
    dtype: str


def _channels_last(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``array`` with channels moved last when it holds the channels-first form of an NHWC
    ``shape`` (an ONNX model's data for the ``.tflite`` onnx2tf made channels-last), one sample
    or N; otherwise as it is."""
    if len(shape) < 3 or array.shape[-len(shape) + 1 :] == shape[1:] or array.shape == shape:
        return array
    first = (shape[-1], *shape[1:-1])  # without the batch axis
    for lead in (1, 2):  # [N, C, H, W] (a batch of one taken N times) or [N, 1, C, H, W]
        if array.ndim == len(first) + lead and array.shape[lead:] == first:
            return np.moveaxis(array, lead, -1)
    return array


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
        array = _channels_last(arrays[spec.name], spec.shape)
        if array.shape == spec.shape:
            arrays[spec.name] = array[None]
        elif array.shape[1:] == spec.shape[1:] and spec.shape[0] == 1:
            arrays[spec.name] = array[:, None]  # N samples without the batch axis
        elif array.shape[1:] == spec.shape:
            arrays[spec.name] = array  # N samples, each with its batch axis
        else:
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
    if len(specs) != 1:
        raise UsageError("an image folder needs a model with one image input")
    spec = specs[0]
    low, high = value_range
    shape = spec.shape
    # channels first (PyTorch's and ONNX's layout, kept by litert-torch): read NHWC, move them
    first = len(shape) == 4 and shape[1] in (1, 3) and shape[-1] not in (1, 3)
    for unit in image_batches(folder, (shape[0], *shape[2:], shape[1]) if first else shape):
        unit = np.moveaxis(unit, -1, 1) if first else unit
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
