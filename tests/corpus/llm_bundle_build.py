"""Build tiny ``.litertlm`` bundles the way users make them: litert-torch 0.10's
``utilities.converter.convert_to_litert(..., output_format="litertlm")`` (which packs with
``litert-lm-builder``, a dependency of litert-torch) from the LLM corpus's tinyllama architecture
(``llm_build._model``: litert-torch's own example, shrunk, random weights, seed 0).

``python tests/corpus/llm_bundle_build.py OUTDIR``: run by the interpreter of the LLM builder
environment (``llm_build.ensure_env``: torch 2.13, litert-torch 0.10, tensorflow-cpu), never in
the test process. Writes ``OUTDIR/<name>.litertlm``, the tokenizers it packed
(``tokenizer.json``: an HF WordLevel tokenizer; ``tokenizer.model``: a SentencePiece model trained
here), litert-torch's own ``toy_model_with_kv_cache`` as a ``.tflite`` (its prefill fills the
whole cache: the case of ``validate --steps`` with a prompt shorter than the prefill), and
``OUTDIR/MANIFEST.json`` (how each was made; no results).

Bundles (:data:`BUNDLES`): the transposed KV layout with the mask as an input (what LiteRT-LM's
GPU executor expects) and litert-torch's default layout; ``quantize="dynamic_int8"`` (int8
weights) and ``"none"`` (fp32 weights); a SentencePiece tokenizer of fewer pieces (210) than
the model's vocabulary (256), as happens when a tokenizer is retrained; two planted faults on
the healthy bundle's weights:

- ``norm_x3e5``: the final RMS norm's scale times 3e5, so its output (about 3e5) overflows fp16
  (65504) while fp32 holds it;
- ``wrong_weight``: one weight of layer 1's MLP down projection set to 3e6 (a corrupted
  element): that layer's output overflows fp16 in its FULLY_CONNECTED.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import llm_build

ARCH = "tinyllama"
PREFILL_LEN = 8
KV_CACHE_LEN = 32
PAD, BOS, EOS, UNK = 0, 1, 2, 3
#: The tokenizers' words after the four special tokens (the default prompts of
#: ``tflkit.bundle.engine.DEFAULT_PROMPTS`` are made of them); padded with w<i> to the model's
#: vocabulary.
_TEXT = (
    "the a an of to in on at is was are be it he she they we you i and or but not with for from "
    "by as this that there here what who how when where why time day night year way people man "
    "woman child world life hand part place case week company system program question work "
    "number point home water room mother area money story fact month lot right study book eye "
    "job word business issue side kind head house service friend father power hour game line "
    "end member law car city name team minute idea kid body face others level office door "
    "health person art war history party result change morning reason research girl guy moment "
    "air teacher force education once upon weather today quick brown fox jumps over lazy dog "
    "cat sat mat sun rain good new first last long great little own other old big high "
    "different small large next early young important few public bad same able said made went "
    "came saw knew took gave found told asked felt left called tried"
)
WORDS = tuple(_TEXT.split())
#: name -> (KV layout, quantize, tokenizer, fault)
BUNDLES = {
    "tkv_int8_hf": ("transposed", "dynamic_int8", "hf", None),
    "tkv_int8_sp": ("transposed", "dynamic_int8", "sp", None),
    "tkv_int8_sp_small": ("transposed", "dynamic_int8", "sp_small", None),
    "tkv_none_hf": ("transposed", "none", "hf", None),
    "default_int8_hf": ("default", "dynamic_int8", "hf", None),
    "tkv_int8_hf_norm_x3e5": ("transposed", "dynamic_int8", "hf", "norm_x3e5"),
    "tkv_int8_hf_wrong_weight": ("transposed", "dynamic_int8", "hf", "wrong_weight"),
}
FAULTS = {
    "norm_x3e5": "final_norm.weight x 3e5 (its output overflows fp16)",
    "wrong_weight": "transformer_blocks.1.ff.w2.weight[0, 0] = 3e6 (layer 1's MLP output "
    "overflows fp16)",
}


def vocabulary() -> list[str]:
    """The 256 tokens: specials, :data:`WORDS`, then ``w<i>`` fillers."""
    words = ["<pad>", "<bos>", "<eos>", "<unk>", *dict.fromkeys(WORDS)]
    words += [f"w{i}" for i in range(llm_build.VOCAB - len(words))]
    return words[: llm_build.VOCAB]


def hf_tokenizer(target: Path) -> Path:
    """An HF ``tokenizer.json``: WordLevel over :func:`vocabulary`, split on whitespace."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {word: i for i, word in enumerate(vocabulary())}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tokenizer.add_special_tokens(["<pad>", "<bos>", "<eos>", "<unk>"])
    tokenizer.save(str(target))
    return target


