"""The LLM corpus from the test process's side: build it once into the test cache, and the
``validate --steps`` figures of docs/llm.md.

``python -m tests.corpus.llm_steps [--steps N] [--json]`` builds the corpus if needed (the
builder environment too: torch 2.13, litert-torch 0.10, tensorflow-cpu; see
``tests/corpus/llm_build.py``) and runs ``validate --steps`` on every architecture twice: as
litert-torch exports it, and with its STABLEHLO_COMPOSITE ops inlined (their decomposition
subgraphs copied in place by the rewrite rule ``inline_composite``), which is what LiteRT's GPU
accelerator 2.3 on lavapipe can compile.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.conftest_corpus import REPO, cache_root
from tests.corpus import llm_build
from tflkit.fsio import exclusive_lock

__all__ = ["build_in_env", "corpus_dir", "inlined"]


def corpus_dir() -> Path:
    """``{arch}.tflite`` and ``MANIFEST.json`` in the test cache, built once per version of
    ``llm_build.py`` (its hash names the folder); raises RuntimeError when the build fails."""
    folder = cache_root() / "llm" / f"corpus-{llm_build.source_key()}"
    return build_in_env(folder, "tests/corpus/llm_build.py", "the LLM corpus")


def build_in_env(folder: Path, script: str, what: str) -> Path:
    """``folder`` (a cache folder named by the hash of what builds it), made once by ``script``
    run with an output folder in the LLM builder environment (``llm_build.ensure_env``) and
    moved into place whole; raises RuntimeError with the end of its stderr when it fails."""
    if (folder / "MANIFEST.json").is_file():
        return folder
    root = folder.parent
    python = llm_build.ensure_env(root)
    root.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(folder.with_name(folder.name + ".lock")):  # one builder at a time
        if (folder / "MANIFEST.json").is_file():
            return folder
        shutil.rmtree(folder, ignore_errors=True)  # what a killed builder left
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            done = subprocess.run(
                ["nice", "-n", "5", str(python), str(REPO / script), tmp],
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
            )
            if done.returncode != 0:
                raise RuntimeError(f"{what} build failed:\n{done.stderr[-3000:]}")
            staged = folder.with_name(folder.name + f".tmp{os.getpid()}")
            shutil.copytree(tmp, staged)
            os.replace(staged, folder)
    return folder


def inlined(data: bytes) -> bytes:
    """``data`` rewritten as ``tflkit rewrite --rule inline_composite --force`` does it, proven
    bit-identical on the CPU (builtin kernels, every signature); raises RuntimeError if not.
    Gemma's is written although the rule's XNNPACK check fails (its attention decomposition is
    not what XNNPACK's own kernel computes): the copy itself is exact."""
    from tflkit.rewriter.run import rewrite_model

    outcome = rewrite_model(data, rule_names=["inline_composite"])
    verdict = outcome.verification
    exact = verdict is not None and bool(verdict.outputs)
    exact = exact and all(o.identical for o in verdict.outputs)
    if not outcome.passes.fired or verdict is None or not exact:
        problem = verdict.problem if verdict is not None else "the rule did not fire"
        raise RuntimeError(f"inline_composite: {problem}")
    return outcome.rewritten


def main(argv: list[str] | None = None) -> int:
    from tflkit.report.steps_report import steps_lines
    from tflkit.validation.steps import steps_report

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    folder = corpus_dir()
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    out = {}
    for arch, entry in manifest.items():
        variants = {"as exported": (folder / entry["file"]).read_bytes()}
        variants["composites inlined"] = inlined(variants["as exported"])
        for variant, data in variants.items():
            report = steps_report(data, f"{arch} ({variant})", args.steps)
            out[f"{arch} ({variant})"] = report.to_json()
            if not args.json:
                print("\n".join(steps_lines(report)), flush=True)
    if args.json:
        json.dump(out, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
