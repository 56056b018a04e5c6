"""A KV-cache program run step by step on one backend: the loop every ``--steps`` runner runs.

:class:`KvProgram` says where a model's prefill/decode signatures keep their tokens, positions,
attention mask and cache (found by :func:`tflkit.validation.llm_program.kv_program`).
:func:`run_steps` drives one backend (a :data:`Call`): prefill on the prompt (all but its last
token; the last slot is padding that decode step 0 overwrites), then ``steps`` decode steps, each
feeding the cache outputs of the previous call back as inputs (matched by name) and one token at
the next position. With ``forced`` tokens (the CPU's greedy choices: teacher forcing) every
backend is fed the same tokens, so the logits of step k are comparable; each backend's own greedy
token is recorded next to them. The cache each backend feeds back is its own, so error
accumulates the way it does on a device. The same loop runs in this process (the CPU runners)
and in the GPU child (:mod:`tflkit.delegates._steps_worker`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.jsonable import plain

__all__ = [
    "Call",
    "KvProgram",
    "causal_mask",
    "recorded_feed",
    "recording",
    "run_steps",
]


@dataclass(frozen=True)
class KvProgram:
    """Where a model's prefill/decode signatures keep their tokens, positions, mask and cache.

    ``prefill`` is ``None`` for a decode-only model: the prompt (``prefill_len`` tokens) then runs
    through ``decode`` one token at a time. ``prompt_len``: the tokens of the prompt a run uses
    when fewer than ``prefill_len`` (:func:`with_prompt`): the prefill signature gets them
    padded, as LiteRT-LM feeds a short prompt."""

    prefill: str | None
    decode: str
    prefill_len: int
    tokens: str
    positions: str
    logits: str
    vocab: int
    cache: tuple[str, ...]
    cache_len: int
    #: (shape, dtype) of every cache input (the same in both signatures)
    cache_specs: Mapping[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)
    #: per signature taking an attention mask: (input name, shape, dtype)
    mask_specs: Mapping[str, tuple[str, tuple[int, ...], str]] = field(default_factory=dict)
    #: per cache input: the axis the positions index (None when not found in the graph)
    seq_axes: Mapping[str, int | None] = field(default_factory=dict)
    #: how ``cache_len`` was found
    cache_len_from: str = ""
    #: the prompt's tokens when fewer than ``prefill_len`` (None: ``prefill_len``)
    prompt_len: int | None = None

    @property
    def mask(self) -> str | None:
        """The decode signature's mask input, if it takes one."""
        spec = self.mask_specs.get(self.decode)
        return None if spec is None else spec[0]

    @property
    def prompt_length(self) -> int:
        """The prompt's tokens: the last one is decode step 0's input."""
        return self.prompt_len or self.prefill_len

    @property
    def prompt_calls(self) -> int:
        """Signature calls before decode step 0: one prefill, or a decode per prompt token."""
        return 1 if self.prefill is not None else self.prompt_length - 1

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "prefill": self.prefill,
                "decode": self.decode,
                "prefill_len": self.prefill_len,
                "tokens": self.tokens,
                "positions": self.positions,
                "logits": self.logits,
                "vocab": self.vocab,
                "cache": list(self.cache),
                "cache_len": self.cache_len,
                "cache_specs": {k: [list(s), d] for k, (s, d) in self.cache_specs.items()},
                "mask_specs": {k: [n, list(s), d] for k, (n, s, d) in self.mask_specs.items()},
                "seq_axes": dict(self.seq_axes),
                "cache_len_from": self.cache_len_from,
                "prompt_len": self.prompt_length,
            }
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KvProgram:
        fields_ = dict(data)
        fields_["cache"] = tuple(fields_["cache"])
        fields_["prompt_len"] = fields_.get("prompt_len") or None
        fields_["cache_specs"] = {k: (tuple(s), d) for k, (s, d) in data["cache_specs"].items()}
        fields_["mask_specs"] = {
            k: (n, tuple(s), d) for k, (n, s, d) in data.get("mask_specs", {}).items()
        }
        return cls(**fields_)


def causal_mask(
    shape: Sequence[int], dtype: str | np.dtype, positions: Sequence[int]
) -> np.ndarray:
    """An additive causal mask of ``shape`` (last two axes: queries, cache positions) and
    ``dtype``: query row t, at position ``positions[t]``, is 0 at every cache position up to and
    including it and the dtype's lowest value after it (:data:`MASK_DTYPES`; float32's is the
    value litert-torch bakes into its own masks)."""
    dtype = np.dtype(dtype)
    rows = np.asarray(positions, np.int64).reshape(-1, 1)
    block = np.where(np.arange(shape[-1])[None, :] <= rows, 0.0, np.finfo(dtype).min)
    return np.ascontiguousarray(np.broadcast_to(block.astype(dtype), tuple(shape)))