def sp_tokenizer(target: Path, *, pieces: int | None = llm_build.VOCAB) -> Path:
    """A SentencePiece unigram model trained here on sentences of :data:`WORDS` (seed 0), ids 0-3
    the same specials as the HF tokenizer's: ``pieces`` pieces (the text yields 210 learned
    ones, so placeholders ``<extra_i>`` fill up to 256), or as many as training finds (None)."""
    import sentencepiece as spm

    rng = random.Random(llm_build.SEED)
    words = list(dict.fromkeys(WORDS))
    sentences = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(4000)]
    prefix = target.with_suffix("")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_prefix=str(prefix),
        vocab_size=pieces or llm_build.VOCAB,
        model_type="unigram",
        user_defined_symbols=[f"<extra_{i}>" for i in range(48)] if pieces else [],
        pad_id=PAD,
        bos_id=BOS,
        eos_id=EOS,
        unk_id=UNK,
        hard_vocab_limit=pieces is not None,
        minloglevel=2,
        num_threads=1,
    )
    return prefix.with_suffix(".model")


def _plant(model, fault: str | None) -> None:
    import torch

    with torch.no_grad():
        if fault == "norm_x3e5":
            model.final_norm.weight.mul_(3e5)
        elif fault == "wrong_weight":
            model.transformer_blocks[1].ff.w2.weight[0, 0] = 3e6
        elif fault is not None:
            raise ValueError(fault)


def _bundle(name: str, outdir: Path, tokenizers: dict[str, Path]) -> dict:
    from litert_torch.generative.layers import kv_cache
    from litert_torch.generative.utilities import converter, export_config

    layout, quantize, tokenizer, fault = BUNDLES[name]
    model, config = llm_build._model(ARCH)
    _plant(model, fault)
    if layout == "transposed":
        export = export_config.ExportConfig(
            mask_as_input=True, kvcache_layout=kv_cache.KV_LAYOUT_TRANSPOSED
        )
    else:
        export = export_config.ExportConfig()
    key = "hf_tokenizer_model_path" if tokenizer == "hf" else "tokenizer_model_path"
    with tempfile.TemporaryDirectory(dir=outdir) as tmp:
        converter.convert_to_litert(
            model,
            output_path=tmp,
            output_name_prefix=name,
            prefill_seq_len=PREFILL_LEN,
            kv_cache_max_len=KV_CACHE_LEN,
            quantize=quantize,
            config=config,
            export_config=export,
            output_format="litertlm",
            start_token_id=BOS,
            stop_token_ids=[EOS],
            **{key: str(tokenizers[tokenizer])},
        )
        (written,) = Path(tmp).glob("*.litertlm")
        target = outdir / f"{name}.litertlm"
        os.replace(written, target)
    return {
        "file": target.name,
        "bytes": target.stat().st_size,
        "arch": ARCH,
        "kv_layout": layout,
        "mask_as_input": layout == "transposed",
        "quantize": quantize,
        "tokenizer": tokenizers[tokenizer].name,
        "fault": FAULTS.get(fault or ""),
        "prefill_len": PREFILL_LEN,
        "kv_cache_len": KV_CACHE_LEN,
        "start_token_id": BOS,
        "stop_token_ids": [EOS],
    }


