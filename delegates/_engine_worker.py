"""Child process: a ``.litertlm`` bundle in the LiteRT-LM engine (``litert-lm-api``) on one
backend.

``main([FOLDER])`` (started by :class:`~tflkit.delegates.litert_lm.LiteRtLmRunner` through
:func:`tflkit.proc.worker.spawn_python`): reads ``FOLDER/plan.json`` (``bundle``,
``backend`` ``cpu``/``gpu``, ``activation`` ``fp16``/``fp32``/null, ``prompts``,
``max_output_tokens``, ``cache_dir`` (where the engine may cache), ``cpus`` (the CPUs to run
on, or null for all), ``score``: per prompt a list of texts to score after that prompt, or null,
``context``: the bundle's context length in tokens, or null)
and writes ``FOLDER/result.json`` after every stage, so a process the engine aborts still says
how far it got. Per prompt: the prompt's token ids, the greedy continuation (text and ids, the
engine's own tokenizer), the per-token scores of that continuation and of each text to score
(``run_text_scoring``; non-finite ones as JSON's NaN/Infinity), and the engine's benchmark
figures. The engine logs to native stderr; the parent reads it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from tflkit.proc.result_file import write_result


def _engine(plan: dict[str, Any]) -> Any:
    import litert_lm
    from litert_lm import interfaces

    backend = interfaces.Backend.GPU() if plan["backend"] == "gpu" else interfaces.Backend.CPU()
    kwargs: dict[str, Any] = {}
    if plan.get("activation"):
        kind = interfaces.ActivationDataType
        kwargs["activation_data_type"] = (
            kind.FLOAT32 if plan["activation"] == "fp32" else kind.FLOAT16
        )
    if plan.get("cache_dir"):
        kwargs["cache_dir"] = plan["cache_dir"]
    return litert_lm.Engine(plan["bundle"], backend=backend, enable_benchmark=True, **kwargs)


def _session(engine: Any, plan: dict[str, Any], max_output_tokens: int | None = None) -> Any:
    from litert_lm import interfaces

    return engine.create_session(
        apply_prompt_template=False,
        sampler_config=interfaces.SamplerConfig(top_k=1),
        max_output_tokens=max_output_tokens or plan.get("max_output_tokens"),
    )


def continuation_tokens(plan: dict[str, Any], prompt_ids: list[int]) -> int | None:
    """Tokens to decode after a prompt: ``max_output_tokens``, no more than the context leaves
    after the prompt and its start token (None: the engine's default)."""
    wanted, context = plan.get("max_output_tokens"), plan.get("context")
    if context is None:
        return wanted
    room = max(1, int(context) - len(prompt_ids) - 2)
    return room if wanted is None else min(int(wanted), room)


def fit_text(engine: Any, text: str, context: int | None) -> tuple[str, int | None]:
    """``text`` cut to fewer tokens than ``context``, and how many it had when cut (None when
    it fits). The engine refuses to score a text of ``context`` tokens or more ("Input token ids
    are too long ... 48 >= 48"; measured on a 32-token bundle: 31 scored, 32 refused, whatever
    the prompt's length), and a continuation's text may take more tokens than were decoded
    (``<unk>`` tokens decode to the five characters, which tokenize to more)."""
    ids = list(engine.tokenize(text))
    if context is None or len(ids) < context:
        return text, None
    keep = context - 1
    for _ in range(8):  # detokenized ids may tokenize to more again
        cut = engine.detokenize(ids[:keep]) if keep > 0 else ""
        over = len(engine.tokenize(cut)) - (context - 1)
        if over <= 0:
            return cut, len(ids)
        keep -= over
    return "", len(ids)


def _score(engine: Any, plan: dict[str, Any], prompt: str, text: str) -> list[float]:
    session = _session(engine, plan)
    session.run_prefill([prompt])
    scored = session.run_text_scoring([text], store_token_lengths=True)
    session.close()
    return [float(v) for v in (scored.token_scores or [[]])[0]]  # NaN and -inf kept


def _prompt(engine: Any, plan: dict[str, Any], index: int, state: dict[str, Any], result: Path):
    prompt = plan["prompts"][index]
    record: dict[str, Any] = {"prompt": prompt, "prompt_ids": list(engine.tokenize(prompt))}
    # what the ids read back as: words the tokenizer does not know come back as <unk> / ⁇
    record["prompt_back"] = str(engine.detokenize(record["prompt_ids"]))
    state["prompts"].append(record)
    state["stage"] = f"prefill and decode prompt {index}"
    write_result(result, state)
    session = _session(engine, plan, continuation_tokens(plan, record["prompt_ids"]))
    start = time.perf_counter()
    session.run_prefill([prompt])
    text = session.run_decode().texts[0]
    record["seconds"] = round(time.perf_counter() - start, 4)
    info = session.get_benchmark_info()
    record["benchmark"] = {
        name: round(float(getattr(info, name)), 6)
        for name in dir(info)
        if not name.startswith("_") and isinstance(getattr(info, name), int | float)
    }
    session.close()
    record["text"], record["ids"] = text, list(engine.tokenize(text))
    state["stage"] = f"score prompt {index}"
    write_result(result, state)
    context = plan.get("context")
    own, cut = fit_text(engine, text, context)
    if cut is not None:
        record["scored_cut"] = {"tokens": cut, "context": context}
    record["scores"] = _score(engine, plan, prompt, own)
    record["scored"] = []
    for target in (plan.get("score") or {}).get(str(index)) or []:
        fitted, cut = fit_text(engine, target, context)
        entry: dict[str, Any] = {"text": fitted, "scores": _score(engine, plan, prompt, fitted)}
        if cut is not None:
            entry["cut_from_tokens"] = cut
        record["scored"].append(entry)
    write_result(result, state)


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    plan = json.loads((folder / "plan.json").read_text())
    if plan.get("cpus"):
        os.sched_setaffinity(0, plan["cpus"])  # before the engine starts its threads
    result = folder / "result.json"
    state: dict[str, Any] = {"stage": "init", "prompts": []}
    write_result(result, state)
    start = time.perf_counter()
    engine = _engine(plan)
    state["init_seconds"] = round(time.perf_counter() - start, 4)
    for index in range(len(plan["prompts"])):
        _prompt(engine, plan, index, state, result)
    state["stage"] = "done"
    write_result(result, state)
    engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
