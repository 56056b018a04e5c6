"""A suite's work items (model x runtime x runner), their keys, the shard split, and the report
assembled from their results.

``regress check`` runs one item per runner of a model's baseline plus one for its GPU residency
(the static check and the accelerator probe); ``regress record`` one item per model (a baseline
holds all its runners, written once they are all back). An item's key names what its result
depends on: the model file's sha256, the suite entry, the runtime, the runner and, for a check,
the baseline's manifest; a result stored under a key is reused by a re-run (resume) and by
``regress merge``. ``--shard I/N`` takes every N-th item of the keys in sorted order, so the split
does not depend on the order of the suite file nor on the machine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tflkit.errors import UsageError
from tflkit.jsonable import plain_fields
from tflkit.report.regress_report import Case, ModelResult, RegressReport

__all__ = [
    "ALL_RUNNERS",
    "PINNED",
    "RESIDENCY",
    "WorkItem",
    "assemble",
    "parse_shard",
    "shard_of",
]

#: The runner field of a record item (every runner of the model at once).
ALL_RUNNERS = "*"
#: The runner field of the item that checks a model's GPU residency.
RESIDENCY = "residency"
#: The runtime field when no ``--runtime`` is given: the LiteRT tflkit itself runs with.
PINNED = "pinned"


@dataclass(frozen=True)
class WorkItem:
    """One unit of a suite: ``entry`` (the model's name in the suite) on ``runner`` with
    ``runtime``, in ``mode`` ("check", "record", "record-force")."""

    entry: str
    model: str
    baseline: str
    model_sha256: str
    runtime: str
    runner: str
    mode: str
    baseline_sha256: str = ""
    #: the ``--runtime`` spec that gives ``runtime`` (its venv); "" for the pinned runtime
    runtime_spec: str = ""

    @property
    def key(self) -> str:
        parts = (self.mode, self.model_sha256, self.entry, self.runtime, self.runner)
        return "|".join((*parts, self.baseline_sha256[:16]))

    def to_json(self) -> dict[str, str]:
        return plain_fields(self)

    @classmethod
    def from_json(cls, data: Mapping[str, str]) -> WorkItem:
        return cls(**data)


def file_sha256(path: str) -> str:
    """The sha256 of a file, or "missing" when it cannot be read (its item then reports why)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return "missing"
    return digest.hexdigest()


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"I/N"`` -> (I, N) with 1 <= I <= N; a usage error otherwise."""
    if text is None:
        return None
    index, sep, count = text.partition("/")
    if not (sep and index.isdigit() and count.isdigit()) or not 1 <= int(index) <= int(count):
        raise UsageError(f"--shard takes I/N with 1 <= I <= N (e.g. 1/4), got {text!r}")
    return int(index), int(count)


def shard_of(items: Sequence[WorkItem], shard: tuple[int, int] | None) -> list[WorkItem]:
    """The items of shard I of N: every N-th by sorted key, starting at the (I-1)-th; kept in
    suite order."""
    if shard is None:
        return list(items)
    index, count = shard
    ranked = sorted(items, key=lambda item: item.key)
    mine = {item.key for k, item in enumerate(ranked) if k % count == index - 1}
    return [item for item in items if item.key in mine]


def _merged(model: str, baseline: str, parts: Sequence[ModelResult]) -> ModelResult:
    """One model's result from its items' results, in item order: cases without repeats (an
    interface mismatch each runner item reports), changes once each, the first error."""
    cases: list[Case] = []
    for part in parts:
        cases += [c for c in part.cases if c not in cases]
    changes = list(dict.fromkeys(c for part in parts for c in part.changes))
    errors = [part.error for part in parts if part.error]
    verdicts = {part.verdict for part in parts}
    verdict = "error" if "error" in verdicts else "fail" if "fail" in verdicts else "pass"
    result = ModelResult(model, baseline, verdict, cases, changes, errors[0] if errors else None)
    result.wall_seconds = sum(part.wall_seconds for part in parts)
    result.runtime = parts[0].runtime if parts else None
    result.nodes = sorted({node for part in parts for node in part.nodes})
    return result


def assemble(
    items: Iterable[WorkItem], results: Mapping[str, ModelResult], suite: str | None
) -> RegressReport:
    """The suite's report: one result per model x runtime, in the order of ``items``."""
    groups: dict[tuple[str, str], list[WorkItem]] = {}
    for item in items:
        groups.setdefault((item.entry, item.runtime), []).append(item)
    models = []
    for group in groups.values():
        first = group[0]
        parts = [results[item.key] for item in group if item.key in results]
        if len(parts) < len(group):
            missing = ", ".join(item.runner for item in group if item.key not in results)
            error = f"not run: {missing}"
            parts.append(ModelResult(first.model, first.baseline, "error", error=error))
        models.append(_merged(first.model, first.baseline, parts))
    return RegressReport(models, suite=suite)
