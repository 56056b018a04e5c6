"""Child process: build, allocate and invoke a model once on the CPU interpreter (zeros in).

Arguments: ``MODEL``. Prints ``stage: ...`` before each step so
the parent can say where a native crash happened; exit 0 when every step ran, 1 with a
``error: ...`` line when LiteRT raised a Python exception (not a crash: the caller's own run will
see and report the same exception).

It starts the interpreter itself, the one exception to :mod:`tflkit.delegates.litert_cpu`
starting every CPU interpreter: ``proc/`` sits below ``delegates/`` (whose runners spawn through
it), so importing the runner module here would make the two packages import each other. It
tries the resolvers of the runner's ``"xnnpack"`` and ``"reference"`` kernels in turn.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    data = Path(argv[0]).read_bytes()
    for resolver in (OpResolverType.BUILTIN, OpResolverType.BUILTIN_REF):
        try:
            print(f"stage: load ({resolver.name})", flush=True)
            interpreter = Interpreter(model_content=data, experimental_op_resolver_type=resolver)
            print(f"stage: allocate ({resolver.name})", flush=True)
            interpreter.allocate_tensors()
            for detail in interpreter.get_input_details():
                shape = [int(d) for d in detail["shape"]]
                interpreter.set_tensor(detail["index"], np.zeros(shape, detail["dtype"]))
            print(f"stage: invoke ({resolver.name})", flush=True)
            interpreter.invoke()
        except Exception as exc:
            print(f"error: {' '.join(str(exc).split())[:300]}", flush=True)
            return 1
    print("stage: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
