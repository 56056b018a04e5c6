"""What each input of the entry point is: its concrete shape (a dynamic one made concrete, a
waveform's samples axis given a second of audio) and its metadata."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from tflkit import ir
from tflkit.errors import UsageError
from tflkit.ir.entry import IoSpec
from tflkit.validation.samples import InputMetadata, input_metadata

__all__ = [
    "AUDIO_SAMPLES",
    "audio_shaped",
    "input_metadata_of",
    "resolve_specs",
    "samples_axis",
    "waveform_input",
]

_AUDIO_HINT = re.compile(r"audio|wav|pcm|signal|speech|waveform", re.IGNORECASE)
#: samples of an audio input whose length is dynamic (one second at 16 kHz)
AUDIO_SAMPLES = 16000


def resolve_specs(
    tensors: Mapping[str, ir.Tensor], overrides: Mapping[str, tuple[int, ...]], notes: list[str]
) -> list[IoSpec]:
    """The entry point's inputs (by feed name) at concrete shapes: ``overrides``
    (``--input-shape``) checked against the model's, else each dynamic dimension at the stored
    shape's value (``shape_signature`` -1, ``shape`` 1: 1, as ``check`` and ``rewrite`` take it),
    or 1 where none is stored; the samples axis of the model's one waveform input (see
    :func:`waveform_input`) at a second of audio. Each such choice is noted in ``notes``."""
    unknown = set(overrides) - set(tensors)
    if unknown:
        raise UsageError(f"--input-shape names {sorted(unknown)}; inputs are {sorted(tensors)}")
    waveform = waveform_input(tensors)
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
            shape = _stored(signature, tensor.shape)
            axis = samples_axis(signature)
            if name == waveform and axis is not None and signature[axis] < 0:
                shape = (*shape[:axis], AUDIO_SAMPLES, *shape[axis + 1 :])
            notes.append(
                f"input {name} has dynamic shape {tensor.display_shape}; using {shape} "
                "(set it with --input-shape)"
            )
        else:
            shape = tensor.shape
        specs.append(IoSpec(name, tensor, tuple(shape)))
    return specs


def _stored(signature: Sequence[int], stored: Sequence[int]) -> tuple[int, ...]:
    """Each dynamic dimension of ``signature`` at the stored shape's value (>= 1), else 1."""
    if len(stored) != len(signature):
        return tuple(d if d >= 0 else 1 for d in signature)
    return tuple(d if d >= 0 else max(int(s), 1) for d, s in zip(signature, stored, strict=True))


def waveform_input(tensors: Mapping[str, ir.Tensor]) -> str | None:
    """The input whose dynamic samples axis gets a second of audio: one whose name says audio,
    else the model's only input when it is waveform-shaped ([N], [B, N], [B, N, 1], float or
    int16). A model of many rank-1 inputs (per-utterance features stored as [1]) has none."""
    candidates = []
    for name, tensor in tensors.items():
        signature = tensor.shape_signature or tensor.shape
        axis = samples_axis(signature)
        if axis is None or signature[axis] >= 0 or not audio_shaped(name, tensor, signature):
            continue
        if _AUDIO_HINT.search(name) or _AUDIO_HINT.search(tensor.name):
            return name
        candidates.append(name)
    return candidates[0] if len(candidates) == 1 and len(tensors) == 1 else None


def samples_axis(signature: Sequence[int]) -> int | None:
    """The samples axis of a waveform-shaped input: [N], [B, N] or [B, N, 1]."""
    rank = len(signature)
    if rank == 3 and signature[-1] == 1:
        return 1
    return rank - 1 if rank in (1, 2) else None


def audio_shaped(name: str, tensor: ir.Tensor, signature: Sequence[int]) -> bool:
    """A float or int16 waveform: [N], [B, N] or [B, N, 1] with N >= 8000 samples or dynamic,
    or a short one whose name says audio."""
    if tensor.dtype is None or np.dtype(tensor.dtype) not in (np.float32, np.int16):
        return False
    axis = samples_axis(signature)
    if axis is None or (axis == 1 and signature[0] > 1):
        return False
    samples = signature[axis]
    return samples < 0 or samples >= 8000 or bool(_AUDIO_HINT.search(name))


def input_metadata_of(
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
