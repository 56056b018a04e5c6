"""tflkit, Python and the runtimes installed beside them, and which extras are there.

Versions come from the installed distributions' metadata; nothing heavy is imported (whether an
extra's module is importable is asked with ``find_spec``).
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from pathlib import Path

from tflkit.errors import EXTRAS, missing_modules

from .items import Item

__all__ = ["extras_items", "runtime_items", "tflkit_items", "version_of"]

#: the runtimes: (distribution names, first found wins; what it is; the extra that brings it, or
#: the pip line for one that is no extra)
RUNTIMES: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("ai-edge-litert", ("ai-edge-litert", "ai-edge-litert-nightly"), "LiteRT, the runtime", ""),
    ("LiteRT-LM", ("litert-lm-api", "litert-lm-api-nightly"), "the .litertlm engine", "llm"),
    ("TensorFlow", ("tensorflow-cpu", "tensorflow"), "conversion, references", "convert"),
)


def version_of(*names: str) -> tuple[str, str] | None:
    """(distribution, version) of the first of ``names`` installed, or None."""
    for name in names:
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def tflkit_items() -> list[Item]:
    import tflkit

    found = version_of("tflkit")
    where = Path(tflkit.__file__).parent
    return [
        Item("tflkit", "tflkit", "ok", f"{found[1] if found else 'unknown'} in {where}"),
        Item(
            "tflkit",
            "Python",
            "info",
            f"{platform.python_version()} ({sys.executable}), {platform.system()} "
            f"{platform.machine()}",
        ),
    ]


def runtime_items() -> list[Item]:
    items = []
    for label, names, what, extra in RUNTIMES:
        found = version_of(*names)
        if found:
            items.append(Item("runtime", label, "ok", f"{found[0]} {found[1]} ({what})"))
        else:
            fix = f"pip install 'tflkit[{extra}]'" if extra else f"pip install {names[0]}"
            items.append(Item("runtime", label, "missing", f"not installed ({what})", fix))
    legacy = version_of("tflite-runtime")
    items.append(
        Item(
            "runtime",
            "tflite-runtime",
            "info",
            f"tflite-runtime {legacy[1]} (optional, not used: it needs numpy < 2)"
            if legacy
            else "not installed (optional, not needed: ai-edge-litert is its successor)",
        )
    )
    return items


def extras_items() -> list[Item]:
    items = []
    for extra, (modules, what) in EXTRAS.items():
        missing = missing_modules(extra)
        if not missing:
            items.append(Item("extras", extra, "ok", f"{', '.join(modules)}: {what}"))
        else:
            items.append(
                Item(
                    "extras",
                    extra,
                    "missing",
                    f"no {', '.join(missing)}: {what}",
                    f"pip install 'tflkit[{extra}]'",
                )
            )
    return items
