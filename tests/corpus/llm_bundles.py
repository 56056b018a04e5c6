"""The ``.litertlm`` bundle corpus from the test process's side: built once into the test cache
by ``tests/corpus/llm_bundle_build.py`` in the LLM builder environment (``llm_build.ensure_env``).

``python -m tests.corpus.llm_bundles`` builds it (if needed) and prints its folder.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from tests.conftest_corpus import REPO, cache_root
from tests.corpus.llm_steps import build_in_env

__all__ = ["bundle_path", "bundles_dir", "manifest"]

_SCRIPTS = ("tests/corpus/llm_bundle_build.py", "tests/corpus/llm_build.py")


def source_key() -> str:
    """A hash of the builder and the architectures it takes: the bundles are rebuilt on change."""
    digest = hashlib.sha256()
    for script in _SCRIPTS:
        digest.update((REPO / script).read_bytes())
    return digest.hexdigest()[:12]


def bundles_dir() -> Path:
    """``{name}.litertlm``, the tokenizers, ``toy_model_with_kv_cache.tflite`` and
    ``MANIFEST.json`` in the test cache, built once per version of the builder scripts; raises
    RuntimeError when the build fails."""
    folder = cache_root() / "llm" / f"bundles-{source_key()}"
    return build_in_env(folder, _SCRIPTS[0], "the LLM bundle corpus")


def manifest() -> dict:
    return json.loads((bundles_dir() / "MANIFEST.json").read_text())


def bundle_path(name: str) -> Path:
    return bundles_dir() / f"{name}.litertlm"


if __name__ == "__main__":
    print(bundles_dir())
    sys.exit(0)
