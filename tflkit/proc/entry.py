"""The child side of :func:`tflkit.proc.worker.python_command`.

``python -m tflkit.proc.entry MODULE:FUNCTION ARG...`` imports ``MODULE`` under its own name,
calls ``FUNCTION([ARG, ...])`` and exits with the number it returns. The parent names the
function by reference (``python_command(_probe_worker.main, ...)``), so the worker a child runs is
a real import that a reader and a test can follow.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``MODULE:FUNCTION`` (``argv[0]``) on the rest of ``argv``; it returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or ":" not in args[0]:
        print("usage: python -m tflkit.proc.entry MODULE:FUNCTION [ARG ...]", file=sys.stderr)
        return 2
    module, _, name = args[0].partition(":")
    imported = importlib.import_module(module)
    function = getattr(imported, name)
    # the worker sees the argv ``python -m MODULE`` would give it (argparse names it from [0])
    sys.argv = [getattr(imported, "__file__", None) or args[0], *args[1:]]
    code = function(args[1:])
    return 0 if code is None else int(code)


if __name__ == "__main__":
    sys.exit(main())
