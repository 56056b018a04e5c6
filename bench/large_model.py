"""Generate a large synthetic ``.tflite`` (default: ~210 MB, ~2,400 ops) for the benchmarks.

A chain of FULLY_CONNECTED layers with distinct random 256x256 weights, each followed by an ADD
of a distinct bias and a RELU: big buffers and many small ops, like a real large model.

``--gigabytes G`` makes a model of about G GB instead: 4096x4096 weights (64 MiB each), as many
layers as it takes, and a LOG_SOFTMAX at the end (an op ``tflkit rewrite`` replaces, so the
rewrite has something to do). Over 2 GB it is saved in LiteRT's large-model layout (buffer data
after the flatbuffer, ``Buffer.offset``/``size``); ``--external`` asks for that layout at any
size.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from tflkit import ir
from tflkit.ir.builder import OpBuilder

WIDTH = 256


#: Width of the layers of ``--gigabytes`` models (a 4096x4096 float32 weight is 64 MiB).
WIDE = 4096


def layers_for(gigabytes: float, width: int = WIDE) -> int:
    """How many ``width`` x ``width`` float32 layers make about ``gigabytes`` GB."""
    return max(1, math.ceil(gigabytes * 1e9 / (width * width * 4)))


def build_large_model(
    layers: int = 800, seed: int = 0, *, width: int = WIDTH, log_softmax: bool = False
) -> ir.Model:
    """``layers`` x (FULLY_CONNECTED, ADD, RELU) on a [1, width] float32 input, then a
    LOG_SOFTMAX if asked."""
    rng = np.random.default_rng(seed)
    model = ir.Model(description="tflkit benchmark: large synthetic model")
    graph = model.add_subgraph("main")
    x = graph.new_tensor("input", (1, width), np.float32)
    graph.inputs = [x]
    build = OpBuilder(graph, prefix="layer")
    fc_options = ir.schema.fb.FullyConnectedOptionsT
    scale = np.float32(16 * math.sqrt(width / WIDTH))  # 16 at width 256, as before
    for i in range(layers):
        weights = rng.standard_normal((width, width), dtype=np.float32)
        weights /= scale
        bias = rng.standard_normal((1, width), dtype=np.float32)
        x = build.FULLY_CONNECTED(x, weights, None, options=fc_options(), name=f"fc{i}")
        x = build.ADD(x, bias, options=ir.schema.fb.AddOptionsT(), name=f"add{i}")
        x = build.RELU(x, name=f"relu{i}")
    if log_softmax:
        x = build.LOG_SOFTMAX(x, options=ir.schema.fb.LogSoftmaxOptionsT(), name="log_softmax")
    graph.outputs = [x]
    model.signatures.append(
        ir.SignatureDef("serving_default", graph, {"input": graph.inputs[0]}, {"output": x})
    )
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("output", type=Path)
    parser.add_argument("--layers", type=int, default=800)
    parser.add_argument(
        "--gigabytes",
        type=float,
        help=f"about this many GB instead: {WIDE}x{WIDE} layers (--layers is ignored)",
    )
    parser.add_argument(
        "--log-softmax",
        action="store_true",
        help="end in a LOG_SOFTMAX (an op the GPU rejects; the --gigabytes model always does)",
    )
    parser.add_argument(
        "--external",
        action="store_true",
        help="buffer data after the flatbuffer (LiteRT's large-model layout) at any size",
    )
    args = parser.parse_args()
    if args.gigabytes:
        model = build_large_model(layers_for(args.gigabytes), width=WIDE, log_softmax=True)
    else:
        model = build_large_model(args.layers, log_softmax=args.log_softmax)
    ir.save(model, args.output, external_buffers=True if args.external else None)
    ops = sum(len(sg.ops) for sg in model.subgraphs)
    layout = "buffers after the flatbuffer" if ir.load(args.output).appended_buffers else "inline"
    print(f"{args.output}: {args.output.stat().st_size / 1e6:.1f} MB, {ops} ops, {layout}")


if __name__ == "__main__":
    main()
