"""Build tiny decoder-only LLM ``.tflite`` graphs the way users make them: litert-torch 0.10's
generative API (``litert_torch.generative``), its own example architectures shrunk to a tiny
configuration with random weights, exported by its own converter
(``utilities.converter.convert_to_tflite``) with a ``prefill_8`` and a ``decode`` signature and
an external KV cache (``kv_cache_k_0`` / ``kv_cache_v_0`` ... in and out).

``python tests/corpus/llm_build.py OUTDIR``: run by the interpreter of an environment with
torch 2.13, litert-torch 0.10 and tensorflow-cpu (``litert_torch.generative`` imports
TensorFlow), never in the test process; :func:`ensure_env` builds that environment. Writes
``OUTDIR/<arch>.tflite`` and ``OUTDIR/MANIFEST.json`` (architecture, configuration, sizes).

Architectures (each from the example module litert-torch ships, its block structure kept):

- ``gemma``: Gemma 1 (zero-centred RMS norm, GELU-tanh gated MLP, multi-query attention,
  embedding scale);
- ``tinyllama``: TinyLlama (RMS norm, SiLU gated MLP, grouped-query attention, separate LM head);
- ``qwen``: Qwen 2.5 (RMS norm, QKV bias, SiLU gated MLP, grouped-query attention);
- ``phi2``: Phi-2 (layer norm, parallel residual, partial rotary, biases everywhere).

Variants (:data:`VARIANTS`): one of those models, same weights, exported with another
``ExportConfig`` the way some apps export it: the attention mask as an input
(``mask_as_input=True``: ``mask [1, 1, T, cache]`` float32, 0 or the model's
``causal_mask_value``) and the transposed KV layout (``kvcache_layout=KV_LAYOUT_TRANSPOSED``: K
``[1, kv_heads, cache, head_dim]`` (BNTH), V ``[1, kv_heads, head_dim, cache]`` (BNHT)), with a
prefill signature or none at all (``prefill_seq_len=[]``: the app runs the prompt through
``decode`` one token at a time). Recorded in ``MANIFEST.json`` under their architecture's
``variants``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

#: The builder environment's pins (torch's CPU wheel; an unpinned torch pulls CUDA). The
#: ``.litertlm`` bundles (``llm_bundle_build.py``) pack with litert-torch's ``litert-lm-builder``
#: and train their tokenizers with ``sentencepiece`` and ``tokenizers``, which litert-torch
#: requires unpinned (``>=0.18.0``): pinned here so a bundle builds the same on every machine.
PACKAGES = (
    "torch==2.13.0",
    "litert-torch==0.10.0",
    "tensorflow-cpu==2.21.0",
    "litert-lm-builder==0.18.1",
    "sentencepiece==0.2.3",
    "tokenizers==0.23.3",
)
ARCHS = ("gemma", "tinyllama", "qwen", "phi2")
PREFILL_LEN = 8
KV_CACHE_LEN = 32
VOCAB = 256
SEED = 0
#: name -> (architecture, prefill lengths, KV cache length); every variant has the mask as an
#: input and the transposed KV layout. The decode-only one's cache (12) is shorter than the head
#: (16): the case where the longest cache axis is not the sequence.
VARIANTS = {
    "tinyllama_mask_tkv": ("tinyllama", [PREFILL_LEN], KV_CACHE_LEN),
    "tinyllama_decode_only": ("tinyllama", [], 12),
}


def env_key() -> str:
    """The name of the builder environment, keyed by its pins and the Python version."""
    pins = "\0".join(PACKAGES) + f"\0py{sys.version_info[0]}.{sys.version_info[1]}"
    return "llm-env-" + hashlib.sha256(pins.encode()).hexdigest()[:10]


def ensure_env(root: Path, base_python: str = sys.executable, timeout_s: int = 1800) -> Path:
    """The builder environment's interpreter under ``root``, made once with ``venv`` + ``pip``
    (marker file ``READY``); raises ``RuntimeError`` with the end of pip's log if pip fails."""
    env = root / env_key()
    python = env / "bin" / "python"
    if (env / "READY").is_file():
        return python
    from tflkit.fsio import exclusive_lock  # the builder env runs this file without tflkit

    log = root / f"{env.name}.log"
    with exclusive_lock(root / f"{env.name}.lock"):  # one builder at a time (xdist workers)
        if (env / "READY").is_file():
            return python
        with open(log, "w") as out:
            for cmd in (
                [base_python, "-m", "venv", "--clear", str(env)],
                [str(python), "-m", "pip", "install", "--disable-pip-version-check", *PACKAGES],
            ):
                out.write("$ " + " ".join(cmd) + "\n")
                out.flush()
                done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s)
                if done.returncode != 0:
                    raise RuntimeError(f"{cmd[2]} failed: {log.read_text()[-2000:]}")
        (env / "READY").write_text("\n".join(PACKAGES) + "\n")
    return python