def cpu_only(outdir: Path, tokenizer: Path) -> dict:
    """``tkv_int8_hf``'s model packed by ``litert-lm-builder`` directly (the same sections as
    ``convert_to_litert`` writes) with ``backend_constraint="cpu"`` on its prefill_decode
    section: ``tkv_int8_hf_cpu_only.litertlm``."""
    import litert_lm_builder as lb
    from litert_lm_builder.runtime.proto import llm_metadata_pb2, llm_model_type_pb2
    from litert_torch.generative.layers import kv_cache
    from litert_torch.generative.utilities import converter, export_config

    model, config = llm_build._model(ARCH)
    layout = export_config.ExportConfig(
        mask_as_input=True, kvcache_layout=kv_cache.KV_LAYOUT_TRANSPOSED
    )
    meta = llm_metadata_pb2.LlmMetadata(max_num_tokens=KV_CACHE_LEN)
    meta.start_token.token_ids.ids.append(BOS)
    meta.stop_tokens.add().token_ids.ids.append(EOS)
    meta.llm_model_type.CopyFrom(
        llm_model_type_pb2.LlmModelType(generic_model=llm_model_type_pb2.GenericModel())
    )
    target = outdir / "tkv_int8_hf_cpu_only.litertlm"
    with tempfile.TemporaryDirectory(dir=outdir) as tmp:
        tflite = converter.convert_to_tflite(
            model, tmp, "m", PREFILL_LEN, KV_CACHE_LEN, quantize="dynamic_int8", config=config,
            export_config=layout,
        )  # fmt: skip
        (Path(tmp) / "meta.pb").write_bytes(meta.SerializeToString())
        builder = lb.LitertLmFileBuilder()
        builder.add_llm_metadata(str(Path(tmp) / "meta.pb"))
        builder.add_hf_tokenizer(str(tokenizer))
        builder.add_tflite_model(
            tflite, lb.TfLiteModelType.PREFILL_DECODE, backend_constraint="cpu"
        )
        with open(target, "wb") as out:
            builder.build(out)
    return {"file": target.name, "bytes": target.stat().st_size, "arch": ARCH,
            "kv_layout": "transposed", "mask_as_input": True, "quantize": "dynamic_int8",
            "tokenizer": tokenizer.name, "fault": None, "backend_constraint": "cpu",
            "prefill_len": PREFILL_LEN, "kv_cache_len": KV_CACHE_LEN, "start_token_id": BOS,
            "stop_token_ids": [EOS]}  # fmt: skip


def toy_kv_cache(outdir: Path) -> dict:
    """litert-torch's own ``toy_model_with_kv_cache`` (its test model: 2 layers, a 100-token
    ``prefill``, a 100-position cache, vocabulary 150), converted the way its
    ``convert_toy_model.py`` does (``litert_torch.signature(...).convert()``; that script, as
    shipped in 0.10, calls ``KVCache.from_model_config(config)`` and fails), seed 0, to
    ``toy_model_with_kv_cache.tflite``: the graph whose prefill fills the whole cache."""
    import litert_torch
    import torch
    from litert_torch.generative.examples.test_models import toy_model_with_kv_cache as toy
    from litert_torch.generative.layers import kv_cache as kv_utils

    torch.manual_seed(llm_build.SEED)
    config = toy.get_model_config()
    model = toy.ToyModelWithKVCache(config).eval()
    kv = kv_utils.KVCache.from_model_config(config.max_seq_len, config)  # its script: (config)
    tokens, input_pos = toy.get_sample_prefill_inputs()
    decode_token, decode_input_pos = toy.get_sample_decode_inputs()
    prefill = {"tokens": tokens, "input_pos": input_pos, "kv_cache": kv}
    decode = {"tokens": decode_token, "input_pos": decode_input_pos, "kv_cache": kv}
    edge = (
        litert_torch.signature("prefill", model, sample_kwargs=prefill)
        .signature("decode", model, sample_kwargs=decode)
        .convert()
    )
    target = outdir / "toy_model_with_kv_cache.tflite"
    edge.export(str(target))
    return {"file": target.name, "bytes": target.stat().st_size, "prefill_len": 100,
            "kv_cache_len": config.max_seq_len, "vocab": config.vocab_size}  # fmt: skip


def _versions() -> dict[str, str]:
    from importlib import metadata

    names = ("torch", "litert-torch", "litert-lm-builder", "sentencepiece", "tokenizers")
    return {name: metadata.version(name) for name in names}


def build(outdir: Path, names: list[str] | None = None) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    outdir.mkdir(parents=True, exist_ok=True)
    tokenizers = {
        "hf": hf_tokenizer(outdir / "tokenizer.json"),
        "sp": sp_tokenizer(outdir / "tokenizer.model"),
        "sp_small": sp_tokenizer(outdir / "tokenizer_small.model", pieces=None),
    }
    manifest = {"versions": _versions(), "bundles": {}, "graphs": {}}
    for name in names or list(BUNDLES):
        manifest["bundles"][name] = _bundle(name, outdir, tokenizers)
        print(f"{name}: {manifest['bundles'][name]['bytes']} bytes", flush=True)
    if not names:
        manifest["bundles"]["tkv_int8_hf_cpu_only"] = cpu_only(outdir, tokenizers["hf"])
        manifest["graphs"]["toy_model_with_kv_cache"] = toy_kv_cache(outdir)
    (outdir / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    build(Path(sys.argv[1]), sys.argv[2:] or None)
