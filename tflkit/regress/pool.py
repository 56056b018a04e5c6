"""Run a suite's work items ``workers`` at a time on this machine, each in a child process.

Each item runs in a thread that waits on its child (:func:`tflkit.proc.worker.run_worker`); a
finished item is handed to ``done`` at once (the results file keeps it). On an interrupt
(Ctrl-C, SIGTERM) in the main thread nothing new starts, every running child's session is
killed, the threads end, and no result of a killed child is kept; the interrupt propagates.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

__all__ = ["run_items"]

T = TypeVar("T")
R = TypeVar("R")


def run_items(
    items: Sequence[T],
    run: Callable[[T], tuple[R, bool]],
    done: Callable[[T, R, bool], None],
    *,
    workers: int,
) -> None:
    """``run(item)`` -> (result, lost) for every item, ``workers`` at a time; ``done(item,
    result, lost)`` as each finishes, under one lock, never after an interrupt."""
    if not items:
        return
    from tflkit.proc.worker import kill_sessions

    stop = threading.Event()
    lock = threading.Lock()

    def one(item: T) -> None:
        if stop.is_set():
            return
        result, lost = run(item)
        with lock:
            if not stop.is_set():
                done(item, result, lost)

    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(items))))
    futures: list[Future[None]] = []
    try:
        futures += [pool.submit(one, item) for item in items]
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            for future in finished:
                future.result()  # an error in tflkit itself: stop the suite
    except BaseException:
        with lock:
            stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        while not all(f.done() for f in futures):  # a child spawned as the stop came dies too
            kill_sessions()
            time.sleep(0.05)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
