"""snapshot() through share (sink, its subscriber row, the hub, the source) and retry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reactive_streams import Scan, Snapshot, Subscriber, Subscription, retry, share, snapshot
from reactive_streams.adapters.iterables import BlockingIterator, from_iterable, to_iterator

N = 200
B = 8  # share's buffer_size
TIMEOUT = 10.0  # a next() that would block forever fails the test instead


def names(snap: Snapshot) -> list[str]:
    return [stage.name for stage in snap]


def sink_and_hub(snap: Snapshot) -> tuple[Scan, Scan, Scan, Scan]:
    """The four rows of a share pipeline's snapshot, source first."""
    source, hub, row, sink = snap
    return source, hub, row, sink


def check_pacing(fast: BlockingIterator[int], slow: BlockingIterator[int]) -> bool:
    """The invariants of one quiescent moment, read from both sinks' snapshots; True when
    the fast one waits with demand while the slow one has none."""
    seen = {}
    for number, it in ((1, fast), (2, slow)):
        snap = snapshot(it)
        assert names(snap) == [
            "from_iterable",
            "share (2 subscribers)",
            f"share → subscriber {number}",
            "to_iterator",
        ]
        source, hub, row, sink = sink_and_hub(snap)
        assert sink.in_flight is not None and sink.asked is not None
        assert row.requested == sink.in_flight  # its outstanding demand is the sink's
        assert row.delivered == sink.asked - sink.in_flight  # what reached the sink
        assert hub.asked is not None and hub.in_flight is not None
        assert hub.asked - hub.in_flight == source.delivered  # arrived from upstream
        assert hub.asked - (source.delivered or 0) <= B
        assert hub.asked - (hub.delivered or 0) <= B  # never more than B ahead of the slowest
        assert hub.subscribed and source.upstream is None
        seen[number] = (hub, row)
    (hub, fast_row), (_, slow_row) = seen[1], seen[2]
    assert slow_row.requested is not None and fast_row.requested is not None
    assert hub.requested == min(fast_row.requested, slow_row.requested)
    assert hub.requested <= slow_row.requested  # the slower one's demand bounds it
    assert hub.buffered == max(fast_row.buffered, slow_row.buffered)
    if slow_row.requested == 0 and (slow_row.delivered or 0) < (fast_row.delivered or 0):
        assert hub.state.endswith("paced by subscriber 2")  # the one furthest back
    return fast_row.requested > 0 and slow_row.requested == 0


def available(it: BlockingIterator[int]) -> int:
    return snapshot(it)[-1].buffered


def test_share_snapshot_names_each_stage_and_paces_by_the_slower() -> None:
    """Each sink's snapshot walks sink → its row → hub → from_iterable; the hub asks at
    most buffer_size ahead of what left its buffer and its requested is the slower's bound."""
    shared = share(from_iterable(range(N)), buffer_size=B, min_subscribers=2)
    fast = to_iterator(shared, prefetch=4, timeout=TIMEOUT)
    slow = to_iterator(shared, prefetch=2, timeout=TIMEOUT)
    got_fast: list[int] = []
    got_slow: list[int] = []
    lead = held_back = 0  # how far the fast one got ahead, how often it waited
    check_pacing(fast, slow)
    while len(got_slow) < N:
        got_slow.append(next(slow))  # the slow one: one element a step
        for _ in range(10):  # the fast one: up to ten, as far as it holds without waiting
            if not available(fast):
                break
            got_fast.append(next(fast))
        lead = max(lead, len(got_fast) - len(got_slow))
        if len(got_slow) < N - 3 * B:  # before the end: both still here
            held_back += check_pacing(fast, slow)
    assert got_slow == list(range(N)) and lead >= B // 2 and held_back > 0
    got_fast.extend(fast)
    assert got_fast == list(range(N))
    hub = snapshot(shared)[-1]
    assert hub.terminated and hub.upstream is None


def test_share_snapshot_after_the_fast_one_cancels_shows_one_subscriber() -> None:
    """Once the fast sink closes, the hub row counts one subscriber, paced by the other."""
    shared = share(from_iterable(range(N)), buffer_size=B, min_subscribers=2)
    fast = to_iterator(shared, prefetch=4, timeout=TIMEOUT)
    slow = to_iterator(shared, prefetch=2, timeout=TIMEOUT)
    assert [next(fast) for _ in range(3)] == [0, 1, 2]
    assert next(slow) == 0
    fast.close()
    assert [next(slow) for _ in range(2 * B)] == list(range(1, 2 * B + 1))
    source, hub, row, _ = sink_and_hub(snapshot(slow))
    assert hub.name == "share (1 subscriber)" and row.name == "share → subscriber 2"
    assert hub.requested == row.requested
    assert hub.buffered == row.buffered
    assert names(snapshot(shared)) == ["from_iterable", "share (1 subscriber)"]
    assert source.name == "from_iterable" and not source.cancelled
    slow.close()
    assert snapshot(shared)[-1].cancelled  # the last one left early: upstream cancelled


