"""Read and write LiteRT-LM ``.litertlm`` bundles (file format 1.x, LiteRT-LM 0.18).

Layout (``litert-lm-builder``'s ``litertlm_core`` and ``litertlm_header_schema.fbs``):

- bytes 0-7 the magic ``LITERTLM``; 8-19 the version (major, minor, patch: uint32 LE); 24-31
  where the header ends (uint64 LE);
- from byte 32 the header, a flatbuffer ``LiteRTLMMetaData``: ``system_metadata`` (key/value
  entries) and ``section_metadata`` (one ``SectionObject`` per section: key/value ``items`` such
  as ``model_type``, ``backend_constraint``, ``prefer_activation_type``; ``begin_offset`` and
  ``end_offset`` in the file; ``data_type``);
- each section's bytes from its begin offset, every section starting on a 16 KiB boundary
  (zero padding between).

:func:`load_bundle` maps the file (nothing is read until used); each section is a
``memoryview`` of the map, and :meth:`Bundle.model` opens a ``TFLiteModel`` section with
:func:`tflkit.ir.load` on that view (no copy). :func:`save_bundle` writes a bundle with some
sections replaced: the header is the original's with the offsets patched in place (the builder
always writes both offset fields, so its size never changes), every other section byte-identical,
the alignment kept; atomically, never over its own input.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tflkit.bundle.magic import MAGIC, is_bundle
from tflkit.errors import ModelLoadError, UsageError
from tflkit.ir._tables import Fields
from tflkit.ir.serde import ModelBytes, read_model_bytes

__all__ = [
    "BLOCK",
    "MAGIC",
    "SECTION_TYPES",
    "Bundle",
    "Section",
    "is_bundle",
    "load_bundle",
    "save_bundle",
]

BLOCK = 16 * 1024
_HEADER_START = 32
#: ``AnySectionDataType`` (LiteRT-LM 0.18).
SECTION_TYPES = {
    0: "NONE",
    1: "GenericBinaryData",
    2: "Deprecated",
    3: "TFLiteModel",
    4: "SP_Tokenizer",
    5: "LlmMetadataProto",
    6: "HF_Tokenizer_Zlib",
    7: "TFLiteWeights",
    8: "EmbeddingMetadataProto",
    9: "ExecutorMetadataProto",
    10: "TtsMetadataProto",
    11: "AsrMetadataProto",
}
#: ``VData`` union members: type -> struct code of the one ``value`` field ("s": a string).
_VDATA = {
    1: "B",
    2: "b",
    3: "H",
    4: "h",
    5: "I",
    6: "i",
    7: "f",
    8: "?",
    9: "s",
    10: "Q",
    11: "q",
    12: "d",
}


@dataclass(frozen=True)
class Section:
    """One section: its type, metadata items and byte range in the file."""

    index: int
    kind: str
    begin: int
    end: int
    items: dict[str, Any]
    #: absolute positions of the begin/end offset fields in the header (for repacking)
    offset_fields: tuple[int, int] = field(repr=False, compare=False)

    @property
    def size(self) -> int:
        return self.end - self.begin

    @property
    def model_type(self) -> str | None:
        value = self.items.get("model_type")
        return None if value is None else str(value).removeprefix("tf_lite_")

    @property
    def backend_constraint(self) -> str | None:
        value = self.items.get("backend_constraint")
        return None if value is None else str(value)

    @property
    def label(self) -> str:
        what = f" {self.model_type}" if self.model_type else ""
        return f"section {self.index} ({self.kind}{what})"

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "type": self.kind,
            "model_type": self.model_type,
            "backend_constraint": self.backend_constraint,
            "prefer_activation_type": self.items.get("prefer_activation_type"),
            "begin": self.begin,
            "end": self.end,
            "bytes": self.size,
            "items": self.items,
        }


@dataclass
class Bundle:
    """A ``.litertlm`` file: header, system metadata and sections over the file's bytes."""

    label: str
    data: ModelBytes
    version: tuple[int, int, int]
    header_end: int
    system: dict[str, Any]
    sections: list[Section]

    def view(self, section: Section | int) -> memoryview:
        """The bytes of ``section`` (a view of the map, no copy)."""
        s = self.sections[section] if isinstance(section, int) else section
        return memoryview(self.data)[s.begin : s.end]

    def of_kind(self, kind: str) -> list[Section]:
        return [s for s in self.sections if s.kind == kind]

    def model(self, section: Section | int):
        """The ``TFLiteModel`` section as an IR model, loaded from a view of the bundle."""
        from tflkit.ir.serde import load

        s = self.sections[section] if isinstance(section, int) else section
        if s.kind != "TFLiteModel":
            raise UsageError(f"{self.label}: {s.label} is not a TFLite model")
        return load(self.view(s), label=f"{self.label} {s.label}")


