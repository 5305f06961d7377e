"""share over a Spark read: one read feeds two subscribers, the slower one pacing it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_helpers import sample  # noqa: E402

from reactive_streams import Publisher, Subscriber, Subscription, share  # noqa: E402
from reactive_streams.publishers._share import SharePublisher  # noqa: E402
from reactive_streams.spark import from_dataframe  # noqa: E402
from reactive_streams.testing import RecordingSubscriber  # noqa: E402

pytestmark = pytest.mark.spark


class _Requests:
    """The requests the share makes of the read, added up (from any thread)."""

    def __init__(self, source: Publisher[Any]) -> None:
        self._source = source
        self._lock = threading.Lock()
        self.total = 0
        self.subscriptions = 0

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.subscriptions += 1  # owned: the one connection subscribes once, on one thread
        meter = self

        class Counted:
            def __init__(self, inner: Subscription) -> None:
                self._inner = inner

            def request(self, n: int) -> None:
                with meter._lock:
                    meter.total += n
                self._inner.request(n)

            def cancel(self) -> None:
                self._inner.cancel()

        class Counting:
            def on_subscribe(self, subscription: Subscription) -> None:
                subscriber.on_subscribe(Counted(subscription))

            def on_next(self, element: Any) -> None:
                subscriber.on_next(element)

            def on_error(self, error: Exception) -> None:
                subscriber.on_error(error)

            def on_complete(self) -> None:
                subscriber.on_complete()

        self._source.subscribe(Counting())


def test_two_subscribers_one_ten_times_slower_both_get_every_row_in_order(session: Any) -> None:
    """One read, shared: the fast subscriber asks 10 rows a step, the slow one 1; both get
    every row of collect() in order, the read is subscribed once, and it is never asked more
    than buffer_size rows ahead of either subscriber."""
    rows, size = 1500, 32
    df = sample(session, rows=rows, partitions=3)
    expected = df.collect()
    read = _Requests(from_dataframe(df))
    shared = share(read, buffer_size=size, min_subscribers=2)
    assert isinstance(shared, SharePublisher)
    fast: RecordingSubscriber[Any] = RecordingSubscriber()
    slow: RecordingSubscriber[Any] = RecordingSubscriber()
    beyond: list[str] = []

    def bounded(sub: RecordingSubscriber[Any], name: str) -> Any:
        def check(row: Any) -> None:  # runs after the row is counted: what it was given
            with read._lock:
                ahead = read.total - len(sub.elements)
            if ahead > size or shared.buffered > size:
                beyond.append(f"{name}: asked {ahead} ahead, {shared.buffered} buffered")

        return check

    fast.on_next_hook = bounded(fast, "fast")
    slow.on_next_hook = bounded(slow, "slow")
    shared.subscribe(fast)
    shared.subscribe(slow)
    leads = []
    while not slow.is_terminated:
        fast.request(10)
        slow.request(1)
        slow.await_condition(
            lambda: len(slow.elements) >= min(slow.requested, rows) or slow.is_terminated, 120
        )
        leads.append(len(fast.elements) - len(slow.elements))
    fast.await_terminal(120)
    assert fast.error is None and slow.error is None
    assert fast.elements == expected and slow.elements == expected
    assert fast.completed and slow.completed
    assert read.subscriptions == 1
    assert not beyond, beyond[:3]
    assert 0 <= max(leads) <= size
    fast.assert_no_violations()
    slow.assert_no_violations()
