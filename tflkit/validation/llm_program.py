"""The LLM program of a KV-cache graph: where its prefill/decode signatures keep their tokens,
positions, attention mask and cache (:func:`kv_program`), and the prompt ``validate --steps``
feeds it.

A model made by litert-torch's generative API (and LiteRT-LM's converters) has a ``prefill_*``
signature (a prompt of tokens at positions 0..P-1) and a ``decode`` signature (one token at one
position), both taking the KV cache as inputs (``kv_cache_k_0``, ``kv_cache_v_0``, ...) and
returning the updated cache under the same names; ``decode`` returns ``logits`` too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tflkit.delegates.kv_steps import KvProgram, causal_mask
from tflkit.errors import UsageError

__all__ = [
    "DECODE_ONLY_PROMPT",
    "MASK_DTYPES",
    "MASK_NAMES",
    "KvProgram",
    "causal_mask",
    "kv_program",
    "max_steps",
    "prompt_tokens",
    "with_prompt",
]

#: The dtypes of the attention mask tflkit builds (:func:`causal_mask`): additive, 0 up to the
#: position and the dtype's lowest value after it. For float32 that is the value litert-torch
#: 0.10's export bakes into its own mask cache (its ``causal_mask_value``, -inf, is
#: -3.4028235e38 in the graph's GATHER_ND constant); finite, so a masked logit stays finite.
MASK_DTYPES = ("float32", "float16")
#: Names a decode/prefill input is taken for the attention mask by.
MASK_NAMES = ("mask", "attention_mask", "causal_mask")
#: The prompt a decode-only model (no prefill signature) runs through ``decode`` token by token:
#: this many tokens, fewer when the cache is shorter.
DECODE_ONLY_PROMPT = 8


def kv_program(model: Any) -> KvProgram:
    """The prefill/decode/KV-cache layout of ``model`` (an ``ir.Model``); ``UsageError`` saying
    what is missing, or which input tflkit cannot feed, when it is not a KV-cache LLM graph.

    Understands litert-torch's generative exports: ``prefill_*`` + ``decode`` or ``decode``
    alone, an attention mask input or none, any KV cache layout (the cache length from the mask's
    last axis, else from the axis the decode graph's DYNAMIC_UPDATE_SLICE writes one position
    into)."""
    sigs = {s.key: s for s in model.signatures}
    decode = next((k for k in sigs if k == "decode"), None) or next(
        (k for k in sigs if k.startswith("decode")), None
    )
    if decode is None:
        raise UsageError(
            "--steps needs a KV-cache LLM graph with a decode signature, and prefill_* ones or "
            f"none (litert-torch's generative export); this model has {sorted(sigs) or 'none'}"
        )
    dec = sigs[decode]
    prefills = sorted(
        (k for k in sigs if k.startswith("prefill") and "pixel" not in k and "lora" not in k),
        key=lambda k: _prefill_len(sigs[k]),
    )
    prefill = prefills[-1] if prefills else None
    pre = sigs[prefill] if prefill is not None else None
    cache = tuple(n for n in dec.inputs if n in dec.outputs and (pre is None or n in pre.inputs))
    tokens = next((n for n in ("tokens", "input_ids") if n in dec.inputs), None)
    positions = next((n for n in ("input_pos", "positions") if n in dec.inputs), None)
    logits = next((n for n in dec.outputs if n not in dec.inputs), None)
    missing = [
        what
        for what, found in (
            ("a KV cache fed back by name", cache),
            ("a tokens input", tokens),
            ("an input_pos input", positions),
            ("a logits output", logits),
        )
        if not found
    ]
    if missing:
        raise UsageError(f"--steps: the decode signature {decode!r} lacks " + ", ".join(missing))
    mask_specs = _mask_specs([s for s in (dec, pre) if s is not None], {*cache, tokens, positions})
    specs = {
        n: (tuple(int(d) for d in dec.inputs[n].shape), dec.inputs[n].dtype.name) for n in cache
    }
    seq_axes = {n: _update_axis(dec.inputs[n], model) for n in cache}
    cache_len, found_by = _cache_len(specs, seq_axes, mask_specs)
    prompt_len = _prefill_len(pre) if pre is not None else min(DECODE_ONLY_PROMPT, cache_len - 1)
    _check_mask_rows(mask_specs, decode, prompt_len, cache_len)
    return KvProgram(
        prefill=prefill,
        decode=decode,
        prefill_len=max(1, prompt_len),
        tokens=tokens,
        positions=positions,
        logits=logits,
        vocab=int(dec.outputs[logits].shape[-1]),
        cache=cache,
        cache_len=cache_len,
        cache_specs=specs,
        mask_specs=mask_specs,
        seq_axes=seq_axes,
        cache_len_from=found_by,
    )


_EXPECTED = (
    "tflkit feeds tokens/input_ids, input_pos/positions, a float attention mask "
    f"({'/'.join(MASK_NAMES)}: last axis the cache length) and the KV cache (inputs returned "
    "under the same name by decode)"
)


def _spec(tensor: Any) -> str:
    return f"{[int(d) for d in tensor.shape]} {tensor.dtype.name}"


def _mask_input(signature: Any, known: set[str]) -> tuple[str, tuple[int, ...], str] | None:
    """The signature's attention-mask input (name, shape, dtype), if it has one; ``UsageError``
    for a mask tflkit cannot build (not float, rank < 2)."""
    names = [n for n in signature.inputs if n not in known and "mask" in n.lower()]
    name = next((n for n in MASK_NAMES if n in names), None) or next(iter(names), None)
    if name is None:
        return None
    tensor = signature.inputs[name]
    shape = tuple(int(d) for d in tensor.shape)
    if tensor.dtype.name not in MASK_DTYPES or len(shape) < 2:
        raise UsageError(
            f"--steps: {signature.key}'s input {name!r} is {_spec(tensor)}; tflkit builds an "
            f"additive causal mask: {' or '.join(MASK_DTYPES)}, [..., queries, cache length]"
        )
    return name, shape, tensor.dtype.name


def _mask_specs(
    signatures: Sequence[Any], known: set[str]
) -> dict[str, tuple[str, tuple[int, ...], str]]:
    """Per signature taking one, its mask input; ``UsageError`` naming any input left over."""
    found = {}
    for sig in signatures:
        mask = _mask_input(sig, known)
        _check_inputs(sig.key, sig, known | ({mask[0]} if mask else set()))
        if mask is not None:
            found[sig.key] = mask
    return found


def _check_mask_rows(
    masks: Mapping[str, tuple[str, tuple[int, ...], str]], decode: str, prompt: int, cache: int
) -> None:
    """A mask's query axis (second last) is the signature's tokens (1 in decode)."""
    for key, (name, shape, _) in masks.items():
        rows = 1 if key == decode else prompt
        if shape[-2] != rows:
            raise UsageError(
                f"--steps: {key}'s mask input {name!r} {list(shape)}: tflkit builds an additive "
                f"causal mask [..., {rows}, {cache}] (queries x cache positions)"
            )


def _check_inputs(key: str, signature: Any, known: set[str]) -> None:
    other = [n for n in signature.inputs if n not in known]
    if other:
        what = ", ".join(f"{n!r} {_spec(signature.inputs[n])}" for n in other)
        raise UsageError(f"--steps: {key} takes {what}, which tflkit cannot feed: {_EXPECTED}")


def _update_axis(tensor: Any, model: Any) -> int | None:
    """The axis of cache input ``tensor`` that the graph writes positions into: where the
    update of the DYNAMIC_UPDATE_SLICE writing into it is shorter than the cache (one position
    in decode), followed into a composite's decomposition; None when there is no such op."""
    from tflkit.ir.composites import composite_of

    for op, slot in tensor.uses:
        if op.type == "DYNAMIC_UPDATE_SLICE" and slot == 0 and op.inputs[1] is not None:
            cache, update = tuple(tensor.shape), tuple(op.inputs[1].shape)
            shorter = [a for a, (c, u) in enumerate(zip(cache, update, strict=False)) if u < c]
            if len(shorter) == 1 and len(update) == len(cache):
                return shorter[0]
        info = composite_of(op) if op.type == "STABLEHLO_COMPOSITE" else None
        if info is not None and info.decomposition_subgraph is not None:
            graph = model.subgraphs[info.decomposition_subgraph]
            if slot < len(graph.inputs):
                axis = _update_axis(graph.inputs[slot], model)
                if axis is not None:
                    return axis
    return None


