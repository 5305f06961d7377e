"""The thread a subscription owns: a one-thread daemon executor, and the wait for this
process's read threads before it exits. Named after the subscription's tag (``rs-spark-…``).
"""

from __future__ import annotations

import queue
import re
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from reactive_streams.spark._partitions._common import TAG_PREFIX

__all__ = ["DaemonThread", "join_reads"]

_Tasks = queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None]


class DaemonThread(Executor):
    """One daemon thread that runs the tasks submitted to it in order: a subscription's own
    thread (docs/spark.md, "Exiting").

    Not a ``ThreadPoolExecutor``, whose workers the interpreter joins at exit: a program
    ending while its read waits on a partition would wait for Spark to finish it. The thread
    is named ``name`` (``join_reads`` finds it) and holds only the task queue, so an abandoned
    subscription is collected, and its thread then ends. ``submit`` and ``shutdown`` may be
    called from any thread (under ``_lock``).
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: _Tasks = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._shut = False
        weakref.finalize(self, self._tasks.put, None)  # collected: the thread ends

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._tasks.put((future, lambda: fn(*args, **kwargs)))
            if self._thread is None:  # under _lock: one thread, started once
                self._thread = threading.Thread(
                    target=_work, args=(self._tasks,), name=self._name, daemon=True
                )
                self._thread.start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more tasks; the thread ends after those already queued (``cancel_futures``
        cancels them instead, as ``ThreadPoolExecutor`` does)."""
        dropped: list[Future[Any]] = []
        with self._lock:
            self._shut = True
            thread = self._thread
            if cancel_futures:
                while True:
                    try:
                        task = self._tasks.get_nowait()
                    except queue.Empty:
                        break
                    if task is not None:
                        dropped.append(task[0])
            self._tasks.put(None)
        for future in dropped:  # outside the lock: cancel() runs the futures' callbacks
            future.cancel()
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()


def _work(tasks: _Tasks) -> None:
    """A DaemonThread's loop, until ``None``: shutdown, or its executor collected."""
    while (task := tasks.get()) is not None:
        _run_task(*task)
        # Not kept while waiting for the next: the drain it ran holds the subscription,
        # which an abandoned subscriber's collection (and its reader's finalizer) needs.
        del task


def _run_task(future: Future[Any], call: Callable[[], Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = call()
    except BaseException as exc:  # as a ThreadPoolExecutor worker: into the future
        future.set_exception(exc)
    else:
        future.set_result(result)


def join_reads(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the threads of this process's reads (each named
    after its tag) to end; True if none is left. For a process about to exit after a cancel:
    a read still blocked in Spark when the interpreter shuts down leaves its iterators to be
    collected after pyspark's own threads have gone (Connect then prints a traceback)."""
    deadline = time.monotonic() + timeout
    owned = re.compile(re.escape(TAG_PREFIX) + r"[0-9a-f]{12}_\d+")
    for thread in threading.enumerate():
        if owned.fullmatch(thread.name):
            thread.join(max(0.0, deadline - time.monotonic()))
    return not any(owned.fullmatch(t.name) for t in threading.enumerate())
