"""``inspect`` and ``check`` of a ``.litertlm`` bundle: its sections, metadata and tokenizer, what
LiteRT-LM will make of them, then each TFLite section as tflkit reports a ``.tflite``.

Static warnings (each from a measurement on the bundle corpus, docs/llm.md "Bundles"):

- the tokenizer has fewer tokens than the model's logits: the GPU engine refused a generated id
  past the tokenizer's end ("Token id 244 is out of range. Vocab size is 210");
- the decode graph's first K cache does not hold ``max_num_tokens`` positions on axis 2, where
  LiteRT-LM 0.18 reads the context length (litert-torch's default layout ``[1, cache, kv_heads,
  head_dim]`` puts the KV heads there): the CPU engine refused a 5-token prompt ("Input token
  ids are too long. Exceeding the maximum number of tokens allowed: 5 >= 2");
- a float (not quantized) ``EMBEDDING_LOOKUP`` table in a prefill_decode section: the GPU engine
  aborted the process ("EMBEDDING_LOOKUP: Unsupported external weights type: 1").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tflkit.bundle.litertlm import Bundle, Section, load_bundle
from tflkit.bundle.llm_metadata import decode_llm_metadata, hf_tokenizer_info, sp_tokenizer_info
from tflkit.errors import ModelLoadError
from tflkit.jsonable import plain

__all__ = [
    "BundleCheck",
    "BundleInspect",
    "check_bundle",
    "inspect_bundle",
    "is_gpu_section",
    "static_warnings",
]


def _tokenizer(bundle: Bundle) -> dict[str, Any] | None:
    for section in bundle.sections:
        reader = {"HF_Tokenizer_Zlib": hf_tokenizer_info, "SP_Tokenizer": sp_tokenizer_info}
        if section.kind in reader:
            try:
                info = reader[section.kind](bundle.view(section))
            except ValueError as exc:
                raise ModelLoadError(f"{bundle.label}: {section.label}: {exc}") from None
            return {"section": section.index, "bytes": section.size, **info}
    return None


def _metadata(bundle: Bundle) -> dict[str, Any] | None:
    found = bundle.of_kind("LlmMetadataProto")
    if not found:
        return None
    try:
        return decode_llm_metadata(bundle.view(found[0]))
    except ValueError as exc:
        raise ModelLoadError(f"{bundle.label}: {found[0].label}: {exc}") from None


#: Said when the probe (LiteRT's GPU accelerator, ``CompiledModel``) fails on a section.
ENGINE_NOTE = (
    "this section's verdict is LiteRT's GPU accelerator's (CompiledModel); LiteRT-LM builds its "
    "own GPU graph (it ran the corpus's bundles on the GPU, odml composites and all, where the "
    "accelerator crashed on them): `tflkit validate` on the bundle runs the engine itself"
)


def is_gpu_section(section: Section) -> bool:
    """Whether LiteRT-LM may give this section to the GPU (its ``backend_constraint``, a list
    such as ``cpu`` or ``cpu,gpu``, names it, or there is none)."""
    constraint = section.backend_constraint
    return constraint is None or "gpu" in constraint.lower()


def _logits_vocab(model: Any) -> int | None:
    for sig in model.signatures:
        out = sig.outputs.get("logits")
        if out is not None and out.shape:
            return int(out.shape[-1])
    return None


def _warnings(model: Any, meta: dict[str, Any] | None, tok: dict[str, Any] | None) -> list[str]:
    out = []
    vocab = _logits_vocab(model)
    if tok and vocab and tok["vocab_size"] < vocab:
        out.append(
            f"the tokenizer has {tok['vocab_size']} tokens and the model's logits {vocab}: a "
            f"generated id >= {tok['vocab_size']} has no text (LiteRT-LM refuses it: 'Token id "
            "... is out of range')"
        )
    decode = next((s for s in model.signatures if s.key == "decode"), None)
    k0 = decode.inputs.get("kv_cache_k_0") if decode is not None else None
    limit = (meta or {}).get("max_num_tokens")
    if k0 is not None and limit and len(k0.shape) == 4 and int(k0.shape[2]) != limit:
        out.append(
            f"kv_cache_k_0 is {list(k0.shape)}: LiteRT-LM 0.18 reads the context length from its "
            f"axis 2 ({k0.shape[2]}), not the {limit} positions of max_num_tokens, and refuses "
            "longer prompts; export with kvcache_layout=KV_LAYOUT_TRANSPOSED ([1, kv_heads, "
            "cache, head_dim])"
        )
    for op in model.iter_ops():
        table = op.inputs[1] if op.type == "EMBEDDING_LOOKUP" and len(op.inputs) > 1 else None
        if table is not None and table.type_name == "FLOAT32" and table.is_constant:
            out.append(
                "EMBEDDING_LOOKUP reads a float32 table: LiteRT-LM's GPU executor aborts on it "
                "('Unsupported external weights type: 1'); quantize the weights (dynamic_int8)"
            )
            break
    return out


def static_warnings(bundle: Bundle) -> dict[int, list[str]]:
    """Per TFLite section, what LiteRT-LM will refuse of it (the warnings ``inspect`` prints)."""
    meta, tok = _metadata(bundle), _tokenizer(bundle)
    out = {}
    for section in bundle.of_kind("TFLiteModel"):
        found = _warnings(bundle.model(section), meta, tok)
        if found:
            out[section.index] = found
    return out


@dataclass
class BundleInspect:
    """What ``inspect`` says of a bundle."""

    path: str
    size_bytes: int
    version: str
    system: dict[str, Any]
    sections: list[Section]
    metadata: dict[str, Any] | None
    tokenizer: dict[str, Any] | None
    models: dict[int, Any] = field(default_factory=dict)  # section -> InspectReport
    warnings: dict[int, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "schema": "tflkit.inspect-litertlm/1",
                "path": self.path,
                "format": "litertlm",
                "version": self.version,
                "size_bytes": self.size_bytes,
                "system_metadata": self.system,
                "sections": [s.to_json() for s in self.sections],
                "llm_metadata": self.metadata,
                "tokenizer": self.tokenizer,
                "models": [
                    {"section": i, "warnings": self.warnings.get(i, []), "inspect": r.to_json()}
                    for i, r in self.models.items()
                ],
            }
        )


def inspect_bundle(path: str | Path) -> BundleInspect:
    """Read ``path``'s header, metadata and tokenizer, and inspect each TFLite section."""
    from tflkit.fsio import sha256_of
    from tflkit.inspection import inspect_model

    bundle = load_bundle(path)
    meta, tok = _metadata(bundle), _tokenizer(bundle)
    report = BundleInspect(
        bundle.label, len(bundle.data), ".".join(map(str, bundle.version)), bundle.system,
        bundle.sections, meta, tok,
    )  # fmt: skip
    for section in bundle.of_kind("TFLiteModel"):
        model = bundle.model(section)
        view = bundle.view(section)
        label = f"{bundle.label}#{section.index}"
        report.models[section.index] = inspect_model(
            model, path=label, size_bytes=section.size, sha256=sha256_of(view)
        )
        found = _warnings(model, meta, tok)
        if found:
            report.warnings[section.index] = found
    return report


