"""Run a suite's work items as Ray tasks (``--cluster ray://HOST:PORT``, ``HOST:PORT`` or
``auto``; ``pip install tflkit[ray]``).

Each item is one task that runs the item in a child process on its node, as a local run does
(``run``: :func:`tflkit.regress.suite.run_child`), so a crash of the GPU accelerator takes down that
child only. Resources: one CPU per task; a GPU-runner item (and a check's residency item, which
probes the accelerator) also takes one ``tflkit_gpu``, a custom resource each node declares
(``ray start --resources='{"tflkit_gpu": 1}'``), so the software GPU of a node runs one model at
a time. Results come back as they finish (``done`` keeps each at once). A task whose worker or
node dies is retried by Ray on a live node, up to ``tries`` times in all; then the item is
``lost`` (an error result, rerun by the next run). The suite file and models must be at the same
path on every node (a shared checkout). Ctrl-C cancels every task (each task's child is killed
with it) and disconnects.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from tflkit.delegates.base import on_gpu
from tflkit.errors import UsageError
from tflkit.regress.items import ALL_RUNNERS, RESIDENCY, WorkItem
from tflkit.report.regress_report import ModelResult

__all__ = ["GPU_RESOURCE", "connect", "needs_gpu", "run_items_on_ray"]

GPU_RESOURCE = "tflkit_gpu"


def needs_gpu(item: WorkItem) -> bool:
    """Whether the item uses the GPU accelerator (a GPU runner, a probe, a whole record)."""
    if item.runner in (RESIDENCY, ALL_RUNNERS):  # a probe, or every runner of a model
        return True
    return on_gpu(item.runner)


def connect(address: str) -> Any:
    """``ray.init`` on ``address`` (a usage error when Ray is missing or the cluster is not
    there); the ``ray`` module."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError:
        raise UsageError("--cluster needs Ray: pip install 'tflkit[ray]'") from None
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UsageError(f"cannot connect to the Ray cluster at {address}: {exc}") from None
    return ray


RunChild = Callable[[str, WorkItem, float], tuple[ModelResult, bool]]


def _task(run: RunChild, suite: str, raw: str, timeout: float) -> tuple[dict[str, Any], bool, str]:
    """The Ray task: ``run`` the item in a child on this node; (result, lost, node)."""
    import ray

    node = ray.get_runtime_context().get_node_id()[:12]
    result, lost = run(suite, WorkItem.from_json(json.loads(raw)), timeout)
    result.nodes = [node]
    return result.to_json(), lost, node


def _lost(item: WorkItem, tries: int, exc: BaseException) -> ModelResult:
    why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    error = f"lost: {item.entry} ({item.runner}) did not come back after {tries} tries: {why}"
    return ModelResult(item.model, item.baseline, "error", error=error)


def run_items_on_ray(
    ray: Any,
    items: Sequence[WorkItem],
    suite: str,
    run: RunChild,
    done: Callable[[WorkItem, ModelResult, bool], None],
    *,
    timeout: float,
    tries: int = 3,
) -> None:
    """Every item as a task that calls ``run(suite, item, timeout)`` on its node
    (:func:`tflkit.regress.suite.run_child`); ``done(item, result, lost)`` as each comes back."""
    from tflkit.jsonable import dumps

    if not items:
        return
    has_gpu = ray.cluster_resources().get(GPU_RESOURCE, 0) > 0
    remote = ray.remote(_task)
    refs: dict[Any, WorkItem] = {}
    for item in items:
        resources = {GPU_RESOURCE: 1} if has_gpu and needs_gpu(item) else {}
        ref = remote.options(
            num_cpus=1,
            resources=resources,
            max_retries=max(tries - 1, 0),
            scheduling_strategy="SPREAD",
        ).remote(run, suite, dumps(item, indent=None), timeout)
        refs[ref] = item
    try:
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)
            for ref in ready:
                item = refs[ref]
                try:
                    data, lost, _node = ray.get(ref)
                    result = ModelResult.from_json(data)
                except ray.exceptions.RayError as exc:
                    result, lost = _lost(item, tries, exc), True
                done(item, result, lost)
    except BaseException:
        _cancel(ray, list(refs))
        raise


def _cancel(ray: Any, refs: Sequence[Any]) -> None:
    """Cancel every task: an interrupt in each (its child is killed as the task unwinds), then
    force after a grace period."""
    for ref in refs:
        try:
            ray.cancel(ref, force=False)
        except Exception:  # finished already
            continue
    deadline = time.monotonic() + 10.0
    left = list(refs)
    while left and time.monotonic() < deadline:
        _, left = ray.wait(left, num_returns=len(left), timeout=0.5)
    for ref in left:
        try:
            ray.cancel(ref, force=True)
        except Exception:
            continue
