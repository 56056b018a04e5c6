"""The LiteRT-LM engine's runs from the bundle commands' side: tflkit's prompts, a run on one
backend (:func:`run_engine`: the runner :class:`tflkit.delegates.litert_lm.LiteRtLmRunner`), its
records and figures, and what the engine itself said when it aborted or refused.

The engine's own line when it aborted or refused is read by the runner
(:func:`tflkit.delegates.litert_lm.engine_line`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tflkit.delegates.base import RunnerSpec, RunResult, find_spec
from tflkit.errors import require_extra
from tflkit.jsonable import plain
from tflkit.report.bundle_report import figures, how

__all__ = [
    "DEFAULT_PROMPTS",
    "context_length",
    "engine_spec",
    "figures",
    "how",
    "records",
    "run_engine",
    "run_json",
    "unreadable_prompts",
]  # fmt: skip

#: tflkit's own prompts (plain words every tokenizer of the corpus knows; a bundle's prompt
#: template is not applied, so the same tokens reach both backends).
DEFAULT_PROMPTS = ("the weather today is", "once upon a time there was", "the quick brown fox")


def records(result: RunResult) -> list[dict[str, Any]]:
    """Per prompt of an engine run: ``prompt``, ``prompt_ids``, ``text``, ``ids``, ``scores``
    and ``scored`` (the given text's scores, or None) as plain values; NaN and -inf kept."""
    out = []
    for o in result.outputs:
        scored = o.get("scored")
        out.append({
            "prompt": str(o["prompt"]),
            "prompt_ids": [int(t) for t in o["prompt_ids"]],
            "prompt_back": str(o.get("prompt_back", o["prompt"])),
            "text": str(o["text"]),
            "ids": [int(t) for t in o["ids"]],
            "scores": [float(v) for v in o["scores"]],
            "scored": None if scored is None else [float(v) for v in scored],
        })  # fmt: skip
    return out


def run_json(result: RunResult) -> dict[str, Any]:
    """An engine run for JSON: the runner protocol's summary, the engine's figures and every
    prompt's continuation and scores."""
    return plain({**result.to_json(), "how": how(result), "figures": figures(result),
                  "prompts": records(result)})  # fmt: skip


def engine_spec(backend: str, activation: str | None = None) -> RunnerSpec:
    """The registry's engine runner for ``backend`` (``cpu``/``gpu``) and, on the GPU,
    ``activation`` (None: the engine's default, fp16; ``fp32``)."""
    precision = "fp32" if backend == "cpu" or activation == "fp32" else "fp16"
    return find_spec(device="engine", engine_backend=backend, precision=precision)


def unreadable_prompts(run: RunResult) -> list[str]:
    """One finding per prompt the bundle's own tokenizer does not read: its ids do not read
    back as the prompt (words it does not know come back as ``<unk>`` or ``⁇``; measured: a
    Japanese prompt on the corpus's SentencePiece bundle gives [208, 3, 208, 3], read back
    ' ⁇   ⁇ '), so both backends run on unknown tokens and their agreement says little."""
    out = []
    for record in records(run):
        said, back = " ".join(record["prompt"].split()), " ".join(record["prompt_back"].split())
        if said != back:
            out.append(
                f"prompt {record['prompt']!r} is not text this bundle's tokenizer knows: its ids "
                f"{record['prompt_ids'][:8]} read back as {back!r}; the runs judge unknown "
                "tokens: give --prompt in the tokenizer's language"
            )
    return out


def context_length(bundle: str | Path) -> int | None:
    """The context the engine gives the bundle, in tokens: the decode graph's first K cache's
    axis 2 where LiteRT-LM 0.18 reads it (``bundle/describe.py``), else the metadata's
    ``max_num_tokens``; None when neither says."""
    from tflkit import ir
    from tflkit.bundle.litertlm import load_bundle
    from tflkit.bundle.llm_metadata import decode_llm_metadata

    loaded = load_bundle(bundle)
    for section in loaded.of_kind("TFLiteModel"):
        if section.model_type != "prefill_decode":
            continue
        model = ir.load(loaded.view(section))
        decode = next((s for s in model.signatures if s.key == "decode"), None)
        k0 = decode.inputs.get("kv_cache_k_0") if decode is not None else None
        if k0 is not None and len(k0.shape) == 4 and int(k0.shape[2]) > 0:
            return int(k0.shape[2])
    found = loaded.of_kind("LlmMetadataProto")
    limit = decode_llm_metadata(loaded.view(found[0])).get("max_num_tokens") if found else None
    return int(limit) if limit and int(limit) > 0 else None


def run_engine(
    bundle: str | Path,
    backend: str,
    prompts: list[str],
    *,
    activation: str | None = None,
    score: dict[int, list[str]] | None = None,
    max_output_tokens: int | None = 16,
    timeout: float = 900,
    one_cpu: bool | None = None,
) -> RunResult:
    """``prompts`` through the engine on ``backend``: the registry's runner for it
    (:func:`engine_spec`), driven by ``execute``; ``score`` gives per prompt index the text to
    score after it; ``one_cpu`` pins the engine to one CPU (None: on a software GPU only)."""
    from tflkit.delegates.base import BuildRequest, execute
    from tflkit.delegates.litert_lm import engine_feed
    from tflkit.delegates.registry import build

    require_extra("llm", "the LiteRT-LM engine")
    engine = {
        "max_output_tokens": max_output_tokens,
        "one_cpu": one_cpu,
        "context": context_length(bundle),
    }
    runner = build(
        engine_spec(backend, activation), BuildRequest(bundle, timeout=timeout, engine=engine)
    )
    texts = score or {}
    feeds = [engine_feed(p, (texts.get(i) or [None])[0]) for i, p in enumerate(prompts)]
    return execute(runner, feeds)
