"""Spectrogram inputs: recognising them and computing log-mel features of speech-like audio.

A keyword-spotting model takes time x frequency features ([1, frames, channels, 1] or
[1, frames, 1, channels]), which look image-shaped but are not photographs. Evidence, in order:

- the model's audio front-end settings: Silicon Labs MLTK writes them into the flatbuffer's
  ``SL_PARAMSv1`` metadata (a key/value dictionary: ``fe.sample_rate_hz``, ``fe.window_size_ms``,
  ``fe.window_step_ms``, ``fe.filterbank_n_channels``, band limits, ``fe.fft_length``...); an
  input with one axis of ``fe.filterbank_n_channels`` and one time axis is its spectrogram;
- otherwise an input whose name says spectrogram / fbank / filterbank / log-mel, with the front
  end's usual defaults (MLTK's own: 16 kHz, 25 ms window, 10 ms step, 125-7500 Hz).

Features are log-mel filterbank amplitudes in dB of :func:`tflkit.validation.samples.audio_clip`,
one frame per step (with the front end's noise reduction when it has one), and :func:`to_range`
maps the top ``dynamic_range_db`` of them onto the input's range: the metadata's dynamic-scale
range, else the span of the micro front end's fixed int8 scaling (90 dB at log_scale_shift 6).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tflkit.ir import metadata_schemas as m
from tflkit.validation.samples import SAMPLE_RATE, audio_clip

__all__ = ["METADATA_NAME", "FrontEnd", "features", "front_end", "layout", "to_range"]

METADATA_NAME = "SL_PARAMSv1"
_NAME_HINT = re.compile(r"spectrogram|fbank|filterbank|log_?mel", re.IGNORECASE)
#: Log units the int8 range spans in the TFLM micro-speech / MLTK fixed scaling
#: (int8 = value * 256 / 666 - 128), where the log scale outputs ln(filterbank amplitude) *
#: 2**log_scale_shift: at the usual shift 6 that is 10.4 nats, 90 dB.
INT8_LOG_UNITS = 666.0
DEFAULT_RANGE_DB = 20.0 / np.log(10.0) * INT8_LOG_UNITS / 2**6
# struct formats of the scalar members of the MLTK dictionary's Value union
_SCALARS = {"boolean": "?", "i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I"}
_SCALARS |= {"i64": "q", "u64": "Q", "f32": "f", "f64": "d"}


@dataclass(frozen=True)
class FrontEnd:
    """The settings features are computed with."""

    sample_rate: int = SAMPLE_RATE
    window_ms: float = 25.0
    step_ms: float = 10.0
    channels: int | None = None
    low_hz: float = 125.0
    high_hz: float = 7500.0
    fft_length: int | None = None
    dynamic_range_db: float = DEFAULT_RANGE_DB
    #: noise reduction (per-channel running estimate subtracted, at least this fraction kept)
    noise_smoothing: tuple[float, float] | None = None
    noise_min_remaining: float = 0.0
    source: str = "defaults"


def _params(data: bytes) -> dict[str, float]:
    """The scalar entries of an MLTK ``SL_PARAMSv1`` dictionary (Dictionary.entries -> Entry
    {key, value}; :mod:`tflkit.ir.metadata_schemas`)."""
    out: dict[str, float] = {}
    for entry in m.metadata_root(data).children(m.Dictionary.entries):
        if not all(entry.has(slot) for slot in (m.Entry.key, m.Entry.value_type, m.Entry.value)):
            continue
        code = _SCALARS.get(m.Value.name_of(entry.u8(m.Entry.value_type)) or "")
        value = entry.child(m.Entry.value)
        if code is None or value is None:
            continue
        key = entry.string(m.Entry.key) or ""
        out[key] = float(value.scalar(m.ScalarValue.value, code, 0.0))
    return out


def front_end(raw: bytes | None) -> FrontEnd | None:
    """The audio front end an ``SL_PARAMSv1`` metadata buffer describes, or None."""
    if not raw:
        return None
    try:
        p = _params(raw)
    except Exception:  # a dictionary we cannot read says nothing
        return None
    needed = ("fe.sample_rate_hz", "fe.window_size_ms", "fe.window_step_ms")
    if not all(k in p for k in (*needed, "fe.filterbank_n_channels")):
        return None
    if min(p[k] for k in needed) <= 0 or p["fe.filterbank_n_channels"] < 1:
        return None
    if p.get("fe.quantize_dynamic_scale_enable") and p.get("fe.quantize_dynamic_scale_range_db"):
        range_db = p["fe.quantize_dynamic_scale_range_db"]
    else:
        shift = p.get("fe.log_scale_shift", 6.0) if p.get("fe.log_scale_enable", 1.0) else 6.0
        range_db = 20.0 / np.log(10.0) * INT8_LOG_UNITS / 2**shift
    smoothing = None
    if p.get("fe.noise_reduction_enable"):
        even = p.get("fe.noise_reduction_even_smoothing", 0.025)
        smoothing = (even, p.get("fe.noise_reduction_odd_smoothing", even))
    return FrontEnd(
        sample_rate=int(p["fe.sample_rate_hz"]),
        window_ms=p["fe.window_size_ms"],
        step_ms=p["fe.window_step_ms"],
        channels=int(p["fe.filterbank_n_channels"]),
        low_hz=p.get("fe.filterbank_lower_band_limit", 125.0),
        high_hz=p.get("fe.filterbank_upper_band_limit", 7500.0),
        fft_length=int(p["fe.fft_length"]) if p.get("fe.fft_length") else None,
        dynamic_range_db=range_db,
        noise_smoothing=smoothing,
        noise_min_remaining=p.get("fe.noise_reduction_min_signal_remaining", 0.0),
        source=f"{METADATA_NAME} metadata",
    )


def layout(
    name: str, shape: Sequence[int], front: FrontEnd | None
) -> tuple[int, int, FrontEnd] | None:
    """(time axis, frequency axis, front end) when ``shape`` is a spectrogram of batch 1:
    rank 3 or 4, one frequency axis (the front end's channel count, or with only a name hint the
    last axis over 1), one time axis of at least 2 frames, every other axis 1."""
    if len(shape) not in (3, 4) or shape[0] != 1:
        return None
    big = [axis for axis in range(1, len(shape)) if shape[axis] > 1]
    if len(big) != 2 or any(shape[axis] < 1 for axis in range(len(shape))):
        return None
    if front is not None and front.channels is not None:
        freq = next((a for a in reversed(big) if shape[a] == front.channels), None)
        if freq is None:
            return None
    elif _NAME_HINT.search(name):
        freq, front = big[-1], FrontEnd()
    else:
        return None
    time = big[0] if freq == big[1] else big[1]
    return time, freq, front


def _mel(hz: np.ndarray) -> np.ndarray:
    return 1127.0 * np.log1p(hz / 700.0)


def _filterbank(front: FrontEnd, channels: int, fft: int) -> np.ndarray:
    """(channels, fft // 2 + 1) triangular mel filters between the band limits."""
    high = min(front.high_hz, front.sample_rate / 2)
    edges = np.linspace(_mel(np.array(front.low_hz)), _mel(np.array(high)), channels + 2)
    hz = 700.0 * np.expm1(edges / 1127.0)
    bins = np.arange(fft // 2 + 1) * front.sample_rate / fft
    lower, centre, upper = hz[:-2, None], hz[1:-1, None], hz[2:, None]
    rising = (bins - lower) / np.maximum(centre - lower, 1e-9)
    falling = (upper - bins) / np.maximum(upper - centre, 1e-9)
    return np.clip(np.minimum(rising, falling), 0.0, None)


def features(front: FrontEnd, frames: int, channels: int, seed: int) -> np.ndarray:
    """(frames, channels) log-mel energies in dB of a speech-like clip just long enough."""
    window = max(round(front.sample_rate * front.window_ms / 1000), 2)
    step = max(round(front.sample_rate * front.step_ms / 1000), 1)
    fft = front.fft_length or 1 << (window - 1).bit_length()
    fft = max(fft, window)
    clip = audio_clip((frames - 1) * step + window, seed).astype(np.float64)
    index = np.arange(window)[None, :] + step * np.arange(frames)[:, None]
    spectrum = np.abs(np.fft.rfft(clip[index] * np.hanning(window), n=fft)) ** 2
    amplitude = np.sqrt(spectrum @ _filterbank(front, channels, fft).T)
    if front.noise_smoothing is not None:
        amplitude = _reduce_noise(amplitude, front.noise_smoothing, front.noise_min_remaining)
    return 20.0 * np.log10(np.maximum(amplitude, 1e-9))


def _reduce_noise(
    amplitude: np.ndarray, smoothing: tuple[float, float], min_remaining: float
) -> np.ndarray:
    """The micro front end's noise reduction: a running per-channel estimate (even and odd
    channels smoothed differently) subtracted, keeping at least ``min_remaining`` of the signal."""
    rate = np.where(np.arange(amplitude.shape[1]) % 2 == 0, *smoothing)
    estimate = np.zeros(amplitude.shape[1])
    out = np.empty_like(amplitude)
    for t, frame in enumerate(amplitude):
        estimate = rate * frame + (1.0 - rate) * estimate
        out[t] = np.maximum(frame - estimate, min_remaining * frame)
    return out


def to_range(db: np.ndarray, low: float, high: float, range_db: float) -> np.ndarray:
    """The top ``range_db`` of ``db`` mapped linearly onto [low, high] (lower values at low)."""
    top = float(db.max())
    return low + np.clip((db - (top - range_db)) / range_db, 0.0, 1.0) * (high - low)
