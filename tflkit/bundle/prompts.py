"""Prompts made of a bundle's own vocabulary, for a bundle whose tokenizer does not know tflkit's
English prompts (they come back as ``<unk>``, so both backends would be judged on unknown
tokens).

The words are read from the tokenizer section the bundle packs, in id order past the special
tokens (a SentencePiece model lists its pieces by score, most frequent first; a BPE vocabulary's
ids follow its merges; a word-level one's its word list): a SentencePiece ``NORMAL`` piece that
starts a word (``▁word``), an HF token that is a whole word (``Ġword`` or ``▁word`` in a BPE or
Unigram vocabulary; any token of a word-level one). Only alphabetic words are taken, so each
tokenizes back to itself.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator

from tflkit.bundle.litertlm import Bundle
from tflkit.bundle.protowire import ProtoError, fields

__all__ = ["PROMPT_WORDS", "vocabulary_prompts", "vocabulary_words"]

#: words per prompt: the length of tflkit's own prompts (4 to 6 words)
PROMPT_WORDS = 5
#: SentencePiece's piece type of an ordinary piece (``ModelProto.SentencePiece.Type.NORMAL``)
_SP_NORMAL = 1
#: the marks a tokenizer puts before a piece that starts a word
_WORD_MARKS = ("▁", "Ġ")


def vocabulary_prompts(bundle: Bundle, count: int = 3, words: int = PROMPT_WORDS) -> list[str]:
    """``count`` prompts of ``words`` words each from the bundle's tokenizer (fewer when it has
    fewer words; none without a readable tokenizer section)."""
    found = vocabulary_words(bundle, count * words)
    return [" ".join(found[i : i + words]) for i in range(0, len(found) - words + 1, words)]


def vocabulary_words(bundle: Bundle, limit: int) -> list[str]:
    """Up to ``limit`` distinct alphabetic words of the bundle's tokenizer, in id order."""
    readers = {"SP_Tokenizer": _sp_words, "HF_Tokenizer_Zlib": _hf_words}
    for section in bundle.sections:
        reader = readers.get(section.kind)
        if reader is None:
            continue
        try:
            words = list(dict.fromkeys(w for w in reader(bytes(bundle.view(section))) if w))
        except (ProtoError, ValueError, zlib.error):
            return []
        return words[:limit]
    return []


def _word(token: str, marked_only: bool) -> str | None:
    """The word a token spells, or None (a word's middle, punctuation, a special token)."""
    for mark in _WORD_MARKS:
        if token.startswith(mark):
            token = token[len(mark) :]
            break
    else:
        if marked_only:
            return None
    return token if len(token) >= 2 and token.isalpha() else None


def _sp_words(data: bytes) -> Iterator[str | None]:
    """The words of a SentencePiece ``ModelProto`` (field 1: pieces; in a piece, field 1 the
    text, field 3 the type)."""
    for number, _, value in fields(data):
        if number != 1 or not isinstance(value, bytes):
            continue
        text, kind = "", _SP_NORMAL
        for n, _, v in fields(value):
            if n == 1 and isinstance(v, bytes):
                text = v.decode("utf-8", "replace")
            elif n == 3 and isinstance(v, int):
                kind = v
        yield _word(text, marked_only=True) if kind == _SP_NORMAL else None


def _hf_words(data: bytes) -> Iterator[str | None]:
    """The words of an ``HF_Tokenizer_Zlib`` section (8-byte size, zlib ``tokenizer.json``)."""
    spec = json.loads(zlib.decompress(data[8:]))
    model = spec.get("model") or {}
    vocab = model.get("vocab") or {}
    if isinstance(vocab, list):  # Unigram: [[piece, score], ...]
        tokens = [entry[0] for entry in vocab if entry]
    else:
        tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    special = {t.get("content") for t in spec.get("added_tokens") or [] if isinstance(t, dict)}
    marked = model.get("type") != "WordLevel" and any(t.startswith(_WORD_MARKS) for t in tokens)
    for token in tokens:
        yield None if token in special else _word(token, marked_only=marked)
