"""``options_from``: every argument of a command lands in a field or is declared as read
elsewhere, so a renamed field cannot fall back to its default without a word."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tflkit.cli.options import options_from


@dataclass
class _Options:
    seed: int = 0
    input_shapes: dict[str, tuple[int, ...]] | None = None


def _command(model: str, seed: int, input_shape: list[str]) -> dict[str, Any]:
    from tflkit.errors import UsageError  # noqa: F401  (locals() holds imports too)

    return dict(locals())


def _renamed(model: str, sead: int) -> dict[str, Any]:
    return dict(locals())


def test_arguments_fill_fields_and_shared_options_are_parsed():
    params = _command("m.tflite", 3, ["x=1,2"])
    options = options_from(_Options, params, command=_command, elsewhere=("model",))
    assert options == _Options(seed=3, input_shapes={"x": (1, 2)})


def test_an_argument_that_matches_no_field_raises():
    with pytest.raises(TypeError, match=r"_Options has no field for the argument\(s\) \['sead'\]"):
        options_from(_Options, _renamed("m", 3), command=_renamed, elsewhere=("model",))


def test_an_undeclared_argument_raises():
    params = _command("m.tflite", 3, [])
    with pytest.raises(TypeError, match=r"\['model'\]"):
        options_from(_Options, params, command=_command)


def test_given_must_name_fields():
    params = _command("m.tflite", 3, [])
    with pytest.raises(TypeError, match="has no field"):
        options_from(_Options, params, command=_command, elsewhere=("model",), nothing=1)
