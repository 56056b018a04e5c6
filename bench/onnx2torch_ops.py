"""Write ``converters/onnx2torch_ops.json``: the ONNX op types the onnx2torch route converts.

Run with the PyTorch route's interpreter (``tflkit converters list`` shows it):
``ENV/bin/python bench/onnx2torch_ops.py converters/onnx2torch_ops.json``. It imports onnx2torch
as the route's worker does (``converters/_onnx_torch_ops.py``: its own extra converters
registered) and lists every (domain, op type) of the converter registry, so the ONNX route can
tell a model the onnx2torch route cannot take before building that route's environment.
"""

import importlib.util
import json
import sys
from importlib.metadata import version
from pathlib import Path

# by path: converters/ holds a torch.py that would shadow torch on sys.path
_path = Path(__file__).resolve().parents[1] / "converters" / "_onnx_torch_ops.py"
_spec = importlib.util.spec_from_file_location("_onnx_torch_ops", _path)
_onnx_torch_ops = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_onnx_torch_ops)

onnx2torch = _onnx_torch_ops.import_onnx2torch()
_onnx_torch_ops.add_converters(onnx2torch)
from onnx2torch.node_converters.registry import _CONVERTER_REGISTRY  # noqa: E402

ops: dict[str, set[str]] = {}
for description in _CONVERTER_REGISTRY:
    ops.setdefault(description.domain or "ai.onnx", set()).add(description.operation_type)
table = {
    "onnx2torch": version("onnx2torch"),
    "ops": {domain: sorted(names) for domain, names in sorted(ops.items())},
}
Path(sys.argv[1]).write_text(json.dumps(table, indent=1) + "\n")
print(f"{sum(map(len, ops.values()))} op types in {len(ops)} domains")
