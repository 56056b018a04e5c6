"""The one number formatter of the HTML reports: significant digits and units."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["num", "raw"]

_UNITS = {
    "B": ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1, "B")),
    "s": ((1, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")),
}


def num(value: Any, unit: str = "", digits: int = 4) -> str:
    """The one number formatter of the pages: ``digits`` significant digits (integers below
    10,000 as they are), scaled units for bytes (``B``) and seconds (``s``), ``inf``/``nan``
    spelled out, ``-`` for None."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    value = float(value) if not isinstance(value, int) else value
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        text = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return f"{text} {unit}".rstrip()
    if unit in _UNITS and value != 0:
        for scale, name in _UNITS[unit]:
            if abs(value) >= scale or scale == _UNITS[unit][-1][0]:
                return f"{_sig(value / scale, digits)} {name}"
    text = f"{value:,}" if isinstance(value, int) and abs(value) < 10_000 else _sig(value, digits)
    return f"{text} {unit}".rstrip()


def _sig(value: float, digits: int) -> str:
    text = f"{value:.{digits}g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{mantissa}e{int(exponent)}"
    return text


def raw(value: Any) -> str:
    """A value for a ``data-value`` attribute: full precision (``repr`` of a float), empty for
    None."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)
