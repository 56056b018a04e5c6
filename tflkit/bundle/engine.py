"""The LiteRT-LM engine as a runner: a bundle's prompts generated greedily (and texts scored) on
CPU or GPU, in a child process (the engine aborts its process on some bundles: measured), with
what the engine itself said when it aborted or refused.

The engine logs through absl to native stderr: ``F...`` lines are fatal (the process aborts),
``E...`` lines errors (a refused call surfaces in Python only as "litert_lm_session_run_decode
failed"; the reason is in the line). :func:`engine_line` picks the one a user needs.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tflkit.jsonable import plain

__all__ = ["DEFAULT_PROMPTS", "EngineRun", "engine_available", "engine_line", "run_engine"]

#: tflkit's own prompts (plain words every tokenizer of the corpus knows; a bundle's prompt
#: template is not applied, so the same tokens reach both backends).
DEFAULT_PROMPTS = ("the weather today is", "once upon a time there was", "the quick brown fox")
_FATAL = re.compile(r"^F\d{4} [^\]]*\] (.*)$", re.M)
_ERROR = re.compile(r"^E\d{4} [^\]]*\] (.*)$", re.M)
_CHECK = re.compile(r"(Check failed: .*)$", re.M)
_PY_ERROR = re.compile(r"^(\w+Error: .*)$", re.M)
_WHOLE = "Hint fully delegated to single delegate is set, but the graph is not fully delegated"


@dataclass
class EngineRun:
    """One engine run on one backend: how it ended and what it produced."""

    backend: str
    activation: str | None
    status: str  # ok | aborted | refused | timed out
    message: str | None = None
    stage: str = ""
    init_seconds: float | None = None
    seconds: float = 0.0
    prompts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.backend}-{self.activation}" if self.activation else self.backend

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def figures(self) -> dict[str, float]:
        """The engine's own figures, averaged over the prompts (init once)."""
        runs = [p["benchmark"] for p in self.prompts if p.get("benchmark")]
        if not runs:
            return {}
        keys = (
            "time_to_first_token_in_second",
            "last_prefill_tokens_per_second",
            "last_decode_tokens_per_second",
        )
        out = {k: sum(r.get(k, 0.0) for r in runs) / len(runs) for k in keys}
        out["init_time_in_second"] = runs[0].get("init_time_in_second", 0.0)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "activation": self.activation,
            "status": self.status,
            "message": self.message,
            "stage": self.stage,
            "init_seconds": self.init_seconds,
            "seconds": round(self.seconds, 3),
            "figures": {k: round(v, 4) for k, v in self.figures().items()},
            "prompts": plain(self.prompts),
        }


def engine_available() -> str | None:
    """None when ``litert-lm-api`` is installed, else why not."""
    import importlib.util

    if importlib.util.find_spec("litert_lm") is None:
        return "the LiteRT-LM engine needs litert_lm: pip install 'tflkit[llm]'"
    return None


def _rejected(output: str) -> str | None:
    """The accelerator's list of ops it will not take, as one clause."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if "Following operations are not supported by GPU delegate" in line:
            ops = [x.strip() for x in lines[i + 1 : i + 6] if re.match(r"^[A-Z_0-9]+: ", x)]
            if ops:
                whole = "; the engine needs the whole graph on the GPU" if _WHOLE in output else ""
                return f"not supported on the GPU: {' '.join(ops)}{whole}"
    return None


def engine_line(output: str) -> str | None:
    """The line of the engine's log that says why it stopped: a fatal line, a failed check,
    else its last error line with the innermost cause of its error chain (the ``└`` lines) and
    the ops the GPU accelerator rejected, else a Python error."""
    for pattern in (_FATAL, _CHECK):
        found = pattern.findall(output)
        if found:
            return found[0].strip()
    errors = [m for m in _ERROR.finditer(output) if "NPU" not in m.group(1)]
    if errors:
        last = errors[-1]
        text = re.sub(r"\s*ERROR: \[[^\]]*\]\s*$", "", last.group(1).strip())
        chain = [
            x.lstrip("└ ").strip()
            for x in output[last.end() :].splitlines()[1:]
            if x.startswith("└")
        ]
        causes = [c for c in chain if not c.startswith("ERROR: [")]
        if causes:
            text = f"{text} {causes[-1]}".strip()
        rejected = _rejected(output)
        return f"{text} ({rejected})" if rejected else text
    found = _PY_ERROR.findall(output)
    return found[-1].strip() if found else None


def run_engine(
    bundle: str | Path,
    backend: str,
    prompts: list[str],
    *,
    activation: str | None = None,
    score: dict[int, list[str]] | None = None,
    max_output_tokens: int | None = 16,
    timeout: float = 900,
) -> EngineRun:
    """``prompts`` through the engine on ``backend`` (``cpu``/``gpu``) in a child process."""
    from tflkit.converters.base import require_module
    from tflkit.proc.result_file import read_result
    from tflkit.proc.worker import run_worker

    require_module("litert_lm", "llm", "the LiteRT-LM engine")
    with tempfile.TemporaryDirectory(prefix="tflkit-engine-") as tmp:
        plan = {
            "bundle": str(Path(bundle).resolve()),
            "backend": backend,
            "activation": activation,
            "prompts": list(prompts),
            "max_output_tokens": max_output_tokens,
            "score": {str(k): v for k, v in (score or {}).items()},
        }
        (Path(tmp) / "plan.json").write_text(json.dumps(plan))
        cmd = [sys.executable, "-m", "tflkit.bundle._engine_worker", tmp]
        done = run_worker(cmd, cwd=tmp, timeout=timeout)
        try:
            state = read_result(Path(tmp) / "result.json")
        except (OSError, ValueError):
            state = {"stage": "start", "prompts": []}
    run = EngineRun(backend, activation, "ok", stage=state.get("stage", ""), seconds=done.seconds)
    run.init_seconds = state.get("init_seconds")
    run.prompts = [p for p in state.get("prompts", []) if "scores" in p]
    if done.timed_out:
        run.status, run.message = "timed out", f"no answer after {timeout:.0f} s"
    elif done.returncode != 0 or run.stage != "done":
        signalled = done.returncode is not None and done.returncode < 0
        run.status = "aborted" if signalled else "refused"
        run.message = engine_line(done.output) or f"{done.how}: {done.last_line}"
    return run
