"""The ``.litertlm`` bundle corpus from the test process's side: built once into the test cache
by ``tests/corpus/llm_bundle_build.py`` in the LLM builder environment (``llm_build.ensure_env``).

``python -m tests.corpus.llm_bundles`` builds it (if needed) and prints its folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.conftest_corpus import REPO, cache_root
from tests.corpus import llm_build

__all__ = ["bundle_path", "bundles_dir", "manifest"]

_SCRIPTS = ("tests/corpus/llm_bundle_build.py", "tests/corpus/llm_build.py")


def source_key() -> str:
    """A hash of the builder and the architectures it takes: the bundles are rebuilt on change."""
    digest = hashlib.sha256()
    for script in _SCRIPTS:
        digest.update((REPO / script).read_bytes())
    return digest.hexdigest()[:12]


def bundles_dir() -> Path:
    """``{name}.litertlm``, the tokenizers and ``MANIFEST.json`` in the test cache, built once per
    version of the builder scripts; raises RuntimeError when the build fails."""
    root = cache_root() / "llm"
    folder = root / f"bundles-{source_key()}"
    if (folder / "MANIFEST.json").is_file():
        return folder
    python = llm_build.ensure_env(root)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        done = subprocess.run(
            ["nice", "-n", "5", str(python), str(REPO / _SCRIPTS[0]), tmp],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        )
        if done.returncode != 0:
            raise RuntimeError(f"the LLM bundle build failed:\n{done.stderr[-3000:]}")
        staged = folder.with_name(folder.name + f".tmp{os.getpid()}")
        shutil.copytree(tmp, staged)
        os.replace(staged, folder)
    return folder


def manifest() -> dict:
    return json.loads((bundles_dir() / "MANIFEST.json").read_text())


def bundle_path(name: str) -> Path:
    return bundles_dir() / f"{name}.litertlm"


if __name__ == "__main__":
    print(bundles_dir())
    sys.exit(0)
