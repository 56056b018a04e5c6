"""Benchmark: how long ``tflkit --help`` takes, as a ratio to a bare ``import typer, rich``.

Run from the repo root: ``python bench/cli_startup.py [--repeats 15]``. Each sample is a fresh
interpreter (``sys.executable``); the two commands alternate so machine load hits both alike,
and the table shows the medians and their ratio. The anchor is the floor of any Typer + rich
CLI: everything above it is what tflkit imports itself. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "anchor: import typer, rich": [sys.executable, "-c", "import typer, rich"],
    "tflkit --help": [sys.executable, "-m", "tflkit", "--help"],
    "tflkit check --help": [sys.executable, "-m", "tflkit", "check", "--help"],
}


def _time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for command in COMMANDS.values():  # warm the page cache and bytecode
        _time(command)
    for _ in range(args.repeats):
        for name, command in COMMANDS.items():
            samples[name].append(_time(command))
    anchor = statistics.median(samples["anchor: import typer, rich"])
    print(f"{'command':<30} {'median s':>9} {'ratio':>7}")
    for name, times in samples.items():
        median = statistics.median(times)
        print(f"{name:<30} {median:9.3f} {median / anchor:6.2f}x")


if __name__ == "__main__":
    main()
