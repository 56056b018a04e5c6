"""A suite locally vs on a two-node Ray cluster on loopback, and the engines' per-item overhead.

    PYTHONPATH=. python bench/ray_suite.py [--models 8]

Builds a suite of ``--models`` copies of the example classifier (runners cpu and cpu-ref, no
probe: 3 items each), records it, then times ``regress check --suite`` three ways: locally with
``--jobs 2`` (the default on a 2-core machine), and with ``--cluster`` on a head and a second
node started with ``ray start`` (one CPU each; both on this machine, so the two nodes share its
cores: the ratio shows the engine's cost, not a second machine's gain). Then the overhead of one
item that does nothing: a Ray task round trip (a no-op task, sequential) against the local
engine's (a child process through ``spawn_python`` running a no-op). Prints seconds and ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "tflkit" / "examples" / "tiny_classifier.tflite"
RAY = str(Path(sys.executable).with_name("ray"))
ENV = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", XDG_RUNTIME_DIR="/tmp")


def noop(_argv: Sequence[str]) -> int:
    """The local engine's no-op item (a child that imports nothing else)."""
    return 0


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node(*args: str) -> subprocess.Popen[bytes]:
    cmd = [RAY, "start", "--block", "--node-ip-address=127.0.0.1", "--num-cpus=1",
           "--disable-usage-stats", '--resources={"tflkit_gpu": 1}', *args]  # fmt: skip
    return subprocess.Popen(
        cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def _alive(address: str) -> int:
    code = (
        "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
        "print(sum(n['Alive'] for n in ray.nodes()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, address], capture_output=True, text=True, env=ENV, check=False
    )
    return int(done.stdout.strip() or 0) if done.returncode == 0 else 0


def _timed(args: Sequence[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tflkit", *args], cwd=cwd, env=ENV, capture_output=True, check=False
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"tflkit {' '.join(args)} failed: {done.stderr.decode()[-800:]}")
    return time.perf_counter() - start


def _suite(root: Path, count: int) -> Path:
    lines = ["[defaults]", "runners = ['cpu', 'cpu-ref']", "probe = false", "num_inputs = 2"]
    for k in range(count):
        shutil.copy(EXAMPLE, root / f"m{k}.tflite")
        lines += ["[[models]]", f"path = 'm{k}.tflite'", f"baseline = 'baselines/m{k}'"]
    (root / "tflkit.toml").write_text("\n".join(lines) + "\n")
    _timed(["regress", "record", "--suite", "tflkit.toml"], root)
    return root / "tflkit.toml"


def _overheads(address: str, rounds: int = 50) -> tuple[float, float]:
    """Seconds per no-op item: a Ray task round trip, a local child process."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    from tflkit.proc.worker import spawn_python

    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1)(noop)
        ray.get(task.remote([]))  # a worker started
        start = time.perf_counter()
        for _ in range(rounds):
            ray.get(task.remote([]))
        per_task = (time.perf_counter() - start) / rounds
    finally:
        ray.shutdown()
    importable = importlib.import_module("bench.ray_suite").noop  # not __main__'s
    start = time.perf_counter()
    for _ in range(10):
        done = spawn_python(importable, cwd=REPO, timeout=60)
        assert done.returncode == 0, done.output
    return per_task, (time.perf_counter() - start) / 10


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=8)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tflkit-bench-ray-"))
    port = _port()
    address = f"127.0.0.1:{port}"
    nodes = []
    try:
        _suite(root, args.models)
        check = ["regress", "check", "--suite", "tflkit.toml", "--fresh"]
        local = _timed([*check, "--jobs", "2"], root)
        nodes.append(_node("--head", f"--port={port}", "--include-dashboard=false",
                           f"--ray-client-server-port={_port()}"))  # fmt: skip
        while _alive(address) < 1:
            time.sleep(0.5)
        nodes.append(_node(f"--address={address}"))
        while _alive(address) < 2:
            time.sleep(0.5)
        on_ray = _timed([*check, "--cluster", address], root)
        per_task, per_child = _overheads(address)
        items = args.models * 3
        print(json.dumps({"models": args.models, "items": items}))
        print(f"local, --jobs 2:          {local:7.1f} s")
        print(f"Ray, two nodes x 1 CPU:   {on_ray:7.1f} s   (Ray / local = {on_ray / local:.2f})")
        print(f"no-op item, Ray task:     {per_task * 1e3:7.1f} ms per round trip")
        print(f"no-op item, local child:  {per_child * 1e3:7.1f} ms per process")
    finally:
        for node in reversed(nodes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGKILL)
            node.wait()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