#: A backend call: (signature key, feeds by input name) -> outputs by output name.
Call = Callable[[str, Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


def _with_mask(
    program: KvProgram, key: str, feeds: dict[str, np.ndarray], positions: Sequence[int]
) -> dict[str, np.ndarray]:
    spec = program.mask_specs.get(key)
    if spec is not None:
        name, shape, dtype = spec
        feeds[name] = causal_mask(shape, dtype, positions)
    return feeds


def _run_prompt(
    call: Call, program: KvProgram, prompt: np.ndarray, cache: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The cache after ``prompt[:-1]``: one prefill call, or, with no prefill signature, one
    decode call per token. A prompt shorter than the prefill signature is padded as LiteRT-LM
    pads it: its tokens at positions 0.., the padding slots (token 0) at the positions after
    them, which the decode steps overwrite before the causal mask lets anything read them."""
    p = program.prompt_length
    if program.prefill is None:
        for pos in range(p - 1):
            out = call(program.decode, _decode_feed(program, int(prompt[pos]), pos, cache))
            cache = {n: np.asarray(out[n]) for n in program.cache}
        return cache
    width = program.prefill_len
    tokens = np.zeros((1, width), np.int32)
    tokens[0, : p - 1] = prompt[: p - 1]
    feeds = {program.tokens: tokens, program.positions: np.arange(width, dtype=np.int32), **cache}
    out = call(program.prefill, _with_mask(program, program.prefill, feeds, range(width)))
    return {n: np.asarray(out[n]) for n in program.cache}


def _decode_feed(
    program: KvProgram, token: int, pos: int, cache: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    feeds = {
        program.tokens: np.array([[token]], np.int32),
        program.positions: np.array([pos], np.int32),
        **cache,
    }
    return _with_mask(program, program.decode, feeds, [pos])


def run_steps(
    call: Call,
    program: KvProgram,
    prompt: np.ndarray,
    steps: int,
    forced: Sequence[int] | None = None,
) -> tuple[list[np.ndarray], list[int]]:
    """Prefill ``prompt[:-1]`` (or run it through decode token by token when the model has no
    prefill), then ``steps`` decode steps from ``prompt[-1]``: (the logits of every step, the
    greedy token of every step). With ``forced``, step k+1 is fed ``forced[k]`` instead of this
    backend's own greedy token."""
    p = program.prompt_length
    if len(prompt) != p:
        raise ValueError(f"a {len(prompt)}-token prompt for a program of {p}")
    cache = {n: np.zeros(s, dtype=d) for n, (s, d) in program.cache_specs.items()}
    cache = _run_prompt(call, program, prompt, cache)
    token, logits_all, greedy = int(prompt[p - 1]), [], []
    for k in range(steps):
        out = call(program.decode, _decode_feed(program, token, p - 1 + k, cache))
        logits = np.asarray(out[program.logits], np.float32).reshape(-1)
        cache = {n: np.asarray(out[n]) for n in program.cache}
        logits_all.append(logits)
        greedy.append(int(np.argmax(np.where(np.isfinite(logits), logits, -np.inf))))
        token = greedy[-1] if forced is None else int(forced[k])
    return logits_all, greedy


def recording(call: Call, program: KvProgram, folder: Path) -> Call:
    """``call``, saving the feeds of every decode call to ``folder/step_K.npz`` (by input name):
    what ``--localize`` replays when step K parts (the cache this backend fed itself)."""
    folder.mkdir(parents=True, exist_ok=True)
    # a decode-only model's prompt calls come first: step 0 is the first call after them
    count = [0 if program.prefill is not None else 1 - program.prompt_length]

    def record(key: str, feeds: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        if key == program.decode:
            if count[0] >= 0:
                feeds_ = {k: np.asarray(v) for k, v in feeds.items()}
                np.savez(folder / f"step_{count[0]}.npz", **feeds_)
            count[0] += 1
        return call(key, feeds)

    return record


def recorded_feed(folder: Path, step: int) -> dict[str, np.ndarray]:
    """The decode feeds :func:`recording` saved for ``step``."""
    with np.load(folder / f"step_{step}.npz") as npz:
        return {k: np.array(npz[k]) for k in npz.files}
