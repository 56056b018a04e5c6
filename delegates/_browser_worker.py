"""Child process: one browser job for a model and its input sets (the LiteRT.js runners).

Arguments: ``MODEL FEEDS_DIR RESULT_DIR --backend B ... [--adapter A] [--signature K]
[--timeout S] [--backend-timeout S]``. ``FEEDS_DIR`` holds ``feeds.json`` (one list of input
names per set) and ``<set>/<k>.npy``; the job written for them runs in Chromium with LiteRT.js
(:func:`tflkit.delegates.browser.job.run_browser_job`) and ``RESULT_DIR`` is its result folder.
The ``validate`` runners ``webgpu-fp16``, ``webgpu-fp32`` and ``wasm``
(:class:`tflkit.delegates.litert_js.BrowserSession`) start this in a process of their own:
Playwright's sync API wants a thread without an asyncio loop, and a browser that hangs dies with
its process group.

Exit codes: 0 with the result folder written, 2 for a bad job or arguments, 4 when the browser
harness failed (LiteRT.js not fetched, Chromium missing, a page that never reported); the last
line of stderr says why, after ``tflkit-browser: error: ``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tflkit.errors import TflkitError

from .browser.chromium import ADAPTERS
from .browser.job import BROWSER_BACKENDS, run_browser_job, write_browser_job

__all__ = ["ERROR_PREFIX", "exit_code_of", "main"]

#: Before the reason on the last line of stderr when the job failed.
ERROR_PREFIX = "tflkit-browser: error: "


def _feeds(folder: Path) -> list[dict[str, np.ndarray]]:
    names = json.loads((folder / "feeds.json").read_text())
    return [
        {
            name: np.load(folder / str(s) / f"{k}.npy", allow_pickle=False)
            for k, name in enumerate(n)
        }
        for s, n in enumerate(names)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tflkit.delegates._browser_worker")
    parser.add_argument("model", type=Path)
    parser.add_argument("feeds", type=Path)
    parser.add_argument("result", type=Path)
    parser.add_argument("--backend", action="append", choices=BROWSER_BACKENDS, required=True)
    parser.add_argument("--signature")
    parser.add_argument("--backend-timeout", type=float, default=300.0)
    parser.add_argument("--adapter", choices=tuple(ADAPTERS), default="swiftshader")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)

    def run() -> None:
        with tempfile.TemporaryDirectory(prefix="tflkit-browser-feeds-") as tmp:
            job = write_browser_job(
                Path(tmp) / "job",
                args.model.read_bytes(),
                _feeds(args.feeds),
                backends=tuple(args.backend),
                signature=args.signature,
                timeout_seconds=args.backend_timeout,
            )
            run_browser_job(job, args.result, adapter=args.adapter, timeout=args.timeout)

    return exit_code_of(run)


def exit_code_of(run: Callable[[], None]) -> int:
    """``run()`` as a harness program's exit code: 0, a tflkit error's own (2 unless it says
    otherwise), 2 for a file that cannot be read or written (the message on the last line of
    stderr after :data:`ERROR_PREFIX`), 130 on Ctrl-C."""
    try:
        run()
        return 0
    except TflkitError as exc:
        print(f"{ERROR_PREFIX}{exc}", file=sys.stderr, flush=True)
        return int(getattr(exc, "exit_code", 2))
    except OSError as exc:  # a model, input set or folder that cannot be read or written
        print(f"{ERROR_PREFIX}{exc}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
