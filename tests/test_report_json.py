"""The one JSON serialiser (:mod:`tflkit.jsonable`): every kind of value a report holds becomes
standard JSON, non-finite numbers as the strings docs/json.md gives."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.compare.sensitivity import OutputNoise
from tflkit.jsonable import dumps, plain, plain_fields


class Colour(enum.Enum):
    RED = "red"


@dataclass
class Leaf:
    value: float
    where: Path
    colour: Colour
    shape: tuple[int, ...] = (1, 2)


@dataclass
class Renamed:
    """A dataclass with a layout of its own: ``plain`` uses its ``to_json``."""

    internal_name: float

    def to_json(self) -> dict[str, Any]:
        return plain({"shown_name": self.internal_name})


@dataclass
class Tree:
    leaves: list[Leaf]
    renamed: Renamed
    extra: dict[str, Any] = field(default_factory=dict)
    missing: Leaf | None = None


def test_non_finite_floats_become_the_documented_strings() -> None:
    assert plain([math.nan, math.inf, -math.inf, 1.5, 0.0]) == ["nan", "inf", "-inf", 1.5, 0.0]
    assert plain({"x": float("nan")}) == {"x": "nan"}


def test_numpy_values_become_python_values() -> None:
    out = plain(
        {
            "f32": np.float32(0.5),
            "f64_nan": np.float64("nan"),
            "f16_inf": np.float16("-inf"),
            "i64": np.int64(7),
            "u8": np.uint8(255),
            "flag": np.bool_(True),
            "array": np.array([[1.0, np.nan], [np.inf, -np.inf]], np.float32),
            "ints": np.arange(3, dtype=np.int32),
        }
    )
    assert out == {
        "f32": 0.5,
        "f64_nan": "nan",
        "f16_inf": "-inf",
        "i64": 7,
        "u8": 255,
        "flag": True,
        "array": [[1.0, "nan"], ["inf", "-inf"]],
        "ints": [0, 1, 2],
    }
    assert type(out["i64"]) is int and type(out["flag"]) is bool and type(out["f32"]) is float


def test_nested_dataclasses_paths_enums_and_tuples() -> None:
    tree = Tree(
        leaves=[Leaf(math.inf, Path("/m.tflite"), Colour.RED)],
        renamed=Renamed(math.nan),
        extra={"shape": (3, np.int64(4)), "nested": [Leaf(-0.25, Path("a"), Colour.RED, ())]},
    )
    expected = {
        "leaves": [{"value": "inf", "where": "/m.tflite", "colour": "red", "shape": [1, 2]}],
        "renamed": {"shown_name": "nan"},
        "extra": {
            "shape": [3, 4],
            "nested": [{"value": -0.25, "where": "a", "colour": "red", "shape": []}],
        },
        "missing": None,
    }
    assert plain(tree) == expected
    assert plain_fields(tree) == expected
    # standard JSON: no NaN / Infinity tokens, and it reads back as the plain values
    text = dumps(tree)
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == expected


def test_sensitivity_keeps_nan_as_nan() -> None:
    """A NaN noise figure stays NaN's JSON form; it used to be written as "inf"."""
    noise = OutputNoise("fp16", 2.0**-11, rms=math.nan, max_abs=math.inf, log_max_abs=-math.inf)
    data = noise.to_json()
    assert data["rms"] == "nan"
    assert data["max_abs"] == "inf"
    assert data["log_max_abs"] == "-inf"
    assert "elements" not in data
