"""PyTorch ground truth for the LLM corpus: the logits of the very torch model that
``tests/corpus/llm_build.py`` exports (same architecture, same seed-0 random weights), run eagerly
through the same prefill + decode steps as ``tflkit validate --steps``.

``python tests/corpus/llm_torch_reference.py ARCH PLAN.json OUT.npz`` (ARCH: an architecture or
a variant of ``llm_build.VARIANTS``): run by the builder
environment's interpreter (torch 2.13, litert-torch 0.10; ``llm_build.ensure_env``), never in the
test process. The plan holds the prompt (``prefill_len`` token ids), the number of decode steps
and the token fed to each step after the first (teacher forcing, as ``validate --steps`` feeds
every runner the CPU's greedy tokens). Writes ``step_K`` (the logits of decode step K) to OUT.

From the test process: :func:`reference_logits` (builds the environment if needed).
``python -m tests.corpus.llm_torch_reference [--arch gemma] [--steps 4]`` prints, per arch, the
max abs per step of the ``.tflite`` graph's logits on the CPU against PyTorch (:func:`compare`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["compare", "reference_logits", "rewritten"]


def reference_logits(
    arch: str, prompt: Sequence[int], steps: int, forced: Sequence[int] = (), timeout: int = 600
) -> list:
    """The torch model's logits (numpy, one per decode step) for ``prompt`` (its last token is
    decode step 0's; the prefill gets the rest and a padding slot), step k+1 fed ``forced[k]``
    (default: torch's own greedy token)."""
    import numpy as np

    from tests.conftest_corpus import REPO, cache_root
    from tests.corpus import llm_build

    python = llm_build.ensure_env(cache_root() / "llm")
    with tempfile.TemporaryDirectory(prefix="tflkit-torch-ref-") as tmp:
        plan = Path(tmp) / "plan.json"
        out = Path(tmp) / "logits.npz"
        plan.write_text(
            json.dumps({"prompt": [int(t) for t in prompt], "steps": steps, "forced": list(forced)})
        )
        script = REPO / "tests/corpus/llm_torch_reference.py"
        done = subprocess.run(
            [str(python), str(script), arch, str(plan), str(out)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        )
        if done.returncode != 0:
            raise RuntimeError(f"the torch reference failed:\n{done.stderr[-3000:]}")
        with np.load(out) as npz:
            return [np.array(npz[f"step_{k}"]) for k in range(steps)]


# ---------------------------------------------------------------- inside the builder env only


def _run(arch: str, plan: dict) -> dict:
    """Prefill + decode steps on the eager torch model, as ``tflkit.validation.steps.run_steps``
    drives the ``.tflite`` signatures; the logits of every decode step by ``step_K``."""
    import llm_build  # the builder script next to this one (sys.path set by main)
    import torch
    from litert_torch.generative.layers import kv_cache as kv_utils

    # a variant (llm_build.VARIANTS): its architecture's model, the transposed KV layout, the
    # causal mask passed in, the prompt through decode token by token when it has no prefill
    base, prefills, cache_len = llm_build.VARIANTS.get(arch, (arch, [1], llm_build.KV_CACHE_LEN))
    layout = kv_utils.KV_LAYOUT_TRANSPOSED if arch in llm_build.VARIANTS else None
    model, config = llm_build._model(base)
    prompt = [int(t) for t in plan["prompt"]]
    p = len(prompt)
    kv = kv_utils.KVCache.from_model_config(
        cache_len, config, kv_layout=layout or kv_utils.KV_LAYOUT_DEFAULT
    )

    def mask(positions):
        if layout is None:
            return None
        cols = torch.arange(cache_len)[None, :] <= torch.tensor(positions)[:, None]
        return torch.where(cols, 0.0, config.causal_mask_value)[None, None]

    with torch.no_grad():
        if prefills:
            tokens = torch.tensor([[*prompt[:-1], 0]], dtype=torch.int)
            kv = model(tokens, torch.arange(p, dtype=torch.int), kv, mask(range(p)))["kv_cache"]
        for i in range(p - 1 if not prefills else 0):
            one = torch.tensor([[prompt[i]]], dtype=torch.int)
            kv = model(one, torch.tensor([i], dtype=torch.int), kv, mask([i]))["kv_cache"]
        token, out = prompt[-1], {}
        for k in range(int(plan["steps"])):
            pos = torch.tensor([p - 1 + k], dtype=torch.int)
            result = model(torch.tensor([[token]], dtype=torch.int), pos, kv, mask([p - 1 + k]))
            kv = result["kv_cache"]
            logits = result["logits"].reshape(-1).float().numpy()
            out[f"step_{k}"] = logits
            forced = plan.get("forced") or []
            token = int(forced[k]) if k < len(forced) else int(logits.argmax())
    return out


def _builder_main(argv: list[str]) -> int:
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    arch, plan, out = argv
    np.savez(out, **_run(arch, json.loads(Path(plan).read_text())))
    return 0


def rewritten(data: bytes) -> bytes:
    """``data`` as ``tflkit rewrite`` writes it by default (gemma: its attention repaired by
    ``attention_key_transpose``, the composites inlined, ...); raises RuntimeError when the
    rewrite's proof fails."""
    from tflkit.rewriter.run import rewrite_model

    outcome = rewrite_model(data)
    verdict = outcome.verification
    if verdict is None or not verdict.ok:
        raise RuntimeError(f"tflkit rewrite: {verdict.problem if verdict else 'nothing fired'}")
    return outcome.rewritten


def compare(arch: str, steps: int) -> dict:
    """Max abs per decode step of the ``.tflite`` graph's logits on the CPU against PyTorch:
    XNNPACK (``cpu``) and the reference kernels (``cpu-ref``) as exported, XNNPACK with the
    composites inlined; ``tflkit rewrite``'s default result (:func:`rewritten`) on both; for
    gemma also the reference kernels with its attention repaired alone (``repair_attention``)."""
    import numpy as np

    from tests.corpus.llm_steps import corpus_dir
    from tflkit import ir
    from tflkit.rewriter.rules.attention import repair_attention
    from tflkit.rewriter.rules.composite import inline_all
    from tflkit.validation.steps import cpu_call, kv_program, prompt_tokens, run_steps

    data = (corpus_dir() / f"{arch}.tflite").read_bytes()
    program = kv_program(ir.load(data))
    prompt = prompt_tokens(program)
    cpu, tokens = run_steps(cpu_call(data), program, prompt, steps)
    truth = reference_logits(arch, prompt, steps, tokens)
    inlined, fixed = ir.load(data), ir.load(data)
    inline_all(inlined)
    variants = {"cpu-ref": (data, "reference"), "cpu (inlined)": (ir.dumps(inlined), "xnnpack")}
    fixed_all = rewritten(data)
    variants["cpu (tflkit rewrite)"] = (fixed_all, "xnnpack")
    variants["cpu-ref (tflkit rewrite)"] = (fixed_all, "reference")
    if repair_attention(fixed):
        variants["cpu-ref (RESHAPE made TRANSPOSE)"] = (ir.dumps(fixed), "reference")
    rows = {"cpu": cpu}
    for name, (model, kernels) in variants.items():
        rows[name] = run_steps(cpu_call(model, kernels), program, prompt, steps, tokens)[0]
    out = {
        k: [float(np.abs(a - b).max()) for a, b in zip(v, truth, strict=True)]
        for k, v in rows.items()
    }
    out["torch |logits| max"] = [float(np.abs(t).max()) for t in truth]
    out["torch greedy == cpu greedy"] = [int(t.argmax()) for t in truth] == tokens
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", action="append")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    from tests.corpus import llm_build

    for arch in args.arch or llm_build.ARCHS:
        print(arch, json.dumps(compare(arch, args.steps)), flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and not sys.argv[1].startswith("-"):
        sys.exit(_builder_main(sys.argv[1:]))
    sys.exit(main())
