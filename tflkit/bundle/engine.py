"""The LiteRT-LM engine's runs from the bundle commands' side: tflkit's prompts, a run on one
backend (:func:`run_engine`: the runner :class:`tflkit.delegates.litert_lm.LiteRtLmRunner`), its
records and figures, and what the engine itself said when it aborted or refused.

The engine logs through absl to native stderr: ``F...`` lines are fatal (the process aborts),
``E...`` lines errors (a refused call surfaces in Python only as "litert_lm_session_run_decode
failed"; the reason is in the line). :func:`engine_line` picks the one a user needs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tflkit.delegates.base import RunResult
from tflkit.jsonable import plain

__all__ = ["DEFAULT_PROMPTS", "engine_available", "engine_line", "figures", "how", "records",
           "run_engine", "run_json"]  # fmt: skip

#: tflkit's own prompts (plain words every tokenizer of the corpus knows; a bundle's prompt
#: template is not applied, so the same tokens reach both backends).
DEFAULT_PROMPTS = ("the weather today is", "once upon a time there was", "the quick brown fox")
_FATAL = re.compile(r"^F\d{4} [^\]]*\] (.*)$", re.M)
_ERROR = re.compile(r"^E\d{4} [^\]]*\] (.*)$", re.M)
_CHECK = re.compile(r"(Check failed: .*)$", re.M)
_PY_ERROR = re.compile(r"^(\w+Error: .*)$", re.M)
_WHOLE = "Hint fully delegated to single delegate is set, but the graph is not fully delegated"


#: How each status of an engine run reads in a report.
_WORDS = {"crashed": "aborted", "compile_error": "refused", "run_error": "refused",
          "timeout": "timed out", "unavailable": "unavailable"}  # fmt: skip


def how(result: RunResult) -> str:
    """``ok``, ``aborted`` (the engine killed its process), ``refused`` or ``timed out``."""
    return _WORDS.get(result.status, result.status)


def records(result: RunResult) -> list[dict[str, Any]]:
    """Per prompt of an engine run: ``prompt``, ``prompt_ids``, ``text``, ``ids``, ``scores``
    and ``scored`` (the given text's scores, or None) as plain values; NaN and -inf kept."""
    out = []
    for o in result.outputs:
        scored = o.get("scored")
        out.append({
            "prompt": str(o["prompt"]),
            "prompt_ids": [int(t) for t in o["prompt_ids"]],
            "text": str(o["text"]),
            "ids": [int(t) for t in o["ids"]],
            "scores": [float(v) for v in o["scores"]],
            "scored": None if scored is None else [float(v) for v in scored],
        })  # fmt: skip
    return out


def figures(result: RunResult) -> dict[str, float]:
    """The engine's own figures of a run (init, time to first token, tokens/s)."""
    return dict(result.executed.get("figures") or {})


def run_json(result: RunResult) -> dict[str, Any]:
    """An engine run for JSON: the runner protocol's summary, the engine's figures and every
    prompt's continuation and scores."""
    return plain({**result.to_json(), "how": how(result), "figures": figures(result),
                  "prompts": records(result)})  # fmt: skip


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
) -> RunResult:
    """``prompts`` through the engine on ``backend`` (``cpu``/``gpu``): the runner of the
    registry's engine spec for that backend and activation, driven by ``execute``; ``score``
    gives per prompt index the text to score after it."""
    from tflkit.delegates.base import execute
    from tflkit.delegates.litert_lm import LiteRtLmRunner, engine_feed

    name = f"litert-lm-{backend}" + (f"-{activation}" if activation else "")
    runner = LiteRtLmRunner(
        bundle, backend=backend, activation=activation, max_output_tokens=max_output_tokens,
        timeout=timeout, name=name,
    )  # fmt: skip
    texts = score or {}
    feeds = [engine_feed(p, (texts.get(i) or [None])[0]) for i, p in enumerate(prompts)]
    return execute(runner, feeds)