def source_key() -> str:
    """A hash of this script: the corpus is rebuilt when it changes."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


# ---------------------------------------------------------------- inside the builder env only


def _shrink(config, *, heads: int, groups: int, head_dim: int = 16, ff: int = 128):
    """``config`` (a litert-torch ``ModelConfig``) at a tiny size, its structure kept."""
    config.vocab_size = VOCAB
    config.num_layers = 2
    config.max_seq_len = 64
    config.embedding_dim = heads * head_dim
    if config.embedding_scale is not None:
        config.embedding_scale = config.embedding_dim**0.5
    block = config.block_config(0)
    block.attn_config.num_heads = heads
    block.attn_config.head_dim = head_dim
    block.attn_config.num_query_groups = groups
    block.ff_config.intermediate_size = ff
    return config


def _model(arch: str):
    import torch

    if arch == "gemma":
        from litert_torch.generative.examples.gemma import gemma1 as mod

        config, cls = _shrink(mod.get_model_config_2b(), heads=4, groups=1), mod.Gemma1
    elif arch == "tinyllama":
        from litert_torch.generative.examples.tiny_llama import tiny_llama as mod

        config, cls = _shrink(mod.get_model_config(), heads=4, groups=2), mod.TinyLlama
    elif arch == "qwen":
        from litert_torch.generative.examples.qwen import qwen as mod

        config, cls = _shrink(mod.get_3b_model_config(), heads=4, groups=2), mod.Qwen
    elif arch == "phi2":
        from litert_torch.generative.examples.phi import phi2 as mod

        config, cls = _shrink(mod.get_model_config(), heads=4, groups=4), mod.Phi2
    else:
        raise ValueError(arch)
    torch.manual_seed(SEED)
    model = cls(config, mask_cache_size=KV_CACHE_LEN).eval()
    with torch.no_grad():
        # random weights at a realistic spread (norm scales near 1 but not all equal)
        for name, param in model.named_parameters():
            if param.dim() == 1:
                param.copy_(torch.randn_like(param) * 0.1 + (0.0 if "bias" in name else 1.0))
            else:
                param.copy_(torch.randn_like(param) * 0.05)
    return model, config


def _entry(model, config, target: Path) -> dict:
    block = config.block_config(0)
    return {
        "file": target.name,
        "bytes": target.stat().st_size,
        "params": sum(p.numel() for p in model.parameters()),
        "layers": config.num_layers,
        "embedding_dim": config.embedding_dim,
        "heads": block.attn_config.num_heads,
        "kv_heads": block.attn_config.num_query_groups,
        "head_dim": block.attn_config.head_dim,
        "ff": block.ff_config.intermediate_size,
        "vocab": config.vocab_size,
    }


def _export(
    model: Any, config: Any, target: Path, prefill: Any, cache_len: int, layout: Any
) -> Path:
    """``model`` exported by litert-torch's own converter to ``target`` (fp32 weights)."""
    from litert_torch.generative.utilities import converter

    written = converter.convert_to_tflite(
        model,
        output_path=str(target.parent),
        output_name_prefix=target.stem,
        prefill_seq_len=prefill,
        kv_cache_max_len=cache_len,
        quantize="none",
        config=config,
        export_config=layout,
    )
    os.replace(written, target)
    return target


def _build_variant(name: str, outdir: Path) -> dict:
    """Export variant ``name`` (:data:`VARIANTS`): mask as input, transposed KV layout."""
    from litert_torch.generative.layers import kv_cache
    from litert_torch.generative.utilities import export_config

    arch, prefill_lens, cache_len = VARIANTS[name]
    model, config = _model(arch)
    layout = export_config.ExportConfig(
        mask_as_input=True, kvcache_layout=kv_cache.KV_LAYOUT_TRANSPOSED
    )
    target = _export(model, config, outdir / f"{name}.tflite", prefill_lens, cache_len, layout)
    return {
        **_entry(model, config, target),
        "from": arch,
        "prefill_lens": prefill_lens,
        "kv_cache_len": cache_len,
        "export_config": {"mask_as_input": True, "kvcache_layout": "KV_LAYOUT_TRANSPOSED"},
        "mask": "mask [1, 1, T, kv_cache_len] float32 (T = 1 in decode)",
        "k_cache": "BNTH [1, kv_heads, kv_cache_len, head_dim]",
        "v_cache": "BNHT [1, kv_heads, head_dim, kv_cache_len]",
        "causal_mask_value": str(config.causal_mask_value),
    }


def build(outdir: Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from litert_torch.generative.utilities import export_config

    default = export_config.ExportConfig()
    outdir.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for arch in ARCHS:
        model, config = _model(arch)
        target = _export(
            model, config, outdir / f"{arch}.tflite", PREFILL_LEN, KV_CACHE_LEN, default
        )
        manifest[arch] = {
            **_entry(model, config, target),
            "prefill_len": PREFILL_LEN,
            "kv_cache_len": KV_CACHE_LEN,
            "norm": config.block_config(0).pre_attention_norm_config.type.name,
        }
        print(f"{arch}: {target.stat().st_size} bytes", flush=True)
    for name, (arch, _, _) in VARIANTS.items():
        manifest[arch].setdefault("variants", {})[name] = _build_variant(name, outdir)
        print(f"{name}: {(outdir / f'{name}.tflite').stat().st_size} bytes", flush=True)
    (outdir / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    build(Path(sys.argv[1]))
