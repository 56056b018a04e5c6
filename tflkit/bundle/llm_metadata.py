"""LiteRT-LM's ``LlmMetadata`` message (``runtime/proto/llm_metadata.proto``, LiteRT-LM 0.18) and
the tokenizers a bundle packs, decoded from their bytes.

The field numbers below are the proto's; unknown fields are kept by number, so a newer bundle
still reads. Tokens are ``{"ids": [...]}`` or ``{"text": "..."}`` (a ``TokenUnion``).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from tflkit.bundle.protowire import ProtoError, fields, floats32, packed_varints, signed32

__all__ = ["ProtoError", "decode_llm_metadata", "hf_tokenizer_info", "sp_tokenizer_info"]

_SAMPLER_TYPES = {0: "unspecified", 1: "top_k", 2: "top_p", 3: "greedy"}
_SAMPLER_BACKENDS = {0: "unspecified", 1: "cpu", 2: "gpu"}
#: LlmModelType's oneof: field number -> name.
_MODEL_TYPES = {
    1: "generic_model",
    2: "gemma3n",
    3: "function_gemma",
    4: "gemma3",
    5: "qwen3",
    7: "qwen2p5",
    8: "gemma4",
    9: "fast_vlm",
    11: "lfm2",
    12: "minicpm5",
    13: "minicpmv4",
}


def _token(data: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, wire, value in fields(data):
        if number == 1 and isinstance(value, bytes):  # TokenIds
            out["ids"] = _ids(value)
        elif number == 2 and isinstance(value, bytes):
            out["text"] = value.decode("utf-8", "replace")
        else:
            out[f"field_{number}"] = value if wire == 0 else len(value)  # type: ignore[arg-type]
    return out


def _ids(data: bytes) -> list[int]:
    ids: list[int] = []
    for number, wire, value in fields(data):
        if number == 1:
            ids += [signed32(value)] if wire == 0 else packed_varints(value)  # type: ignore[arg-type]
    return ids


def _affixes(data: bytes) -> dict[str, str]:
    names = {1: "prefix", 2: "suffix"}
    return {
        names[n]: v.decode("utf-8", "replace")
        for n, _, v in fields(data)
        if n in names and isinstance(v, bytes)
    }


def _templates(data: bytes) -> dict[str, dict[str, str]]:
    names = {1: "user", 2: "model", 3: "system"}
    return {
        names[n]: _affixes(v) for n, _, v in fields(data) if n in names and isinstance(v, bytes)
    }


def _sampler(data: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, _, value in fields(data):
        if number == 1:
            out["type"] = _SAMPLER_TYPES.get(int(value), str(value))  # type: ignore[arg-type]
        elif number == 2:
            out["k"] = signed32(int(value))  # type: ignore[arg-type]
        elif number in (3, 4) and isinstance(value, bytes):
            out["p" if number == 3 else "temperature"] = round(floats32(value), 6)
        elif number == 5:
            out["seed"] = signed32(int(value))  # type: ignore[arg-type]
        elif number == 6:
            out["backend"] = _SAMPLER_BACKENDS.get(int(value), str(value))  # type: ignore[arg-type]
        elif number == 7:
            out["compute_exact_log_probs"] = bool(value)
    return out


def _model_type(data: bytes) -> str:
    for number, _, _ in fields(data):
        return _MODEL_TYPES.get(number, f"field_{number}")
    return "unset"


def decode_llm_metadata(data: bytes | memoryview) -> dict[str, Any]:
    """The ``LlmMetadata`` in ``data`` as plain values; raises ProtoError when malformed."""
    out: dict[str, Any] = {}
    for number, wire, value in fields(data):
        raw = value if isinstance(value, bytes) else b""
        if number == 1:
            out["start_token"] = _token(raw)
        elif number == 2:
            out.setdefault("stop_tokens", []).append(_token(raw))
        elif number == 3:
            out["prompt_templates"] = _templates(raw)
        elif number == 4:
            out["sampler_params"] = _sampler(raw)
        elif number == 5:
            out["max_num_tokens"] = signed32(int(value))  # type: ignore[arg-type]
        elif number == 6:
            out["llm_model_type"] = _model_type(raw)
        elif number == 7:
            out["jinja_prompt_template"] = raw.decode("utf-8", "replace")
        elif number == 8:
            out["channels"] = out.get("channels", 0) + 1
        elif number == 9:
            out["suppress_tokens"] = _ids(raw)
        elif number == 10:
            out["kv_cache_init_value"] = int(value)  # type: ignore[arg-type]
        elif number in (11, 12):
            out["supports_thinking" if number == 11 else "supports_function_calling"] = bool(value)
        elif number == 13:
            out["pad_token"] = _token(raw)
        elif number == 14:
            out["min_runtime_version"] = raw.decode("utf-8", "replace")
        else:
            out[f"field_{number}"] = value if wire == 0 else len(raw)
    return out


def hf_tokenizer_info(data: bytes | memoryview) -> dict[str, Any]:
    """Kind, vocabulary size and model of an ``HF_Tokenizer_Zlib`` section (8-byte little-endian
    uncompressed size, then the zlib-compressed ``tokenizer.json``); raises ValueError."""
    if len(data) < 8:
        raise ValueError("HF tokenizer section shorter than its 8-byte size prefix")
    expected = int.from_bytes(bytes(data[:8]), "little")
    try:
        text = zlib.decompress(bytes(data[8:]))
    except zlib.error as exc:
        raise ValueError(f"HF tokenizer section does not inflate ({exc})") from None
    if len(text) != expected:
        raise ValueError(f"HF tokenizer inflates to {len(text)} bytes, its prefix says {expected}")
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"HF tokenizer is not JSON ({exc})") from None
    model = spec.get("model") or {}
    vocab = model.get("vocab") or {}
    added = spec.get("added_tokens") or []
    ids = set(vocab.values()) if isinstance(vocab, dict) else set(range(len(vocab)))
    ids |= {t.get("id") for t in added if isinstance(t, dict)}
    return {
        "kind": "hf",
        "model": model.get("type"),
        "vocab_size": len(ids),
        "json_bytes": len(text),
        "special_tokens": [t.get("content") for t in added if t.get("special")],
    }


def sp_tokenizer_info(data: bytes | memoryview) -> dict[str, Any]:
    """Kind and piece count of an ``SP_Tokenizer`` section (a SentencePiece ``ModelProto``:
    field 1 is each piece; piece type 2 is UNKNOWN, 3 CONTROL); raises ProtoError."""
    pieces = control = 0
    model = None
    for number, _, value in fields(data):
        if number == 1 and isinstance(value, bytes):
            pieces += 1
            kind = next((int(v) for n, _, v in fields(value) if n == 3), 1)  # type: ignore[arg-type]
            control += kind in (2, 3)
        elif number == 2 and isinstance(value, bytes):  # TrainerSpec: model_type is field 3
            types = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}
            model = next((types.get(int(v)) for n, _, v in fields(value) if n == 3), "unigram")  # type: ignore[arg-type]
    if pieces == 0:
        raise ProtoError("no pieces: not a SentencePiece model")
    return {
        "kind": "sentencepiece",
        "model": model,
        "vocab_size": pieces,
        "special_pieces": control,
    }
