"""``python -m tflkit.harness.browser``: the browser harness as a program of its own.

- ``run JOB_DIR RESULT_DIR [--adapter A] [--timeout S]``: run a job folder, write its result
  folder (the Linux harness's ``run``, for the browser);
- ``feeds MODEL FEEDS_DIR RESULT_DIR --backend B ... [--adapter A] [--signature K] [--timeout S]
  [--backend-timeout S]``: write a browser job for ``MODEL`` with the input sets of ``FEEDS_DIR``
  (``feeds.json``: one list of input names per set; ``<set>/<k>.npy``) and run it. The ``validate``
  runners ``webgpu-fp16``, ``webgpu-fp32`` and ``wasm`` (``tflkit.delegates.litert_js``) start
  this in a process of their own: Playwright's sync API wants a thread without an asyncio loop,
  and a browser that hangs dies with its process group.

Exit codes: 0 with the result folder written, 2 for a bad job or arguments, 4 when the browser
harness failed (LiteRT.js not fetched, Chromium missing, a page that never reported); the last
line of stderr says why.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from tflkit.errors import TflkitError

from .chromium import ADAPTERS
from .job import BROWSER_BACKENDS, run_browser_job, write_browser_job


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
    parser = argparse.ArgumentParser(prog="python -m tflkit.harness.browser")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a job folder")
    run.add_argument("job", type=Path)
    run.add_argument("result", type=Path)
    feeds = commands.add_parser("feeds", help="write a job for a model and input sets, run it")
    feeds.add_argument("model", type=Path)
    feeds.add_argument("feeds", type=Path)
    feeds.add_argument("result", type=Path)
    feeds.add_argument("--backend", action="append", choices=BROWSER_BACKENDS, required=True)
    feeds.add_argument("--signature")
    feeds.add_argument("--backend-timeout", type=float, default=300.0)
    for sub in (run, feeds):
        sub.add_argument("--adapter", choices=tuple(ADAPTERS), default="swiftshader")
        sub.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            run_browser_job(args.job, args.result, adapter=args.adapter, timeout=args.timeout)
            return 0
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
        return 0
    except TflkitError as exc:
        print(f"tflkit-browser: error: {exc}", file=sys.stderr, flush=True)
        return int(getattr(exc, "exit_code", 2))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
