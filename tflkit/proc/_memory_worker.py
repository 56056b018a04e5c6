"""Child process: one CPU inference of a model at given input shapes, to measure its memory.

Started through :func:`tflkit.proc.worker.python_command` as ``main([MODEL, SHAPES.json,
SIGNATURE?])``: ``SHAPES`` maps feed names (signature input names, or tensor names for a model
without signatures) to shapes.
Prints ``base_kb: N`` (the resident set once the runtime is imported, before the model is
loaded) and ``peak_kb: N`` (the process's peak resident set) after the inference; the parent
(:mod:`tflkit.validation.budget`) watches the resident set and kills this process at its budget,
so a model that would eat the machine is stopped here, never by the kernel's OOM killer.
"""

from __future__ import annotations

import json
import re
import resource
import sys
from pathlib import Path


def _kb() -> int:
    """The peak resident set so far (kB): this process image's high-water mark (``VmHWM``).

    Not ``getrusage``'s ``ru_maxrss``: Linux keeps it across ``execve``, so a child forked from a
    parent holding 1.3 GB (TensorFlow imported) starts with the parent's figure (measured:
    1,355,907,072 bytes "needed" for a 67 MB inference when started from a pytest worker).
    """
    found = re.search(r"^VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    return int(found.group(1)) if found else int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _now_kb() -> int:
    """The resident set now (kB): the base, without the imports' passing peaks."""
    found = re.search(r"^VmRSS:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    return int(found.group(1)) if found else _kb()


def main(argv: list[str]) -> int:
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    print(f"base_kb: {_now_kb()}", flush=True)
    shapes = json.loads(Path(argv[1]).read_text())
    interpreter = Interpreter(model_path=argv[0])
    signatures = interpreter.get_signature_list()
    try:
        if signatures:
            key = argv[2] if len(argv) > 2 else next(iter(signatures))
            runner = interpreter.get_signature_runner(key)
            details = runner.get_input_details()
            feed = {n: np.zeros(shapes[n], details[n]["dtype"]) for n in details}
            runner(**feed)
        else:
            details = interpreter.get_input_details()
            for d in details:
                interpreter.resize_tensor_input(d["index"], shapes[d["name"]], strict=False)
            interpreter.allocate_tensors()
            for d in details:
                interpreter.set_tensor(d["index"], np.zeros(shapes[d["name"]], d["dtype"]))
            interpreter.invoke()
    except Exception as exc:
        print(f"error: {' '.join(str(exc).split())[:300]}", flush=True)
        print(f"peak_kb: {_kb()}", flush=True)
        return 1
    print(f"peak_kb: {_kb()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
