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
path on every node (a shared checkout).

Ctrl-C stops every task through a flag (:class:`CancelFlag`, an actor on the
head node that each task watches), not ``ray.cancel``: Ray 2.x's cancel races the reply of a
task that is just finishing and aborts the driver in its C++ core ("Tried to complete task that
was not pending"), a silent exit 1 instead of tflkit's 130. A task that sees the flag interrupts
its own main thread, which kills its item child as it unwinds, and returns; the driver waits for
them (a grace period) and disconnects.
"""

from __future__ import annotations

import _thread
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from tflkit.delegates.base import on_gpu
from tflkit.errors import UsageError
from tflkit.proc.interrupts import reinstall_handlers, signal_interrupt
from tflkit.regress.items import ALL_RUNNERS, RESIDENCY, WorkItem
from tflkit.report.regress_report import ModelResult

__all__ = ["GPU_RESOURCE", "CancelFlag", "connect", "needs_gpu", "run_items_on_ray"]

GPU_RESOURCE = "tflkit_gpu"
#: The resource Ray gives the head node alone.
HEAD_RESOURCE = "node:__internal_head__"
#: How often a task reads the cancel flag (seconds): the delay from Ctrl-C to its child's end.
WATCH_EVERY = 0.5
#: How long the driver waits for its tasks to unwind after Ctrl-C before it disconnects anyway.
GRACE = 10.0


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
        cause = exc.__cause__ or exc.__context__  # Ray's own message names only the address
        if "InvalidAuthToken" in str(cause):  # Ray 2.60's GCS, in the cause's traceback text
            exc = ConnectionError(
                "the cluster uses token authentication: set RAY_AUTH_MODE=token and its token "
                "(RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH)"
            )
        raise UsageError(f"cannot connect to the Ray cluster at {address}: {exc}") from None
    reinstall_handlers()  # ray.init put its own SIGTERM handler in place of tflkit's
    return ray


class CancelFlag:
    """Set once by the driver when the run is interrupted; read by every task (a Ray actor)."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


RunChild = Callable[[str, WorkItem, float], tuple[ModelResult, bool]]


def _flag_on_head(ray: Any) -> Any:
    """A :class:`CancelFlag` on the head node, which lives as long as the cluster (a worker
    node may be killed mid-run; on loopback the driver's own node may be any of them)."""
    resources = {HEAD_RESOURCE: 0.001} if ray.cluster_resources().get(HEAD_RESOURCE) else {}
    return ray.remote(CancelFlag).options(num_cpus=0, resources=resources).remote()


def _is_set(ray: Any, flag: Any) -> bool:
    """Whether ``flag`` is set; ``False`` when it cannot be read (its node is gone)."""
    try:
        return bool(ray.get(flag.is_set.remote(), timeout=30))
    except Exception:
        return False


def _task(
    run: RunChild, suite: str, raw: str, timeout: float, flag: Any
) -> tuple[dict[str, Any] | None, bool, str]:
    """The Ray task: ``run`` the item in a child on this node; (result, lost, node), the result
    ``None`` when the run was cancelled (``flag`` set) before it finished."""
    import ray

    node = ray.get_runtime_context().get_node_id()[:12]
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(ray, flag, stop), daemon=True)
    try:
        if _is_set(ray, flag):
            return None, False, node
        watcher.start()
        result, lost = run(suite, WorkItem.from_json(json.loads(raw)), timeout)
    except KeyboardInterrupt:  # the watcher saw the flag: the child is gone with the unwinding
        return None, False, node
    finally:
        stop.set()
    result.nodes = [node]
    return result.to_json(), lost, node


def _watch(ray: Any, flag: Any, stop: threading.Event) -> None:
    """Interrupt the task's main thread once ``flag`` is set (until ``stop``)."""
    while not stop.wait(WATCH_EVERY):
        if _is_set(ray, flag) and not stop.is_set():
            _thread.interrupt_main()
            return


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
    flag = _flag_on_head(ray)
    remote = ray.remote(_task)
    refs: dict[Any, WorkItem] = {}
    try:
        for item in items:
            resources = {GPU_RESOURCE: 1} if has_gpu and needs_gpu(item) else {}
            ref = remote.options(
                num_cpus=1,
                resources=resources,
                max_retries=max(tries - 1, 0),
                scheduling_strategy="SPREAD",
            ).remote(run, suite, dumps(item, indent=None), timeout, flag)
            refs[ref] = item
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
    except KeyboardInterrupt as exc:
        _cancel(ray, flag, list(refs))
        raise signal_interrupt(exc) from None  # Ray's wait re-raises a signal's as its own
    except BaseException:
        _cancel(ray, flag, list(refs))
        raise


def _cancel(ray: Any, flag: Any, refs: Sequence[Any]) -> None:
    """Set the cancel flag and give the tasks :data:`GRACE` seconds to unwind (each kills its
    child as it does); what is left ends with the driver's job."""
    try:
        ray.get(flag.set.remote(), timeout=GRACE)
    except Exception:  # the flag's node is gone: the tasks' watchers have stopped too
        return
    deadline = time.monotonic() + GRACE
    left = list(refs)
    while left and time.monotonic() < deadline:
        _, left = ray.wait(left, num_returns=len(left), timeout=0.5)
