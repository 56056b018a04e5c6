"""What ``tflkit doctor`` reports: one :class:`Item` per piece, grouped, with its fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["SCHEMA", "STATES", "DoctorReport", "Item"]

SCHEMA = "tflkit.doctor/1"
#: ok: present and working; missing: not here (``fix`` brings it); failed: present but not
#: working (``fix`` says what to change); info: a fact, nothing to fix
STATES = ("ok", "missing", "failed", "info")


@dataclass(frozen=True)
class Item:
    """One piece: its group (``tflkit``, ``runtime``, ``gpu``, ``browser``, ``converters``,
    ``devices``, ``extras``), name, state, what was found, and the command that brings it."""

    group: str
    name: str
    state: str
    detail: str
    fix: str | None = None

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"state {self.state!r} is not one of {STATES}")


@dataclass
class DoctorReport:
    """Everything ``doctor`` found, in the order it is shown."""

    items: list[Item] = field(default_factory=list)

    def find(self, group: str, name: str) -> Item | None:
        return next((i for i in self.items if i.group == group and i.name == name), None)

    @property
    def gpu_ok(self) -> bool:
        """The GPU accelerator compiled and fully accelerated the canary model here."""
        item = self.find("gpu", "accelerator")
        return item is not None and item.state == "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "gpu_ok": self.gpu_ok,
            "items": [asdict(item) for item in self.items],
            "missing": [asdict(i) for i in self.items if i.state in ("missing", "failed")],
        }
