"""The input sets every runner gets: :func:`make_input_sets` and what it returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tflkit import ir
from tflkit.errors import UsageError
from tflkit.ir.entry import IoSpec, entry_point
from tflkit.ir.feeds import random_array
from tflkit.ir.shapes import by_feed_name
from tflkit.jsonable import plain
from tflkit.validation.inputs.files import from_file, from_images, nonfinite_notes
from tflkit.validation.inputs.indices import index_span
from tflkit.validation.inputs.ranges import real_range, value_range
from tflkit.validation.inputs.realistic import realistic_feeds
from tflkit.validation.inputs.specs import input_metadata_of, resolve_specs
from tflkit.validation.spectrogram import METADATA_NAME, front_end

__all__ = ["KINDS", "InputSets", "make_input_sets"]

KINDS = ("realistic", "random")


@dataclass
class InputSets:
    """The feeds every runner gets, and where they came from."""

    feeds: list[dict[str, np.ndarray]]
    specs: list[IoSpec]
    source: str
    seed: int | None = None
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: per input, what it got: "photo", "audio", "spectrogram", "index", "random" (or "file",
    #: "images")
    kinds: dict[str, str] = field(default_factory=dict)

    @property
    def realistic(self) -> bool:
        """True when no input fell back to random data."""
        return bool(self.kinds) and "random" not in self.kinds.values()

    def summary(self) -> dict[str, Any]:
        """What kind of data the sets hold: source ("realistic", "realistic+random", "random",
        a file...), seed, and per input its data ("photo", "audio", "spectrogram", "index"...)."""
        return {"source": self.source, "seed": self.seed, "data": dict(self.kinds)}

    def to_json(self) -> dict[str, Any]:
        inputs = []
        for spec in self.specs:
            entry = spec.to_json()
            if spec.name in self.ranges:
                entry["range"] = list(self.ranges[spec.name])
            if spec.name in self.kinds:
                entry["data"] = self.kinds[spec.name]
            inputs.append(entry)
        return plain(
            {
                "count": len(self.feeds),
                "source": self.source,
                "seed": self.seed,
                "inputs": inputs,
                "notes": self.notes,
            }
        )


def make_input_sets(
    model: ir.Model,
    *,
    signature: str | None = None,
    source: str | Path | None = None,
    count: int = 4,
    seed: int = 0,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    kind: str = "random",
    fallback_ranges: Mapping[str, tuple[float, float]] | None = None,
) -> InputSets:
    """``count`` generated feeds (``kind`` "realistic" or seeded "random"), or the feeds in
    ``source`` (.npy, .npz or image folder). ``fallback_ranges``: real-valued ranges for float
    inputs the model says nothing about (see :func:`value_range`)."""
    if count < 1:
        raise UsageError(f"the number of input sets must be at least 1, got {count}")
    if kind not in KINDS:
        raise UsageError(f"input kind must be one of {', '.join(KINDS)}, got {kind!r}")
    _, subgraph, inputs, _ = entry_point(model, signature)
    notes: list[str] = []
    specs = resolve_specs(inputs, by_feed_name(model, shapes, signature), notes)
    metas = input_metadata_of(model, subgraph, specs)
    fallback = fallback_ranges or {}
    ranges = {
        spec.name: value_range(spec, meta, fallback.get(spec.name))
        for spec, meta in zip(specs, metas, strict=True)
    }
    for spec, meta in zip(specs, metas, strict=True):
        if spec.name in fallback and spec.dtype.kind == "f" and real_range(spec, meta) is None:
            low, high = fallback[spec.name]
            notes.append(
                f"input {spec.name}: values in [{low:.6g}, {high:.6g}], the range the reference's "
                "quantization covers (this model states none)"
            )
    if source is None and kind == "realistic":
        for spec in specs:  # ids and lengths of any dtype: whole numbers in their span
            found = index_span(spec, specs)
            if found is not None:
                ranges[spec.name] = found[1]
        entry = model.metadata_entry(METADATA_NAME)
        front = front_end(bytes(entry.buffer.data) if entry is not None else None)
        feeds, kinds = realistic_feeds(specs, metas, ranges, count, seed, notes, front)
        source_name = "realistic" if "random" not in kinds.values() else "realistic+random"
        return InputSets(feeds, specs, source_name, seed, ranges, notes, kinds)
    if source is None:
        rng = np.random.default_rng(seed)
        feeds = [
            {
                spec.name: random_array(spec.shape, spec.dtype, rng, ranges[spec.name])
                for spec in specs
            }
            for _ in range(count)
        ]
        kinds = {spec.name: "random" for spec in specs}
        return InputSets(feeds, specs, "random", seed, ranges, notes, kinds)
    path = Path(source)
    if path.is_dir():
        feeds = from_images(path, specs)
        return InputSets(feeds, specs, f"images:{path}", None, ranges, notes)
    if not path.is_file():
        raise UsageError(f"inputs {path} do not exist")
    feeds = from_file(path, specs)
    notes += nonfinite_notes(feeds)
    return InputSets(feeds, specs, f"file:{path}", None, {}, notes)