def test_share_publisher_snapshot_starts_at_the_hub() -> None:
    """snapshot(share_publisher) is the hub and what is upstream of it."""
    shared = share(from_iterable(range(N)), buffer_size=B)
    empty = snapshot(shared)
    assert names(empty) == ["share (0 subscribers)"] and not empty[0].subscribed
    it = to_iterator(shared, prefetch=4, timeout=TIMEOUT)
    assert next(it) == 0
    snap = snapshot(shared)
    assert names(snap) == ["from_iterable", "share (1 subscriber)"]
    assert snap[-1].asked == B and snap[0].upstream is None
    late = to_iterator(shared, prefetch=4, timeout=TIMEOUT)  # arrives at element 4
    assert next(late) == 4
    _, hub, row, sink = sink_and_hub(snapshot(late))
    assert hub.name == "share (2 subscribers)" and row.name == "share → subscriber 2"
    assert sink.asked is not None and sink.in_flight is not None
    assert row.delivered == sink.asked - sink.in_flight  # counted from its arrival
    it.close()
    late.close()


def test_share_snapshot_before_min_subscribers_tells_what_it_waits_for() -> None:
    """Fewer than min_subscribers: the hub is not subscribed and says it waits for them."""
    shared = share(from_iterable(range(N)), buffer_size=B, min_subscribers=2)
    it = to_iterator(shared, prefetch=4, timeout=TIMEOUT)
    snap = snapshot(it)
    assert names(snap) == ["share (1 subscriber)", "share → subscriber 1", "to_iterator"]
    hub = snap[0]
    assert not hub.subscribed and hub.asked == 0 and hub.upstream is None
    assert "min_subscribers: 1 of 2" in hub.state
    assert snap[1].requested == 4  # its demand is recorded, waiting
    it.close()


class Silent:
    """A Publisher that never calls on_subscribe: the upstream a forgotten call leaves."""

    def __init__(self) -> None:
        self.subscribers: list[Subscriber[Any]] = []

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self.subscribers.append(subscriber)


def test_share_snapshot_before_upstream_subscribed_says_so() -> None:
    """Connected, but the upstream never called on_subscribe: subscribed=False, and the state
    names the upstream's on_subscribe (not min_subscribers)."""
    silent = Silent()
    shared = share(silent, buffer_size=B)
    it = to_iterator(shared, prefetch=4, timeout=TIMEOUT)
    assert len(silent.subscribers) == 1
    hub = snapshot(it)[0]
    assert hub.name == "share (1 subscriber)" and not hub.subscribed
    assert "upstream's on_subscribe" in hub.state and "min_subscribers" not in hub.state
    it.close()


# -- retry -----------------------------------------------------------------------------------


class _Capture(Subscriber[int]):
    """Passes every signal on; records the subscription (the same object, not a wrapper)."""

    def __init__(self, inner: Subscriber[int], into: list[Subscription]) -> None:
        self._inner, self._into = inner, into

    def on_subscribe(self, subscription: Subscription) -> None:
        self._into.append(subscription)
        self._inner.on_subscribe(subscription)

    def on_next(self, element: int) -> None:
        self._inner.on_next(element)

    def on_error(self, error: Exception) -> None:
        self._inner.on_error(error)

    def on_complete(self) -> None:
        self._inner.on_complete()


def _failing(k: int) -> Iterator[int]:
    yield from range(k)
    raise RuntimeError("transient")


class FailsOnce:
    """A cold Publisher: its first subscription fails after 3 elements, the next ones don't."""

    def __init__(self) -> None:
        self.subscriptions: list[Subscription] = []

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        first = not self.subscriptions
        source = from_iterable(_failing(3) if first else iter(range(N)))
        source.subscribe(_Capture(subscriber, self.subscriptions))


def test_retry_snapshot_names_retry_and_links_to_the_live_attempt() -> None:
    """After one failed attempt the walk goes sink → retry → the second attempt's
    subscription (not the first's), and retry's counts add up."""
    flaky = FailsOnce()
    it = to_iterator(retry(flaky, attempts=3), prefetch=4, timeout=TIMEOUT)
    assert [next(it) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    assert len(flaky.subscriptions) == 2
    snap = snapshot(it)
    assert names(snap) == ["from_iterable", "retry", "to_iterator"]
    source, stage, _ = snap
    assert stage.upstream is flaky.subscriptions[1]
    assert not source.cancelled and not source.terminated
    assert stage.asked is not None and stage.in_flight is not None
    assert stage.buffered == 0  # fused: the drain pops its queue straight into the sink
    assert stage.asked - stage.in_flight == 3 + (source.delivered or 0)  # both attempts
    it.close()
    assert snapshot(it)[-1].cancelled
