"""Realistic data for models whose users gave none: photographs, speech-like audio, metadata.

- Photographs: scikit-image's sample photos (``tflkit[images]``), found on disk without importing
  scikit-image, decoded with Pillow, centre-cropped and resized to the input.
- Audio: a voiced, speech-like signal (a gliding fundamental with harmonics, syllable envelopes
  and a little noise) at 16 kHz, deterministic per seed.
- The model's TFLite metadata (``TFLITE_METADATA``, the support library's schema) read for what
  it says about an input: normalization mean/std, value range (stats), image or audio content.
  The generated schema module is not shipped with LiteRT: :mod:`tflkit.ir.metadata_schemas`
  declares the fields, read with the IR's flatbuffer reader.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tflkit.ir import metadata_schemas as m

__all__ = ["InputMetadata", "audio_clip", "input_metadata", "photo_paths", "photos"]

#: scikit-image sample photographs of real scenes (not synthetic images, not masks).
PHOTOS = (
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "rocket.jpg",
    "motorcycle_left.png",
    "camera.png",
    "coins.png",
    "hubble_deep_field.jpg",
)
SAMPLE_RATE = 16000


def photo_paths() -> list[Path]:
    """The sample photographs available here (empty when scikit-image is not installed)."""
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        return []
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    return [folder / name for name in PHOTOS if (folder / name).is_file()]


def photos(count: int, height: int, width: int, channels: int) -> list[np.ndarray] | None:
    """``count`` photos as float32 HxWxC arrays in [0, 1], or None without photos or Pillow."""
    paths = photo_paths()
    if not paths:
        return None
    try:
        from PIL import Image
    except ImportError:
        return None
    mode = "L" if channels == 1 else "RGB"
    out = []
    for k in range(count):
        with Image.open(paths[k % len(paths)]) as image:
            image = image.convert(mode)
            w, h = image.size
            target = width / height
            if w / h > target:  # centre crop to the input's aspect ratio
                cw = round(h * target)
                image = image.crop(((w - cw) // 2, 0, (w - cw) // 2 + cw, h))
            else:
                ch = round(w / target)
                image = image.crop((0, (h - ch) // 2, w, (h - ch) // 2 + ch))
            resized = image.resize((width, height), Image.Resampling.BILINEAR)
        pixels = np.asarray(resized, np.float32).reshape(height, width, -1) / np.float32(255.0)
        if channels not in (1, 3):  # e.g. RGBA: pad with opaque alpha
            pad = np.ones((height, width, channels - pixels.shape[-1]), np.float32)
            pixels = np.concatenate([pixels, pad], axis=-1)[..., :channels]
        out.append(pixels)
    return out


def audio_clip(samples: int, seed: int) -> np.ndarray:
    """A speech-like float32 signal in [-1, 1] (peak 0.5), ``samples`` long at 16 kHz."""
    rng = np.random.default_rng(seed)
    t = np.arange(samples, dtype=np.float64) / SAMPLE_RATE
    f0 = 110.0 + 60.0 * rng.random() + 40.0 * np.sin(2 * np.pi * (0.7 + rng.random()) * t)
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    voice = sum(np.sin(k * phase) / k for k in range(1, 12))
    syllables = np.clip(np.sin(2 * np.pi * (3.0 + rng.random()) * t + rng.random() * 6), 0, None)
    signal = voice * syllables + 0.02 * rng.standard_normal(samples)
    peak = float(np.max(np.abs(signal))) or 1.0
    return (0.5 * signal / peak).astype(np.float32)


@dataclass(frozen=True)
class InputMetadata:
    """What the model's metadata says about one input (None where it says nothing)."""

    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    value_min: float | None = None
    value_max: float | None = None
    content: str | None = None  # "image", "audio", "feature", "bounding_box"

    def normalize(self, pixels01: np.ndarray) -> np.ndarray | None:
        """Apply ``(pixel*255 - mean) / std`` when the metadata has normalization options."""
        if self.mean is None or self.std is None:
            return None
        mean = np.asarray(self.mean, np.float32)
        std = np.asarray(self.std, np.float32)
        return (pixels01 * np.float32(255.0) - mean) / std


_CONTENT = {
    "FeatureProperties": "feature",
    "ImageProperties": "image",
    "BoundingBoxProperties": "bounding_box",
    "AudioProperties": "audio",
}


def input_metadata(data: bytes | None, count: int) -> list[InputMetadata]:
    """Per input of subgraph 0, what ``TFLITE_METADATA`` says; empty entries when absent/corrupt.

    ModelMetadata.subgraph_metadata[0].input_tensor_metadata -> TensorMetadata: content, process
    units (NormalizationOptions mean/std), stats (max/min); :mod:`tflkit.ir.metadata_schemas`.
    """
    empty = [InputMetadata()] * count
    if not data:
        return empty
    try:
        subgraphs = m.metadata_root(data).children(m.ModelMetadata.subgraph_metadata)
        if not subgraphs:
            return empty
        result = []
        for tensor in subgraphs[0].children(m.SubGraphMetadata.input_tensor_metadata)[:count]:
            mean = std = None
            for unit in tensor.children(m.TensorMetadata.process_units):
                if unit.u8(m.ProcessUnit.options_type) == m.ProcessUnitOptions.NormalizationOptions:
                    options = unit.child(m.ProcessUnit.options)
                    if options is not None:
                        mean = options.floats(m.NormalizationOptions.mean)
                        std = options.floats(m.NormalizationOptions.std)
            stats = tensor.child(m.TensorMetadata.stats)
            vmax = stats.floats(m.Stats.max) if stats is not None else None
            vmin = stats.floats(m.Stats.min) if stats is not None else None
            content = tensor.child(m.TensorMetadata.content)
            kind = None
            if content is not None:
                code = content.u8(m.Content.content_properties_type)
                kind = _CONTENT.get(m.ContentProperties.name_of(code) or "")
            result.append(
                InputMetadata(
                    mean=mean or None,
                    std=std or None,
                    value_min=min(vmin) if vmin else None,
                    value_max=max(vmax) if vmax else None,
                    content=kind,
                )
            )
        return result + empty[len(result) :]
    except Exception:  # a metadata blob we cannot read says nothing
        return empty


def channels_last_image(shape: Sequence[int]) -> bool:
    """NHWC with 1, 3 or 4 channels and a spatial size of at least 16x16."""
    return len(shape) == 4 and shape[-1] in (1, 3, 4) and min(shape[1], shape[2]) >= 16


def channels_first_image(shape: Sequence[int]) -> bool:
    """NCHW with 1 or 3 channels and a spatial size of at least 16x16 (converted ONNX models)."""
    return len(shape) == 4 and shape[1] in (1, 3) and min(shape[2], shape[3]) >= 16
