"""The LLM corpus from the test process's side: build it once into the test cache, and the
``validate --steps`` figures of docs/llm.md.

``python -m tests.corpus.llm_steps [--steps N] [--json]`` builds the corpus if needed (the
builder environment too: torch 2.13, litert-torch 0.10, tensorflow-cpu; see
``tests/corpus/llm_build.py``) and runs ``validate --steps`` on every architecture twice: as
litert-torch exports it, and with its STABLEHLO_COMPOSITE ops inlined (their decomposition
subgraphs copied in place), which is what LiteRT's GPU accelerator 2.3 on lavapipe can compile.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.conftest_corpus import REPO, cache_root
from tests.corpus import llm_build

__all__ = ["corpus_dir", "inline_composites"]


def corpus_dir() -> Path:
    """``{arch}.tflite`` and ``MANIFEST.json`` in the test cache, built once per version of
    ``llm_build.py`` (its hash names the folder); raises RuntimeError when the build fails."""
    root = cache_root() / "llm"
    folder = root / f"corpus-{llm_build.source_key()}"
    if (folder / "MANIFEST.json").is_file():
        return folder
    python = llm_build.ensure_env(root)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        done = subprocess.run(
            ["nice", "-n", "5", str(python), str(REPO / "tests/corpus/llm_build.py"), tmp],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        )
        if done.returncode != 0:
            raise RuntimeError(f"the LLM corpus build failed:\n{done.stderr[-3000:]}")
        staged = folder.with_name(folder.name + f".tmp{os.getpid()}")
        shutil.copytree(tmp, staged)
        os.replace(staged, folder)
    return folder


def inline_composites(model) -> int:
    """Replace every STABLEHLO_COMPOSITE of ``model`` (an ``ir.Model``) by a copy of its
    decomposition subgraph's ops (what a runtime without the composite's kernel runs anyway);
    returns how many were inlined."""
    from tflkit.ir.graph import Op, Tensor

    count = 0
    for graph in model.subgraphs:
        for op in [o for o in graph.ops if o.type == "STABLEHLO_COMPOSITE"]:
            body = model.subgraphs[op.options2.decompositionSubgraphIndex]
            mapped = {id(t): x for t, x in zip(body.inputs, op.inputs, strict=True)}

            def get(t, graph=graph, mapped=mapped):
                if t is None:
                    return None
                if id(t) not in mapped:
                    mapped[id(t)] = graph.add_tensor(
                        Tensor(
                            graph.unique_name("inlined/" + t.name),
                            t.shape,
                            t.type,
                            buffer=t.buffer,
                            quantization=copy.deepcopy(t.quantization),
                            shape_signature=t.shape_signature,
                        )
                    )
                return mapped[id(t)]

            at = op.index
            for inner in body.ops:
                clone = Op(
                    inner.opcode,
                    [get(t) for t in inner.inputs],
                    [get(t) for t in inner.outputs],
                    options=copy.deepcopy(inner.options),
                    options2=copy.deepcopy(inner.options2),
                    options2_type=inner.options2_type,
                    custom_options=inner.custom_options,
                )
                graph.insert_op(at, clone)
                at += 1
            for old, new in zip(op.outputs, body.outputs, strict=True):
                graph.replace_all_uses_with(old, mapped[id(new)])
            graph.remove_op(op)
            count += 1
    model.remove_unused()
    return count


def main(argv: list[str] | None = None) -> int:
    from tflkit import ir
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
        model = ir.load(folder / entry["file"])
        variants = {"as exported": (folder / entry["file"]).read_bytes()}
        inline_composites(model)
        variants["composites inlined"] = ir.dumps(model)
        for variant, data in variants.items():
            report = steps_report(data, f"{arch} ({variant})", args.steps)
            out[f"{arch} ({variant})"] = report.to_json()
            if not args.json:
                print("\n".join(report.lines()), flush=True)
    if args.json:
        json.dump(out, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
