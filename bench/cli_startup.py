"""Benchmark: how long the CLI takes to start, as a ratio to a bare ``import typer, rich``.

Run from the repo root: ``PYTHONPATH=. python bench/cli_startup.py [--repeats 15]``. Each sample
is a fresh interpreter (``sys.executable``); the commands alternate so machine load hits them
alike, and the table shows the medians and their ratio. The anchor is the floor of any Typer +
rich CLI: everything above it is what tflkit imports itself. ``tflkit check --json`` runs on the
3-op model of ``bench/large_model.py --layers 1`` (generated into a temporary folder): a whole
command whose model takes no time, so its time is the start (the imports of the command it
names, its parser) and the exit. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GENERATOR = Path(__file__).resolve().parent / "large_model.py"


def commands(model: Path) -> dict[str, list[str]]:
    """The commands timed, by label; the anchor first."""
    return {
        "anchor: import typer, rich": [sys.executable, "-c", "import typer, rich"],
        "tflkit --help": [sys.executable, "-m", "tflkit", "--help"],
        "tflkit check --help": [sys.executable, "-m", "tflkit", "check", "--help"],
        "tflkit check --json (3 ops)": [
            sys.executable,
            "-m",
            "tflkit",
            "check",
            "--json",
            str(model),
        ],
    }


def _time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        model = Path(folder) / "three-ops.tflite"
        subprocess.run(
            [sys.executable, str(GENERATOR), str(model), "--layers", "1"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        timed = commands(model)
        samples: dict[str, list[float]] = {name: [] for name in timed}
        for command in timed.values():  # warm the page cache and bytecode
            _time(command)
        for _ in range(args.repeats):
            for name, command in timed.items():
                samples[name].append(_time(command))
    anchor = statistics.median(samples["anchor: import typer, rich"])
    print(f"{'command':<30} {'median s':>9} {'ratio':>7}")
    for name, times in samples.items():
        median = statistics.median(times)
        print(f"{name:<30} {median:9.3f} {median / anchor:6.2f}x")


if __name__ == "__main__":
    main()
