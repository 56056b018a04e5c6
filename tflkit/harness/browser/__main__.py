"""``python -m tflkit.harness.browser run JOB_DIR RESULT_DIR [--adapter A] [--timeout S]``: run a
job folder in this machine's headless Chromium with LiteRT.js and write its result folder (the
Linux harness's ``run``, for the browser; the runtime is :mod:`tflkit.delegates.browser`).

Exit codes: 0 with the result folder written, 2 for a bad job or arguments, 4 when the browser
harness failed (LiteRT.js not fetched, Chromium missing, a page that never reported); the last
line of stderr says why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tflkit.delegates._browser_worker import exit_code_of
from tflkit.delegates.browser.chromium import ADAPTERS
from tflkit.delegates.browser.job import run_browser_job


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tflkit.harness.browser")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a job folder")
    run.add_argument("job", type=Path)
    run.add_argument("result", type=Path)
    run.add_argument("--adapter", choices=tuple(ADAPTERS), default="swiftshader")
    run.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    return exit_code_of(
        lambda: run_browser_job(args.job, args.result, adapter=args.adapter, timeout=args.timeout)
    )


if __name__ == "__main__":
    sys.exit(main())