def _kv(fields: Fields) -> tuple[str, Any]:
    key = fields.string(0) or ""
    kind = fields.u8(1)
    value_table = fields.child(2)
    code = _VDATA.get(kind)
    if value_table is None or code is None:
        return key, None
    if code == "s":
        return key, value_table.string(0)
    value = value_table.scalar(0, code)
    return key, round(value, 7) if code == "f" else value


def _header(data: ModelBytes, label: str) -> tuple[tuple[int, int, int], int, Fields]:
    size = len(data)
    if size < _HEADER_START or bytes(data[:8]) != MAGIC:
        if bytes(data[:8]) == MAGIC:
            raise ModelLoadError(f"{label}: truncated .litertlm bundle ({size} bytes, no header)")
        raise ModelLoadError(f"{label}: not a LiteRT-LM bundle (no 'LITERTLM' magic)")
    version = struct.unpack_from("<3I", data, 8)
    if version[0] != 1:
        raise ModelLoadError(
            f"{label}: .litertlm format version {'.'.join(map(str, version))}; tflkit reads 1.x"
        )
    (header_end,) = struct.unpack_from("<Q", data, 24)
    if header_end > size or header_end < _HEADER_START + 8:
        raise ModelLoadError(
            f"{label}: truncated or corrupt .litertlm bundle: its header ends at byte "
            f"{header_end}, the file has {size}"
        )
    return version, header_end, Fields.root(memoryview(data)[_HEADER_START:header_end])


def _sections(root: Fields, size: int, label: str) -> list[Section]:
    table = root.child(1)
    out: list[Section] = []
    for index, obj in enumerate(table.children(0) if table is not None else []):
        begin, end = obj.u64(1), obj.u64(2)
        kind = SECTION_TYPES.get(obj.u8(3), f"type_{obj.u8(3)}")
        slots = (obj.offset(1), obj.offset(2))
        at = tuple(_HEADER_START + obj.pos + s if s else 0 for s in slots)
        if not begin <= end <= size:
            raise ModelLoadError(
                f"{label}: truncated or corrupt .litertlm bundle: section {index} ({kind}) spans "
                f"bytes {begin}-{end}, the file has {size}"
            )
        items = dict(_kv(kv) for kv in obj.children(0))
        out.append(Section(index, kind, begin, end, items, (at[0], at[1])))
    return out


def load_bundle(source: str | os.PathLike[str] | bytes | memoryview) -> Bundle:
    """Map a ``.litertlm`` file (or take its bytes) and read its header; raises ModelLoadError
    with one line for a missing, truncated or corrupt bundle."""
    data, label = read_model_bytes(source, mapped=True)
    version, header_end, root = _header(data, label)
    try:
        system_table = root.child(0)
        system = dict(_kv(kv) for kv in system_table.children(0)) if system_table else {}
        sections = _sections(root, len(data), label)
    except ModelLoadError:
        raise
    except (IndexError, struct.error, ValueError, UnicodeError) as exc:
        raise ModelLoadError(
            f"{label}: corrupt .litertlm header flatbuffer ({type(exc).__name__}: {exc})"
        ) from None
    return Bundle(label, data, version, header_end, system, sections)


def _aligned(offset: int) -> int:
    return (offset + BLOCK - 1) // BLOCK * BLOCK


def save_bundle(
    bundle: Bundle, path: str | os.PathLike[str], replace: Mapping[int, bytes] | None = None
) -> list[tuple[int, int]]:
    """Write ``bundle`` to ``path`` with the sections in ``replace`` (index -> bytes) swapped in;
    returns each section's new (begin, end). Every other byte of a section is the original's."""
    from tflkit.fsio import atomic_output

    replace = dict(replace or {})
    target = Path(path)
    if isinstance(bundle.data, bytes) is False and Path(bundle.label).resolve() == target.resolve():
        raise UsageError(f"{target}: the output would overwrite its input; choose another path")
    header = bytearray(bundle.data[: bundle.header_end])
    spans: list[tuple[int, int]] = []
    offset = _aligned(bundle.header_end)
    for section in bundle.sections:
        size = len(replace[section.index]) if section.index in replace else section.size
        spans.append((offset, offset + size))
        for at, value in zip(section.offset_fields, spans[-1], strict=True):
            if not at:
                raise UsageError(f"{bundle.label}: {section.label} has no offset field to patch")
            struct.pack_into("<Q", header, at, value)
        offset = _aligned(offset + size)
    with atomic_output(target) as out:
        out.write(header)
        for section, (begin, _) in zip(bundle.sections, spans, strict=True):
            out.write(b"\0" * (begin - out.tell()))
            out.write(replace.get(section.index, bundle.view(section)))
    return spans
