"""Child process: run a model with the classic Interpreter and an external delegate ``.so``.

Arguments: ``--model M --delegate D.so
[--option K=V ...] --inputs I.npz --names N.json --result R.json --outputs O.npz``. A delegate
can abort its process, hence the child. The result JSON is rewritten after each stage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.proc.result_file import write_result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tflkit.delegates._delegate_worker")
    for flag in ("--model", "--delegate", "--inputs", "--names", "--result", "--outputs"):
        parser.add_argument(flag, type=Path, required=True)
    parser.add_argument("--option", action="append", default=[])
    args = parser.parse_args(argv)
    state: dict[str, Any] = {"stage": "load_delegate"}
    write_result(args.result, state)
    from ai_edge_litert.interpreter import Interpreter, load_delegate

    options = dict(item.split("=", 1) for item in args.option)
    try:
        delegate = load_delegate(str(args.delegate), options)
    except Exception as exc:
        state.update(stage="done", error=f"load_delegate failed: {exc}".splitlines()[0])
        write_result(args.result, state)
        return 0
    state["stage"] = "compile"
    write_result(args.result, state)
    start = time.perf_counter()
    try:
        interpreter = Interpreter(model_path=str(args.model), experimental_delegates=[delegate])
        interpreter.allocate_tensors()
    except Exception as exc:
        state.update(stage="done", error=f"compile failed: {exc}".splitlines()[0])
        write_result(args.result, state)
        return 0
    state.update(compile_seconds=time.perf_counter() - start, stage="run")
    write_result(args.result, state)
    names = json.loads(args.names.read_text())
    details = {d["name"]: d for d in interpreter.get_input_details()}
    outs = interpreter.get_output_details()
    arrays: dict[str, np.ndarray] = {}
    times = []
    with np.load(args.inputs, allow_pickle=False) as npz:
        count = len(npz.files) // max(len(names), 1)
        for k in range(count):
            start = time.perf_counter()
            for i, name in enumerate(names):
                interpreter.set_tensor(details[name]["index"], npz[f"s{k}_in_{i}"])
            interpreter.invoke()
            values = [np.array(interpreter.get_tensor(d["index"])) for d in outs]
            times.append(time.perf_counter() - start)
            arrays.update({f"s{k}_out_{j}": v for j, v in enumerate(values)})
    np.savez(args.outputs, **arrays)
    state.update(
        stage="done", sets=count, infer_seconds=times, output_names=[d["name"] for d in outs]
    )
    write_result(args.result, state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
