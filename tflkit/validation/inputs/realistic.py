"""Realistic feeds: photographs for image-shaped inputs, a speech-like signal for audio-shaped
ones, log-mel spectrograms of it for spectrogram inputs, valid indices for index inputs; random
data (:mod:`tflkit.ir.feeds`) where nothing fits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tflkit.ir.entry import IoSpec
from tflkit.ir.feeds import random_array
from tflkit.validation.inputs.indices import index_span, index_values
from tflkit.validation.inputs.specs import audio_shaped
from tflkit.validation.samples import (
    InputMetadata,
    audio_clip,
    channels_first_image,
    channels_last_image,
    photo_paths,
    photos,
)
from tflkit.validation.spectrogram import FrontEnd, features, layout, to_range

__all__ = ["realistic_feeds"]


def photo_feed(
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


def spectrogram_feed(
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


def spectrogram_note(front: FrontEnd, low: float, high: float) -> str:
    """The report note saying how spectrogram inputs were made."""
    return (
        f"log-mel spectrograms of a speech-like {front.sample_rate / 1000:g} kHz signal "
        f"({front.window_ms:g} ms window, {front.step_ms:g} ms step, {front.low_hz:g}-"
        f"{front.high_hz:g} Hz; {front.source}), the top {front.dynamic_range_db:.0f} dB mapped "
        f"to [{low:g}, {high:g}]"
    )


def _why(kind: str, spec: IoSpec) -> str:
    if kind == "length":
        return "a length: at least 1, at most the longest sequence axis of the other inputs"
    return f"{spec.dtype} ids the model casts to integers"


def realistic_feeds(
    specs: Sequence[IoSpec],
    metas: Sequence[InputMetadata],
    ranges: Mapping[str, tuple[float, float]],
    count: int,
    seed: int,
    notes: list[str],
    front: FrontEnd | None = None,
) -> tuple[list[dict[str, np.ndarray]], dict[str, str]]:
    """``count`` feeds of the most plausible data for each input (photos, audio, spectrograms,
    valid indices; random in ``ranges`` where nothing fits) and what each input got."""
    rng = np.random.default_rng(seed)
    columns: dict[str, list[np.ndarray]] = {}
    kinds: dict[str, str] = {}
    names = [p.name for p in photo_paths()]
    for spec, meta in zip(specs, metas, strict=True):
        shape = spec.shape
        found = layout(spec.name, shape, front)
        if found is not None and (spec.dtype.kind == "f" or spec.quant is not None):
            columns[spec.name] = spectrogram_feed(spec, *found, *ranges[spec.name], count, seed)
            kinds[spec.name] = "spectrogram"
            notes.append(f"input {spec.name}: {spectrogram_note(found[2], *ranges[spec.name])}")
            continue
        image = channels_last_image(shape) or channels_first_image(shape)
        if image and (spec.dtype.kind == "f" or spec.quant is not None or spec.dtype == np.uint8):
            n, h, w, c = (
                shape if channels_last_image(shape) else (shape[0], shape[2], shape[3], shape[1])
            )
            pictures = photos(count * n, h, w, c)
            if pictures is not None:
                values, how = photo_feed(spec, pictures, *ranges[spec.name], meta)
                columns[spec.name] = [np.stack(values[k * n : (k + 1) * n]) for k in range(count)]
                kinds[spec.name] = "photo"
                shown = ", ".join(names[k % len(names)] for k in range(min(count * n, 4)))
                notes.append(f"input {spec.name}: photographs ({shown}), {how}")
                continue
            notes.append(
                f"input {spec.name} looks like an image but no sample photographs are installed "
                "(pip install 'tflkit[images]'): random data"
            )
        if audio_shaped(spec.name, spec.tensor, shape) or meta.content == "audio":
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
        found = index_span(spec, specs)
        if found is not None:
            span = (int(ranges[spec.name][0]), int(ranges[spec.name][1]))
            columns[spec.name] = [index_values(spec, span, rng) for _ in range(count)]
            kinds[spec.name] = found[0]
            if found[0] == "length" or spec.dtype.kind == "f":
                why = _why(found[0], spec)
                notes.append(f"input {spec.name}: whole numbers in [{span[0]}, {span[1]}] ({why})")
            continue
        kinds[spec.name] = "random"
        columns[spec.name] = [
            random_array(spec.shape, spec.dtype, rng, ranges[spec.name]) for _ in range(count)
        ]
    feeds = [{spec.name: columns[spec.name][k] for spec in specs} for k in range(count)]
    return feeds, kinds
