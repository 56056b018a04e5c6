"""A suite's results file: every finished item's result under its key, rewritten atomically
after each one, so an interrupted or sharded run keeps what finished.

JSON lines: a header (schema, suite, mode, shard, every item of the whole suite in suite order),
then one line per finished item (``{"key", "result", "retry"}``). A re-run with the same file
reuses each result whose key is still among its items (resume) and reruns the rest; a result of
a worker that died without one (``retry``) is rerun too. ``regress merge`` reads the files of
the N shards and assembles the report an unsharded run gives.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tflkit.errors import UsageError
from tflkit.fsio import write_atomic
from tflkit.jsonable import dumps
from tflkit.regress.items import WorkItem, assemble
from tflkit.report.regress_report import ModelResult, RegressReport

__all__ = ["RESULTS_SCHEMA", "Journal", "merge_results"]

RESULTS_SCHEMA = "tflkit.suite-results/1"


@dataclass
class Journal:
    """The results file of one run (or shard) of a suite; thread-safe :meth:`add`."""

    path: Path
    suite: str
    mode: str
    items: list[WorkItem]
    shard: tuple[int, int] | None = None
    results: dict[str, ModelResult] = field(default_factory=dict)
    retry: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(
        cls,
        path: Path,
        suite: str,
        mode: str,
        items: Sequence[WorkItem],
        shard: tuple[int, int] | None,
        *,
        fresh: bool = False,
    ) -> Journal:
        """The journal at ``path``, with the results of an earlier run of these items kept
        (unless ``fresh``); a file that is not a results file is a usage error."""
        journal = cls(path, suite, mode, list(items), shard)
        if path.exists() and not fresh:
            _, results, retry = _read(path)
            keys = {item.key for item in items}
            journal.results = {k: r for k, r in results.items() if k in keys and k not in retry}
        return journal

    def finished(self, item: WorkItem) -> bool:
        return item.key in self.results

    def add(self, item: WorkItem, result: ModelResult, *, retry: bool = False) -> None:
        """Keep ``result`` and rewrite the file; ``retry``: a re-run runs the item again."""
        with self._lock:
            self.results[item.key] = result
            (self.retry.add if retry else self.retry.discard)(item.key)
            self._write()

    def _write(self) -> None:
        header = {
            "schema": RESULTS_SCHEMA,
            "suite": self.suite,
            "mode": self.mode,
            "shard": list(self.shard) if self.shard else None,
            "items": [item.to_json() for item in self.items],
        }
        lines = [dumps(header, indent=None)]
        for key, result in self.results.items():
            record = {"key": key, "retry": key in self.retry, "result": result}
            lines.append(dumps(record, indent=None))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, "\n".join(lines) + "\n")


def _read(path: Path) -> tuple[dict[str, Any], dict[str, ModelResult], set[str]]:
    """(header, results by key, keys to retry) of a results file; one clear line if it is not
    one."""
    try:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path} is not a suite results file: {exc}") from None
    if not lines or not isinstance(lines[0], dict) or lines[0].get("schema") != RESULTS_SCHEMA:
        raise UsageError(f"{path} is not a suite results file (no {RESULTS_SCHEMA} header)")
    results = {rec["key"]: ModelResult.from_json(rec["result"]) for rec in lines[1:]}
    retry = {rec["key"] for rec in lines[1:] if rec.get("retry")}
    return lines[0], results, retry


def merge_results(paths: Sequence[str | os.PathLike[str]]) -> RegressReport:
    """The report of a whole suite from its shards' results files: the same one an unsharded run
    gives. Files of different suites or modes, or shards that leave items out, are usage errors."""
    if not paths:
        raise UsageError("give the results file of every shard")
    headers, results = [], {}
    for path in map(Path, paths):
        header, found, retry = _read(path)
        headers.append((path, header))
        results.update({k: r for k, r in found.items() if k not in retry})
    first_path, first = headers[0]
    for path, header in headers[1:]:
        for key in ("suite", "mode", "items"):
            if header[key] != first[key]:
                raise UsageError(f"{path} and {first_path} are results of different {key}s")
    items = [WorkItem.from_json(data) for data in first["items"]]
    missing = [item for item in items if item.key not in results]
    if missing:
        names = ", ".join(sorted({f"{i.entry} ({i.runner}, {i.runtime})" for i in missing})[:5])
        raise UsageError(
            f"the results files miss {len(missing)} of {len(items)} items (e.g. {names}): "
            "give every shard's file, or rerun the shard that did not finish"
        )
    return assemble(items, results, first["suite"])
