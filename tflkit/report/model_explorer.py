"""Per-op values as Google Model Explorer node data, to see them on the graph.

The file is Model Explorer's "model node data" JSON: graph id -> {"results": {node key ->
{"value", "bgColor"?}}, "gradient"?: [...], "thresholds"?: [...]}. Graph ids are the subgraph
names of the ``.tflite`` (``subgraph_N`` when unnamed) and node keys are each op's first output
tensor name, which Model Explorer matches against the node's output tensor names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tflkit.fsio import write_atomic
from tflkit.ir import Model, Op, Subgraph
from tflkit.jsonable import dumps, plain

if TYPE_CHECKING:
    from tflkit.report.check_report import CheckReport


@dataclass(frozen=True)
class NodeValue:
    """The value shown on one node, and optionally its colors."""

    value: float | int | str
    bg_color: str | None = None
    text_color: str | None = None

    def to_json(self) -> dict[str, Any]:
        result: dict[str, Any] = {"value": plain(self.value)}
        if self.bg_color:
            result["bgColor"] = self.bg_color
        if self.text_color:
            result["textColor"] = self.text_color
        return result


def graph_id(subgraph: Subgraph) -> str:
    return subgraph.name or f"subgraph_{subgraph.index}"


def node_key(op: Op) -> str:
    """The key Model Explorer matches to an op: its first output tensor's name."""
    return op.outputs[0].name if op.outputs else f"{op.type}_{op.index}"


def node_data(
    model: Model,
    values: Mapping[Op, NodeValue],
    *,
    gradient: Sequence[tuple[float, str]] | None = None,
    thresholds: Sequence[tuple[float, str]] | None = None,
) -> dict[str, Any]:
    """The node-data JSON object for ``values`` (ops of any subgraph of ``model``)."""
    data: dict[str, Any] = {}
    for subgraph in model.subgraphs:
        results = {node_key(op): values[op].to_json() for op in subgraph.ops if op in values}
        if not results:
            continue
        graph: dict[str, Any] = {"results": results}
        if gradient:
            graph["gradient"] = [{"stop": stop, "bgColor": color} for stop, color in gradient]
        if thresholds:
            graph["thresholds"] = [{"value": v, "bgColor": color} for v, color in thresholds]
        data[graph_id(subgraph)] = graph
    return data


def write_node_data(path: str | Path, data: Mapping[str, Any]) -> Path:
    """Write node data JSON atomically."""
    return write_atomic(path, [dumps(data).encode()])


GPU_COLOR = "#c8e6c9"
CPU_COLOR = "#ffcdd2"


def check_node_data(report: CheckReport, model: Model) -> dict[str, Any]:
    """Node data of a ``check`` report: "GPU", or "CPU: reason codes" (or the op's status:
    "not_taken" outside the partition the delegate takes, "blocked" when compilation fails)."""
    verdicts = {(op.subgraph, op.index): op for op in report.ops}
    values: dict[Op, NodeValue] = {}
    for sg_index, subgraph in enumerate(model.subgraphs):
        for op in subgraph.ops:
            verdict = verdicts.get((sg_index, op.index))
            if verdict is None:
                continue
            if verdict.on_gpu:
                values[op] = NodeValue("GPU", bg_color=GPU_COLOR)
            else:
                codes = ",".join(r.code for r in verdict.reasons) or verdict.status
                values[op] = NodeValue(f"CPU: {codes}", bg_color=CPU_COLOR)
    return node_data(model, values)
