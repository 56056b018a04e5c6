"""Build the bundled source model ``tflkit/examples/tiny_classifier.onnx`` (the demo converts it).

The ONNX twin of ``tiny_classifier.tflite``: conv, depthwise conv, pointwise conv, global pooling,
a dense head and a LogSoftmax, with a dynamic batch (``N``) that ``convert`` fixes. Seeded weights;
the bytes are the same on every run. Needs the ``onnx`` package (the ONNX converter environment
has it):

    python=$(tflkit converters list --json | python -c \
        "import json,sys; print(json.load(sys.stdin)['routes']['onnx']['ready'])")/bin/python
    $python tests/corpus/example_onnx.py tflkit/examples/tiny_classifier.onnx
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

#: standard deviation of the dense head's weights: at the fan-in scale the log-probabilities are
#: near-uniform on every photograph and ``validate`` calls them "not meaningful"
HEAD_STDDEV = 10.0


def build_example() -> bytes:
    """The example's ONNX bytes."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)

    def weight(name: str, *shape: int, std: float | None = None) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        scale = 1.0 / np.sqrt(fan_in) if std is None else std
        value = rng.normal(0.0, scale, shape).astype(np.float32)
        return numpy_helper.from_array(value, name)

    inits = [
        weight("c1_w", 8, 3, 3, 3),
        weight("c1_b", 8),
        weight("dw_w", 8, 1, 3, 3),
        weight("dw_b", 8),
        weight("pw_w", 16, 8, 1, 1),
        weight("pw_b", 16),
        weight("fc_w", 10, 16, std=HEAD_STDDEV),
        weight("fc_b", 10),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array(6.0, np.float32), "six"),
    ]
    nodes = [
        helper.make_node(
            "Conv", ["image", "c1_w", "c1_b"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]
        ),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "dw_w", "dw_b"], ["dw"], group=8, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["dw", "zero", "six"], ["r2"]),
        helper.make_node("Conv", ["r2", "pw_w", "pw_b"], ["pw"]),
        helper.make_node("Relu", ["pw"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["pool"]),
        helper.make_node("Flatten", ["pool"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("LogSoftmax", ["logits"], ["log_probs"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_classifier",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 32, 32])],
        [helper.make_tensor_value_info("log_probs", TensorProto.FLOAT, ["N", 10])],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13)],
        producer_name="tflkit tests/corpus/example_onnx.py",
        ir_version=8,
    )
    onnx.checker.check_model(model)
    return model.SerializeToString()


def main() -> None:
    target = Path(sys.argv[1])
    target.write_bytes(build_example())
    print(f"wrote {target} ({target.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
