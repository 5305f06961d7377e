"""The thread a subscription owns (DaemonThread) and the wait for read threads at exit."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_helpers import no_owned_threads, wait_until  # noqa: E402

from reactive_streams.spark._partitions import _thread  # noqa: E402

pytestmark = pytest.mark.spark


# -- one daemon thread runs a subscription's tasks in order ----------------------------------


def test_daemon_thread_runs_tasks_in_order_on_one_daemon_thread() -> None:
    """The subscription's executor: one daemon thread named as asked, tasks in order, a
    raising task's error in its future; after shutdown a submit is refused (as a
    ThreadPoolExecutor refuses it), queued tasks still run, or are cancelled with
    cancel_futures, and the thread ends."""
    executor = _thread.DaemonThread("rs-spark-000000000000_0")
    gate = threading.Event()
    seen: list[tuple[int, str, bool]] = []

    def task(i: int) -> int:
        current = threading.current_thread()
        seen.append((i, current.name, current.daemon))
        return i

    blocked = executor.submit(gate.wait, 5)
    futures = [executor.submit(task, i) for i in range(3)]
    failing = executor.submit(lambda: 1 // 0)
    executor.shutdown(wait=False)
    with pytest.raises(RuntimeError, match="after shutdown"):
        executor.submit(task, 99)
    gate.set()
    assert blocked.result(5) is True and [f.result(5) for f in futures] == [0, 1, 2]
    assert isinstance(failing.exception(5), ZeroDivisionError)
    assert seen == [(i, "rs-spark-000000000000_0", True) for i in range(3)]
    wait_until(no_owned_threads, 5, "the thread to end")

    cancelling = _thread.DaemonThread("rs-spark-000000000001_0")
    gate.clear()
    cancelling.submit(gate.wait, 5)
    queued = cancelling.submit(task, 7)
    cancelling.shutdown(wait=False, cancel_futures=True)
    gate.set()
    assert queued.cancelled()
    wait_until(no_owned_threads, 5, "the thread to end")


def test_a_daemon_thread_skips_a_task_whose_future_was_cancelled() -> None:
    """A task cancelled while queued never runs; the next one does."""
    executor = _thread.DaemonThread("rs-spark-000000000009_0")
    gate = threading.Event()
    ran: list[str] = []
    executor.submit(gate.wait, 5)
    skipped = executor.submit(ran.append, "skipped")
    assert skipped.cancel()
    gate.set()
    assert executor.submit(ran.append, "next").result(5) is None
    assert ran == ["next"]
    executor.shutdown()


# -- an abandoned subscription's thread ends -------------------------------------------------


def test_an_abandoned_daemon_thread_ends_when_collected() -> None:
    """A DaemonThread dropped without shutdown (an abandoned subscription's) lets its thread
    end once collected, as a ThreadPoolExecutor's worker does; the last task it ran is not
    kept alive meanwhile."""
    executor = _thread.DaemonThread("rs-spark-000000000002_0")

    class Payload:
        pass

    payload = Payload()
    kept = weakref.ref(payload)
    executor.submit(lambda p: None, payload).result(5)
    del payload
    gc.collect()
    assert kept() is None  # the idle thread does not hold its last task
    del executor
    gc.collect()
    wait_until(no_owned_threads, 5, "the thread to end")


# -- at exit, the job waits for this process's read threads only -----------------------------


def test_join_reads_waits_for_this_processs_read_threads_only() -> None:
    """main() waits, after a Ctrl-C, for the threads named after a read's tag; others (a
    thread the user started) are not waited for."""
    release, never = threading.Event(), threading.Event()
    name = f"{_thread.TAG_PREFIX}0123456789ab_0"
    read = threading.Thread(target=release.wait, args=(10,), name=name)
    other = threading.Thread(target=never.wait, args=(10,), name="someone-elses")
    read.start()
    other.start()
    try:
        assert _thread.join_reads(timeout=0.1) is False
        threading.Timer(0.2, release.set).start()
        assert _thread.join_reads(timeout=5.0) is True
        assert not read.is_alive() and other.is_alive()
    finally:
        release.set()
        never.set()
        read.join(5)
        other.join(5)
