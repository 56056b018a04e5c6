"""The LiteRT-LM engine (``litert-lm-api``) as a runner: a ``.litertlm`` bundle on the engine's CPU
or GPU backend, in a child process (the engine aborts its process on some bundles: measured).

Its input sets are prompts (:func:`engine_feed`: the prompt's text and, optionally, a text to
score after it); for each it returns the greedy continuation's token ids (the engine's own
tokenizer), the engine's score of each of those tokens, and the scores of the given text
(``run_text_scoring``). ``executed`` holds the engine's own figures (init, time to first token,
prefill and decode tokens/s). An abort is status ``crashed``, a refused bundle ``compile_error``
(at init) or ``run_error``, each with the engine's own line from native stderr
(:func:`engine_line`). The engine logs through absl to native stderr: ``F...`` lines are fatal
(the process aborts), ``E...`` lines errors (a refused call surfaces in Python only as
"litert_lm_session_run_decode failed"; the reason is in the line).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .protocol import Feed, RunnerSpec, RunnerUnavailable, RunResult

__all__ = ["LiteRtLmRunner", "engine_feed", "engine_line"]

_FATAL = re.compile(r"^F\d{4} [^\]]*\] (.*)$", re.M)
_ERROR = re.compile(r"^E\d{4} [^\]]*\] (.*)$", re.M)
_CHECK = re.compile(r"(Check failed: .*)$", re.M)
_PY_ERROR = re.compile(r"^(\w+Error: .*)$", re.M)
_WHOLE = "Hint fully delegated to single delegate is set, but the graph is not fully delegated"

_FIGURES = (
    "time_to_first_token_in_second",
    "last_prefill_tokens_per_second",
    "last_decode_tokens_per_second",
)


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


def engine_feed(prompt: str, score: str | None = None) -> dict[str, np.ndarray]:
    """One input set of an engine runner: a prompt and, optionally, a text to score after it."""
    feed = {"prompt": np.array(prompt)}
    if score is not None:
        feed["score"] = np.array(score)
    return feed


def _figures(records: list[dict[str, Any]]) -> dict[str, float]:
    """The engine's figures averaged over the prompts (init: the first's)."""
    runs = [p["benchmark"] for p in records if p.get("benchmark")]
    if not runs:
        return {}
    out = {k: sum(r.get(k, 0.0) for r in runs) / len(runs) for k in _FIGURES}
    out["init_time_in_second"] = runs[0].get("init_time_in_second", 0.0)
    return out


def _output(record: dict[str, Any]) -> dict[str, np.ndarray]:
    out = {
        "prompt": np.array(record["prompt"]),
        "prompt_ids": np.asarray(record["prompt_ids"], np.int64),
        "prompt_back": np.array(record.get("prompt_back", record["prompt"])),
        "text": np.array(record["text"]),
        "ids": np.asarray(record["ids"], np.int64),
        "scores": np.asarray(record["scores"], np.float64),
    }
    if record.get("scored"):
        out["scored"] = np.asarray(record["scored"][0]["scores"], np.float64)
        cut = record["scored"][0].get("cut_from_tokens")
        if cut is not None:  # the text to score was cut to the context (tokens it had)
            out["scored_cut_from"] = np.asarray(cut, np.int64)
    return out


class LiteRtLmRunner:
    """A bundle on the LiteRT-LM engine as ``spec`` says (a registry spec on device
    ``engine``: its ``engine_backend``; on the GPU, fp32 precision asks for fp32 activations,
    fp16 leaves the engine's default for a text decoder, fp16), greedy, ``max_output_tokens``
    tokens per prompt."""

    def __init__(
        self,
        bundle: str | Path,
        spec: RunnerSpec,
        *,
        max_output_tokens: int | None = 16,
        timeout: float = 900.0,
        one_cpu: bool | None = None,
        context: int | None = None,
    ) -> None:
        if spec.device != "engine" or spec.engine_backend is None:
            raise ValueError(f"{spec.name} is not a LiteRT-LM engine runner")
        self.bundle = Path(bundle)
        self.spec = spec
        self.name = spec.name
        self.backend = spec.engine_backend
        gpu32 = spec.engine_backend == "gpu" and spec.precision == "fp32"
        self.activation = "fp32" if gpu32 else None
        self.max_output_tokens = max_output_tokens
        self.timeout = timeout
        self.one_cpu = one_cpu
        #: The bundle's context length in tokens: texts to score are cut to fit it.
        self.context = context
        self._cpus: list[int] | None = None

    def activate(self) -> None:
        """The engine starts in the child: only check that it is installed."""
        import importlib.util

        if importlib.util.find_spec("litert_lm") is None:
            raise RunnerUnavailable(
                "the LiteRT-LM engine needs litert_lm: pip install 'tflkit[llm]'"
            )

    def infer(self, feeds: Sequence[Feed]) -> RunResult:
        from tflkit.proc.result_file import read_result
        from tflkit.proc.worker import spawn_python

        from . import _engine_worker

        prompts = [str(f["prompt"]) for f in feeds]
        score = {str(i): [str(f["score"])] for i, f in enumerate(feeds) if "score" in f}
        with tempfile.TemporaryDirectory(prefix="tflkit-engine-") as tmp:
            plan = {
                "bundle": str(self.bundle.resolve()),
                "backend": self.backend,
                "activation": self.activation,
                "prompts": prompts,
                "max_output_tokens": self.max_output_tokens,
                "score": score,
                "context": self.context,
                # the engine caches compiled programs and weights beside the model unless told
                # otherwise, keyed without the activation type: a later fp16 run read an fp32
                # run's cache and computed off by up to 0.59 (measured on a healthy bundle in a
                # cold test run). Each run gets its own, and the user's folder stays untouched.
                "cache_dir": str(Path(tmp) / "engine-cache"),
                "cpus": _engine_cpus(self.backend, self.one_cpu),
            }
            self._cpus = plan["cpus"]
            (Path(tmp) / "engine-cache").mkdir()
            (Path(tmp) / "plan.json").write_text(json.dumps(plan))
            with _one_engine_per_gpu(self.backend):
                done = spawn_python(_engine_worker.main, tmp, cwd=tmp, timeout=self.timeout)
            try:
                state = read_result(Path(tmp) / "result.json")
            except (OSError, ValueError):
                state = {"stage": "start", "prompts": []}
        return self._result(state, done)

    def _result(self, state: dict[str, Any], done: Any) -> RunResult:
        records = [p for p in state.get("prompts", []) if "scores" in p]
        stage = state.get("stage", "")
        executed = {
            "runtime": "LiteRT-LM engine (litert-lm-api)",
            "device": self.backend,
            "activation": self.activation or "the engine's default",
            "stage": stage,
            "cpus": self._cpus,  # None: all the machine's
            "figures": _figures(records),
            "benchmark": [p.get("benchmark", {}) for p in records],
        }
        result = RunResult(self.name, "ok", outputs=[_output(p) for p in records])
        result.executed = executed
        result.compile_seconds = state.get("init_seconds")
        result.infer_seconds = [float(p.get("seconds", 0.0)) for p in records]
        if done.timed_out:
            result.status, result.error = "timeout", f"no answer after {self.timeout:.0f} s"
        elif done.returncode != 0 or stage != "done":
            signalled = done.returncode is not None and done.returncode < 0
            result.status = (
                "crashed" if signalled else "compile_error" if stage == "init" else "run_error"
            )
            result.error = engine_line(done.output) or f"{done.how}: {done.last_line}"
        return result

    def deactivate(self) -> None:
        """Nothing held: the child process is gone."""


def pinned_by_default(backend: str) -> bool:
    """Whether the engine runs on one CPU unless told otherwise: a GPU run on a software GPU.

    On lavapipe, a GPU engine whose threads run on several cores gives different numbers from
    run to run while the machine is busy (a race between the engine's and the driver's
    threads): healthy bundles beside another process's GPU work came out off by up to 0.57 in 14
    of 48 prompt runs; pinned to one core, in 0 of 48 (``PYTHONPATH=. python
    bench/llm_bundles.py --calibrate 8 --busy``, docs/llm.md). A hardware GPU runs unpinned:
    its speed figures stay the engine's own.
    """
    from tflkit.gpu.availability import software_gpu

    return backend == "gpu" and software_gpu()


def _engine_cpus(backend: str, one_cpu: bool | None) -> list[int] | None:
    """The CPUs the engine's process may run on: one when ``one_cpu`` (None:
    :func:`pinned_by_default`), else all (None)."""
    if not hasattr(os, "sched_getaffinity") or one_cpu is False:
        return None
    if one_cpu is None:
        one_cpu = pinned_by_default(backend)
    return [min(os.sched_getaffinity(0))] if one_cpu else None


@contextlib.contextmanager
def _one_engine_per_gpu(backend: str) -> Iterator[None]:
    """Hold the machine-wide GPU engine lock for a GPU run (a no-op on the CPU): two LiteRT-LM
    GPU engines in two processes at once gave each other wrong scores (on the software GPU, a
    healthy bundle 0.074 off beside another engine: the race of :func:`pinned_by_default`)."""
    if backend != "gpu":
        yield
        return
    from tflkit.fsio import exclusive_lock

    lock = Path(tempfile.gettempdir()) / "tflkit-litert-lm-gpu.lock"
    with exclusive_lock(lock, "", lambda _m: None):
        yield
