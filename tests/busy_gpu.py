"""A busy machine for the GPU: another process compiling and running models on the GPU
accelerator in a loop, as a parallel test worker or CI job does. On the software GPU this is
the load under which the LiteRT-LM engine's GPU numbers varied from run to run
(``tflkit.delegates.litert_lm``); the tests and ``bench/llm_bundles.py --calibrate --busy`` use
it to hold that fixed."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

_GPU_LOOP = """
import sys
from ai_edge_litert.compiled_model import CompiledModel
from ai_edge_litert.hardware_accelerator import HardwareAccelerator as HA
from ai_edge_litert.options import Options
print("ready", flush=True)
while True:
    for path in sys.argv[1:]:
        cm = CompiledModel.from_file(path, options=Options(hardware_accelerators=HA.GPU | HA.CPU))
        for _ in range(3):
            cm.run_by_index(0, cm.create_input_buffers(0), cm.create_output_buffers(0))
"""


@contextlib.contextmanager
def busy_gpu(models: list[Path]) -> Iterator[subprocess.Popen]:
    """Another process compiling and running ``models`` on the GPU accelerator, for the block;
    it has started when the block begins and is gone when it ends."""
    child = subprocess.Popen(
        [sys.executable, "-c", _GPU_LOOP, *map(str, models)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # into its first compilation
        yield child
    finally:
        child.kill()
        child.wait()
