"""Crash bisection: the op whose inclusion makes the accelerator kill the process."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tflkit.gpu.probe_result import CrashSite, ProbeResult


class CrashNotLocated(Exception):
    """Why the crashing op could not be found (recorded as ``crash_note``)."""


def find_crash_op(
    ops: Sequence[Any],
    crashes: Callable[[Sequence[Any]], bool],
    *,
    hint: int | None = None,
) -> CrashSite:
    """Find the op whose inclusion crashes the accelerator, over prefixes of ``ops``.

    ``ops`` are a subgraph's ops in execution order (tflkit IR ``Op``); ``crashes(some_ops)``
    compiles a model made of just those ops and says whether it crashed. ``hint`` (the "Node
    N" of a Check-failed message: an id in the delegate's own graph, which equals the op index
    only when no op before it expands to several delegate nodes) is tried first and confirmed
    with two compiles; then the smallest crashing prefix is bisected (about log2(n) compiles).
    The culprit is the last op of that prefix; ``isolated`` says whether it crashes alone.
    """
    ops = list(ops)
    if not ops:
        raise CrashNotLocated("the main subgraph has no ops")
    seen: dict[int, bool] = {0: False}
    compiles = 0

    def prefix_crashes(k: int) -> bool:
        nonlocal compiles
        if k not in seen:
            compiles += 1
            seen[k] = crashes(ops[:k])
        return seen[k]

    lo, hi = 0, len(ops)  # invariant: prefix lo does not crash, prefix hi does (checked below)
    method = "bisect"
    if hint is not None and 0 <= hint < len(ops):
        if prefix_crashes(hint + 1):
            hi = hint + 1
            if prefix_crashes(hint):
                hi = hint
            else:
                lo, method = hint, "message"
        else:
            lo = hint + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if prefix_crashes(mid):
            hi = mid
        else:
            lo = mid
    if not prefix_crashes(hi):
        raise CrashNotLocated(
            "the main subgraph's ops, cut out on their own, do not crash: "
            "the crash needs more than the main subgraph"
        )
    op = ops[hi - 1]
    compiles += 1
    isolated = crashes([op])
    return CrashSite(
        op_index=hi - 1, op_type=op.type, method=method, compiles=compiles, isolated=isolated
    )


def locate_crash(
    data: bytes, result: ProbeResult, sub_model_crashes: Callable[[bytes, bool], bool]
) -> CrashSite:
    """Bisect the crash of ``result`` with the IR: every candidate is a sub-model of ``data``
    (``ir.extract_model``); ``sub_model_crashes(model_bytes, run)`` compiles one (and runs it
    when the crash happened during inference) and says whether it crashed."""
    from tflkit import ir

    try:
        model = ir.load(data)
    except Exception as exc:  # best effort: the crash finding stands without a site
        raise CrashNotLocated(f"tflkit.ir cannot load the model: {exc}") from exc
    run = result.stage == "run"  # a crash during inference needs inference to reproduce

    def crashes(ops: Sequence[Any]) -> bool:
        try:
            sub = ir.dumps(ir.extract_model(ops))
        except Exception as exc:
            raise CrashNotLocated(f"cannot cut ops {ops[0].index}..{ops[-1].index}: {exc}") from exc
        return sub_model_crashes(sub, run)

    return find_crash_op(model.main.ops, crashes, hint=result.log.fatal_node)
