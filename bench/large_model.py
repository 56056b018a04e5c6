"""Generate a large synthetic ``.tflite`` (default: ~210 MB, ~2,400 ops) for the benchmarks.

A chain of FULLY_CONNECTED layers with distinct random 256x256 weights, each followed by an ADD
of a distinct bias and a RELU: big buffers and many small ops, like a real large model.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from tflkit import ir
from tflkit.ir.builder import OpBuilder

WIDTH = 256


def build_large_model(layers: int = 800, seed: int = 0) -> ir.Model:
    """``layers`` x (FULLY_CONNECTED, ADD, RELU) on a [1, 256] float32 input."""
    rng = np.random.default_rng(seed)
    model = ir.Model(description="tflkit benchmark: large synthetic model")
    graph = model.add_subgraph("main")
    x = graph.new_tensor("input", (1, WIDTH), np.float32)
    graph.inputs = [x]
    build = OpBuilder(graph, prefix="layer")
    fc_options = ir.schema.fb.FullyConnectedOptionsT
    for i in range(layers):
        weights = (rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / 16).astype(np.float32)
        bias = rng.standard_normal((1, WIDTH), dtype=np.float32)
        x = build.FULLY_CONNECTED(x, weights, None, options=fc_options(), name=f"fc{i}")
        x = build.ADD(x, bias, options=ir.schema.fb.AddOptionsT(), name=f"add{i}")
        x = build.RELU(x, name=f"relu{i}")
    graph.outputs = [x]
    model.signatures.append(
        ir.SignatureDef("serving_default", graph, {"input": graph.inputs[0]}, {"output": x})
    )
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("output", type=Path)
    parser.add_argument("--layers", type=int, default=800)
    args = parser.parse_args()
    model = build_large_model(args.layers)
    ir.save(model, args.output)
    ops = sum(len(sg.ops) for sg in model.subgraphs)
    print(f"{args.output}: {args.output.stat().st_size / 1e6:.1f} MB, {ops} ops")


if __name__ == "__main__":
    main()