@dataclass
class BundleCheck:
    """What ``check`` says of a bundle: each TFLite section's check report, or why it was not
    checked for the GPU."""

    path: str
    sections: list[tuple[Section, Any, str | None]]  # (section, CheckReport | None, skipped)
    warnings: dict[int, list[str]]

    @property
    def gpu_ready(self) -> bool:
        checked = [r for _, r, _ in self.sections if r is not None]
        warned = [w for ws in self.warnings.values() for w in ws if w != ENGINE_NOTE]
        return bool(checked) and all(r.gpu_ready for r in checked) and not warned

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "schema": "tflkit.check-litertlm/1",
                "path": self.path,
                "format": "litertlm",
                "gpu_ready": self.gpu_ready,
                "sections": [
                    {
                        **s.to_json(),
                        "skipped": skipped,
                        "warnings": self.warnings.get(s.index, []),
                        "check": None if r is None else r.to_json(),
                    }
                    for s, r, skipped in self.sections
                ],
            }
        )


def check_bundle(path: str | Path, **check_options: Any) -> BundleCheck:
    """``check`` each TFLite section the GPU may get (``check_path`` on a view of the section:
    decode first, ``--probe`` per signature); a section constrained to other backends is listed
    with the reason it was not checked."""
    from tflkit.rewriter.advice import check_path

    bundle = load_bundle(path)
    meta, tok = _metadata(bundle), _tokenizer(bundle)
    out = BundleCheck(bundle.label, [], {})
    for section in bundle.of_kind("TFLiteModel"):
        if not is_gpu_section(section):
            why = (
                f"backend_constraint {section.backend_constraint}: LiteRT-LM never gives it to "
                "the GPU"
            )
            out.sections.append((section, None, why))
            continue
        report, model = check_path(bundle.view(section), **check_options)
        report.path = f"{bundle.label}#{section.index}"
        out.sections.append((section, report, None))
        found = _warnings(model, meta, tok)
        if _accelerator_fails(report):
            report.summary = f"{ACCELERATOR_SCOPE}: {report.summary}"
            found.append(ENGINE_NOTE)
        if found:
            out.warnings[section.index] = found
    return out


#: How a bundle section's verdict is scoped when LiteRT's accelerator fails on it: the engine
#: is another GPU path, so the section's summary speaks of the accelerator only.
ACCELERATOR_SCOPE = "LiteRT's GPU accelerator, compiling this section alone"


def _accelerator_fails(report: Any) -> bool:
    """The static table or the probe says LiteRT's accelerator does not compile the section
    (a whole-model crash or failure), which says nothing of LiteRT-LM's own GPU graph."""
    probed = report.probe is not None and report.probe.compiled is False
    return probed or (report.probe is None and not report.compiles)
