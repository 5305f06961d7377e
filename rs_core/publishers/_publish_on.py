"""``publish_on``: the asynchronous boundary; signals move to an executor via a bounded queue."""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Generic, TypeVar, final

from reactive_streams._drain import DrainSubscription, OnExecutor
from reactive_streams._prefetch import PrefetchQueue
from reactive_streams._subscription import require_publisher, require_subscriber
from reactive_streams.api import Publisher, Subscriber

__all__ = ["PublishOnPublisher", "publish_on"]

T = TypeVar("T")


@final
class PublishOnPublisher(Generic[T]):
    """Re-emits ``upstream`` on ``executor``; at most ``prefetch`` elements wait in between.

    Upstream is asked for ``prefetch`` elements once the subscriber first has demand, and
    for ``limit`` more (75% of ``prefetch`` by default) each time that many were delivered
    downstream, so a slow subscriber slows the producer and the queue never holds more than
    ``prefetch``. Every request upstream is made on the executor, so a synchronous upstream
    (a generator that blocks) runs there, never on the thread that subscribed.
    ``on_next``/``on_error``/``on_complete`` run on the executor (one task at a time per
    subscription, at most ``batch`` elements per task); ``on_subscribe`` runs on the thread
    that calls ``subscribe``. Cancel cancels upstream and drops the queue (§3.12, §3.13).
    """

    __slots__ = ("_limit", "_policy", "_prefetch", "_upstream")

    def __init__(
        self,
        upstream: Publisher[T],
        executor: Executor,
        *,
        prefetch: int = 256,
        limit: int | None = None,
        batch: int = 1024,
    ) -> None:
        require_publisher(upstream, "publish_on()")
        policy = OnExecutor(executor, batch)  # validates executor (TypeError)
        PrefetchQueue[T](prefetch, limit)  # validates prefetch and limit now, not at subscribe
        if type(batch) is not int or batch <= 0:
            raise ValueError(f"batch must be a positive int, got {batch!r}")
        self._upstream = upstream
        self._policy = policy  # immutable: shared by every subscription
        self._prefetch = prefetch
        self._limit = limit

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        queue: PrefetchQueue[T] = PrefetchQueue(self._prefetch, self._limit, lazy=True)
        subscription = DrainSubscription(subscriber, queue, self._policy, name="publish_on")
        try:
            self._upstream.subscribe(queue)
        except Exception as exc:  # a broken upstream (§1.9): fail downstream, never raise;
            queue.fail_upstream(exc)  # §3.13: cancel what it may have subscribed us to
        subscription.start()


def publish_on(publisher: Publisher[T], executor: Executor, *, prefetch: int = 256) -> Publisher[T]:
    """Deliver ``publisher``'s signals on ``executor`` through a queue bounded by ``prefetch``.

    Args:
        publisher: the upstream.
        executor: where ``on_next``, ``on_error`` and ``on_complete`` run.
        prefetch: the most elements requested ahead of delivery (replenished at 75%).

    Returns:
        A Publisher; each Subscriber gets its own queue and upstream subscription.

    Example:
        >>> from concurrent.futures import ThreadPoolExecutor
        >>> from reactive_streams.adapters.iterables import from_iterable, to_iterator
        >>> with ThreadPoolExecutor(1) as pool:
        ...     list(to_iterator(publish_on(from_iterable(range(3)), pool)))
        [0, 1, 2]
    """
    return PublishOnPublisher(publisher, executor, prefetch=prefetch)