def _cache_len(
    specs: Mapping[str, tuple[tuple[int, ...], str]],
    seq_axes: Mapping[str, int | None],
    masks: Mapping[str, tuple[str, tuple[int, ...], str]],
) -> tuple[int, str]:
    """The cache length and how it was found: the mask's last axis, else the axis the graph
    writes positions into (the same length in every cache), else the longest cache axis (the
    old guess, right when the cache is longer than every other axis)."""
    lengths = {shape[-1] for _, shape, _ in masks.values()}
    if len(lengths) > 1:
        raise UsageError(f"--steps: the mask inputs disagree on the cache length: {masks}")
    written = {specs[n][0][a] for n, a in seq_axes.items() if a is not None}
    if lengths and written and written != lengths:
        raise UsageError(
            f"--steps: the mask inputs' last axis ({lengths.pop()}) is not the cache length the "
            f"graph writes positions into ({sorted(written)}): {masks}"
        )
    if lengths:
        return lengths.pop(), "the mask input's last axis"
    if len(written) == 1 and all(a is not None for a in seq_axes.values()):
        return written.pop(), "the cache axis DYNAMIC_UPDATE_SLICE writes the position into"
    return min(max(s) for s, _ in specs.values()), "the longest cache axis (a guess)"


def _prefill_len(signature: Any) -> int:
    tokens = signature.inputs.get("tokens") or next(iter(signature.inputs.values()))
    return int(tokens.shape[-1])


def prompt_tokens(program: KvProgram, seed: int = 0) -> np.ndarray:
    """A seeded prompt of the program's prompt length (token ids in 1..vocab-1)."""
    rng = np.random.default_rng(seed)
    return rng.integers(1, program.vocab, size=program.prompt_length).astype(np.int32)


def max_steps(program: KvProgram) -> int:
    """Decode steps that fit in the cache after the prompt."""
    return program.cache_len - program.prompt_length + 1


def with_prompt(program: KvProgram, steps: int, prompt_len: int | None = None) -> KvProgram:
    """``program`` running a prompt of ``prompt_len`` tokens, by default the longest that fills
    at most the prefill signature and leaves room in the cache for ``steps`` decode steps; a
    usage error when the prompt is longer than the prefill takes or it and the steps do not fit
    in the cache."""
    fits = program.cache_len - steps + 1
    length = min(program.prefill_len, fits) if prompt_len is None else prompt_len
    if steps < 1 or length < 1 or length > fits:
        raise UsageError(
            f"--steps {steps}: the cache holds {program.cache_len} positions; a "
            f"{max(length, 1)}-token prompt leaves room for "
            f"1..{program.cache_len - max(length, 1) + 1} decode steps"
        )
    if program.prefill is not None and length > program.prefill_len:
        raise UsageError(
            f"the prompt has {length} tokens and {program.prefill} takes {program.prefill_len}"
        )
    return replace(program, prompt_len=None if length == program.prefill_len else length)
