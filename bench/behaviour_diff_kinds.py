"""Behaviour diff of ``validate``'s other two subjects: ``--steps`` and a ``.litertlm`` bundle.

``bench/behaviour_diff.py`` records the corpus's ``.tflite`` models; this runs, at two revisions,
``validate --steps 3`` on the LLM corpus's toy KV-cache model (cpu, cpu-fp16, gpu-fp32) and
``validate`` on its int8 SentencePiece bundle, and prints the fields of the JSON that differ
(timings and the engine's speed figures left out)::

    PYTHONPATH=. .venv/bin/python bench/behaviour_diff_kinds.py REV_A REV_B

Each revision runs from a ``git worktree`` with the same shim as ``behaviour_diff.py``.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import behaviour_diff as bd

#: what is left out: wall and engine times, speed figures, the CPUs the engine was pinned to
TIMING = re.compile(r"seconds|second|_s$|per_second|figures|benchmark|cpus")


def _runs() -> dict[str, list[str]]:
    from tests.conftest_corpus import cache_root

    found = sorted((cache_root() / "llm").glob("bundles-*/tkv_int8_sp.litertlm"))
    if not found:
        raise SystemExit("build the LLM bundle corpus first: pytest tests/test_llm_bundles.py")
    folder = found[-1].parent
    toy = folder / "toy_model_with_kv_cache.tflite"
    steps = ["-r", "cpu", "-r", "cpu-fp16", "-r", "gpu-fp32"]
    return {
        "steps": ["validate", str(toy), "--json", "--steps", "3", *steps],
        "bundle": ["validate", str(found[-1]), "--json", "--prompt", "the weather today is"],
    }


def record(rev: str, runs: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """Each run's exit code and JSON at ``rev``."""
    with tempfile.TemporaryDirectory(prefix="tflkit-kinds-") as tmp:
        worktree = Path(tmp) / "worktree"
        bd.git("worktree", "add", "--detach", str(worktree), rev)
        try:
            bd.write_shim(worktree, Path(tmp) / "shim")
            env = bd.cli_env(worktree, Path(tmp) / "shim")
            scratch = Path(tmp) / "scratch"
            scratch.mkdir()
            return {kind: bd.run_cli(args, env, scratch, 900) for kind, args in runs.items()}
        finally:
            bd.git("worktree", "remove", "--force", str(worktree))


def main(argv: list[str]) -> int:
    rev_a, rev_b = argv
    runs = _runs()
    a, b = record(rev_a, runs), record(rev_b, runs)
    for kind in runs:
        json_a = bd.normalize(a[kind]["json"], "validate", {})
        json_b = bd.normalize(b[kind]["json"], "validate", {})
        diffs = [d for d in bd.differences(json_a, json_b) if not TIMING.search(bd.json_path(d[0]))]
        print(f"{kind}: exit {a[kind]['code']} -> {b[kind]['code']}; {len(diffs)} fields differ")
        for path, x, y in diffs:
            print(f"  {bd.json_path(path)}: {bd.shown(x)} -> {bd.shown(y)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
