"""reactive_streams._scan: ``snapshot`` walks a pipeline from its sink to its source, and each
stage's ``scan`` reports what it was asked for, asked upstream, holds and delivered."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_lease import LeaseSource, leased

from reactive_streams import (
    UNBOUNDED,
    BaseSubscriber,
    Scan,
    Scannable,
    Snapshot,
    Subscriber,
    publish_on,
    snapshot,
)
from reactive_streams._drain import DrainSubscription
from reactive_streams.adapters.iterables import BlockingIterator, from_iterable, to_iterator
from reactive_streams.testing import (
    REQUEST_PATTERNS,
    RecordingSubscriber,
    RecordingSubscription,
    switch_interval,
    taking_turns,
)

# -- helpers ----------------------------------------------------------------------------------


def subscribed(
    iterable: range | Iterator[int], sub: RecordingSubscriber[int] | None = None
) -> tuple[DrainSubscription[int], RecordingSubscriber[int]]:
    """``from_iterable(iterable)`` subscribed by a recorder; its DrainSubscription."""
    recorder: RecordingSubscriber[int] = sub if sub is not None else RecordingSubscriber()
    from_iterable(iterable).subscribe(recorder)
    subscription = recorder.await_subscribed()
    assert isinstance(subscription, DrainSubscription)
    return subscription, recorder


def only(stage: object) -> Scan:
    """The one row of ``stage``'s snapshot."""
    rows = snapshot(stage)
    assert len(rows) == 1, str(rows)
    return rows[0]


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.001)


class _NeverSubscribes:
    """A Publisher whose ``subscribe`` forgets to call ``on_subscribe``."""

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        pass


class _Stage:
    """A Scannable whose upstream link a test sets (to make a cycle)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.upstream: object | None = None

    def scan(self) -> Scan:
        return Scan(self.name, upstream=self.upstream)


class _Endless:
    """A Scannable whose every scan links to a fresh stage: a walk the seen-set never ends."""

    def scan(self) -> Scan:
        return Scan("endless", upstream=_Endless())


# -- requested and delivered through the drain loop -------------------------------------------


class TestDrainCounts:
    """DrainSubscription.scan: ``requested`` is the outstanding demand, ``delivered`` every
    on_next the drain made, counted per pass."""

    def test_counts_follow_request_calls(self) -> None:
        """request(3), then request(4): three, then seven delivered; nothing outstanding."""
        subscription, sub = subscribed(range(100))
        row = only(subscription)
        assert (row.name, row.requested, row.delivered) == ("from_iterable", 0, 0)
        assert row.asked is None and row.in_flight is None  # a source asks no one
        assert row.state == "no demand from downstream"
        sub.request(3)
        row = only(subscription)
        assert (row.requested, row.delivered, row.buffered) == (0, 3, 0)
        sub.request(4)
        assert (only(subscription).requested, only(subscription).delivered) == (0, 7)
        assert sub.elements == list(range(7))

    @pytest.mark.parametrize("every", REQUEST_PATTERNS.values(), ids=list(REQUEST_PATTERNS))
    def test_delivered_counts_every_element_to_the_end(self, every: int) -> None:
        """Whatever the request pattern, a completed stream's row says every element was
        delivered, and that it terminated (not that it was cancelled)."""
        sub = taking_turns([], "only", every)
        subscription, _ = subscribed(range(1000), sub)
        sub.await_terminal()
        row = only(subscription)
        assert row.delivered == 1000 == len(sub.elements)
        assert row.terminated and not row.cancelled and row.state == "terminated"
        assert row.upstream is None

    def test_delivered_counts_an_unbounded_request_cut_short(self) -> None:
        """request(UNBOUNDED) over a short source: all of it counted; demand left over reads
        'unbounded' in the table."""
        subscription, sub = subscribed(range(5))
        sub.request(UNBOUNDED)
        row = only(subscription)
        assert row.delivered == 5 and row.terminated
        assert row.requested == UNBOUNDED
        assert "unbounded" in str(snapshot(subscription))

    def test_cancelled_reads_cancelled(self) -> None:
        """A cancelled subscription: cancelled, no demand, what it delivered before."""
        subscription, sub = subscribed(range(100), RecordingSubscriber(2))
        sub.cancel()
        row = only(subscription)
        assert row.cancelled and not row.terminated and row.state == "cancelled"
        assert (row.requested, row.delivered) == (0, 2)

    def test_requested_stays_outstanding_while_the_source_has_nothing(self) -> None:
        """A push source with nothing yet: the demand is outstanding, and buffered elements
        beyond demand show as held with no demand."""
        source: LeaseSource[int] = LeaseSource()
        sub: RecordingSubscriber[int] = RecordingSubscriber()
        drain = DrainSubscription(sub, source, name="push")
        drain.start()
        source.queue.extend([1, 2, 3])  # buffered before any demand (no lease: no emitter)
        row = only(drain)
        assert (row.name, row.requested, row.buffered) == ("push", 0, 3)
        assert row.state == "holds 3, no demand from downstream"
        assert "holds 3, no demand from downstream" in str(snapshot(drain))
        sub.request(5)
        row = only(drain)
        assert (row.requested, row.delivered, row.buffered) == (2, 3, 0)
        assert row.state == "running"


class TestLeaseCounts:
    """Under an emitter lease the drain's demand moved into the lease's credit: a scan counts
    it back in while at rest, and ``_granted - credit`` as delivered."""

    def test_at_rest_under_a_lease(self) -> None:
        """Four elements pushed under a credit of ten: requested 6, delivered 4, while the
        producer still holds the lease."""
        source, drain, sub = leased(RecordingSubscriber(10))
        source.push(0, 1, 2, 3)
        assert source.leases == 1 and drain._lease is not None and drain._lease._held
        row = only(drain)
        assert (row.requested, row.delivered, row.buffered) == (6, 4, 0)

    def test_after_the_lease_ends(self) -> None:
        """Ended by the producer: the unused credit is demand again; delivered unchanged."""
        source, drain, sub = leased(RecordingSubscriber(10))
        source.push(0, 1, 2, 3)
        drain.release_lease()
        assert drain._lease is not None and not drain._lease._held
        row = only(drain)
        assert (row.requested, row.delivered) == (6, 4)
        source.push(4)  # a new lease, then at rest again
        assert source.leases == 2
        assert (only(drain).requested, only(drain).delivered) == (5, 5)

    def test_after_the_credit_is_spent_and_elements_buffer(self) -> None:
        """Credit of 5, 8 pushed: 5 delivered, 3 held with no demand; request(2) drains 2."""
        source, drain, sub = leased(RecordingSubscriber(5))
        source.push(*range(8))
        row = only(drain)
        assert (row.requested, row.delivered, row.buffered) == (0, 5, 3)
        sub.request(2)
        row = only(drain)
        assert (row.requested, row.delivered, row.buffered) == (0, 7, 1)

    def test_after_renewal_from_on_next(self) -> None:
        """request(1) from each on_next renews the lease in place: every element counted."""
        source, drain, sub = leased(RecordingSubscriber(2, request_on_next=1))
        source.push(*range(50))
        assert source.leases == 1 and len(sub.elements) == 50
        row = only(drain)
        assert (row.requested, row.delivered) == (2, 50)

    def test_unbounded_under_a_lease(self) -> None:
        """An unbounded credit stays 'unbounded'; delivered still counts what went."""
        source, drain, sub = leased(RecordingSubscriber(UNBOUNDED))
        source.push(*range(7))
        row = only(drain)
        assert (row.requested, row.delivered) == (UNBOUNDED, 7)
        source.finish()
        row = only(drain)
        assert row.delivered == 7 and row.terminated and row.state == "terminated"


# -- a pipeline: to_iterator(publish_on(from_iterable(...))) ------------------------------------


def settled(it: BlockingIterator[int]) -> Snapshot:
    """The pipeline's snapshot once every stage has delivered what it was asked for (the
    executor's drain and the synchronous source have caught up with the iterator)."""

    def quiet() -> bool:
        rows = snapshot(it)
        return len(rows) == 3 and rows[0].requested == 0 and rows[1].requested == 0

    wait_for(quiet, "the pipeline to settle")
    return snapshot(it)


class TestPipeline:
    """The stages of ``to_iterator(publish_on(from_iterable(...), executor))``, source first."""

    @pytest.mark.parametrize("consumed", [1, 5, 12, 13, 40])
    @pytest.mark.parametrize("prefetch", [4, 16])
    def test_counts_are_consistent_with_the_windows(self, consumed: int, prefetch: int) -> None:
        """After ``consumed`` next() calls the rows agree with one another and with both
        prefetch windows (to_iterator's ``prefetch``, publish_on's 256)."""
        with ThreadPoolExecutor(2) as executor:
            it = to_iterator(publish_on(from_iterable(range(10_000)), executor), prefetch=prefetch)
            got = [next(it) for _ in range(consumed)]
            assert got == list(range(consumed))
            source, boundary, sink = settled(it)
            assert [s.name for s in (source, boundary, sink)] == [
                "from_iterable",
                "publish_on",
                "to_iterator",
            ]
            # the sink: asked ahead of what it consumed, within its window
            assert sink.requested is None and sink.delivered == consumed
            assert consumed <= sink.asked <= consumed + prefetch  # type: ignore[operator]
            assert sink.asked - consumed == sink.buffered + sink.in_flight  # type: ignore[operator]
            assert sink.buffered <= prefetch and sink.in_flight == 0  # all it asked came
            # publish_on: delivered what the sink asked; holds what it took beyond that
            assert boundary.delivered == sink.asked and boundary.requested == 0
            assert boundary.asked == boundary.delivered + boundary.buffered + boundary.in_flight
            assert boundary.asked - boundary.delivered <= 256  # type: ignore[operator]
            assert boundary.delivered <= boundary.asked  # type: ignore[operator]
            # the source: delivered exactly what publish_on asked, synchronously
            assert source.delivered == boundary.asked and source.requested == 0
            assert source.asked is None and source.buffered == 0
            assert not any(s.cancelled or s.terminated for s in (source, boundary, sink))
            it.close()

    def test_table(self) -> None:
        """str(snapshot): a header, one row per stage source first, '-' where a count does
        not apply, the state in words."""
        with ThreadPoolExecutor(1) as executor:
            it = to_iterator(publish_on(from_iterable(range(1000)), executor), prefetch=8)
            next(it)
            stages = settled(it)
            lines = str(stages).splitlines()
            assert len(lines) == 4
            assert lines[0].split() == [
                "stage",
                "requested",
                "asked",
                "in",
                "flight",
                "buffered",
                "delivered",
                "state",
            ]
            assert [line.split()[0] for line in lines[1:]] == [
                "from_iterable",
                "publish_on",
                "to_iterator",
            ]
            source_cells = lines[1].split()
            assert source_cells[2:4] == ["-", "-"]  # a source asks no one
            assert lines[3].split()[1] == "-"  # a sink is asked by no one
            held = stages[1].buffered
            assert held > 0
            assert lines[2].endswith(f"holds {held}, no demand from downstream")
            assert lines[1].endswith("no demand from downstream")
            it.close()

    def test_a_closed_sink(self) -> None:
        """A closed iterator scans as cancelled and links to nothing (§3.13)."""
        with ThreadPoolExecutor(1) as executor:
            it = to_iterator(publish_on(from_iterable(range(1000)), executor), prefetch=8)
            next(it)
            it.close()
            row = only(it)
            assert row.name == "to_iterator" and row.cancelled and row.buffered == 0
            assert row.state == "cancelled"
            assert str(snapshot(it)).splitlines()[1].endswith("cancelled")

    def test_a_completed_sink(self) -> None:
        """An iterator read to the end: terminated; delivered unknown once the queue ended."""
        it = to_iterator(from_iterable(range(3)))
        assert list(it) == [0, 1, 2]
        stages = snapshot(it)
        row = stages[-1]
        assert row.name == "to_iterator"
        assert row.terminated and not row.cancelled and row.state == "terminated"
        for stage in stages:  # the ended source, if still linked, says so too
            assert stage.state == "terminated"

    def test_a_sink_never_subscribed(self) -> None:
        """A publisher that never calls on_subscribe: the sink's row says so."""
        it = to_iterator(_NeverSubscribes())
        row = only(it)
        assert not row.subscribed and row.state.startswith("never subscribed")
        assert "never subscribed" in str(snapshot(it))
        it.close()

    def test_snapshot_from_another_thread_while_it_runs(self) -> None:
        """Snapshots taken in a loop on another thread while the pipeline runs (a thread
        switch at almost every bytecode) never raise, and always name the stages in order."""
        problems: list[BaseException] = []
        done = threading.Event()
        taken = 0

        with switch_interval(1e-6), ThreadPoolExecutor(2) as executor:
            it = to_iterator(publish_on(from_iterable(range(20_000)), executor), prefetch=8)

            def watch() -> None:
                nonlocal taken
                try:
                    while not done.is_set():
                        stages = snapshot(it)
                        str(stages)
                        names = [s.name for s in stages]
                        assert names[-1] == "to_iterator", names
                        assert names in (
                            ["to_iterator"],
                            ["publish_on", "to_iterator"],
                            ["from_iterable", "publish_on", "to_iterator"],
                        ), names
                        taken += 1  # owned: this thread
                except BaseException as exc:
                    problems.append(exc)

            watcher = threading.Thread(target=watch)
            watcher.start()
            try:
                assert sum(1 for _ in it) == 20_000
            finally:
                done.set()
                watcher.join(30)
        assert not watcher.is_alive()
        if problems:
            raise problems[0]
        assert taken > 0


# -- subscribers, foreign stages, cold publishers, cycles -------------------------------------


class TestWalk:
    """What snapshot() does at the ends of a walk."""

    def test_a_cold_publisher_is_refused_naming_the_fix(self) -> None:
        """A cold publisher keeps its state per subscription: TypeError saying to pass the
        sink instead."""
        with pytest.raises(TypeError, match="pass the sink") as info:
            snapshot(from_iterable(range(3)))
        assert "IterablePublisher" in str(info.value)
        assert "cold publisher" in str(info.value)

    def test_a_foreign_subscription_ends_the_walk(self) -> None:
        """A subscriber of ours on another library's Subscription: that one is a row of its
        own, 'foreign', and the walk stops there."""
        sub: BaseSubscriber[int] = BaseSubscriber()
        foreign = RecordingSubscription()
        sub.on_subscribe(foreign)
        stages = snapshot(sub)
        assert [s.name for s in stages] == ["RecordingSubscription", "BaseSubscriber"]
        assert stages[0].foreign and stages[0].state == "another library's stage: not scanned"
        assert not stages[1].foreign and stages[1].subscribed
        assert "not scanned" in str(stages)

    def test_base_subscriber_through_its_life(self) -> None:
        """BaseSubscriber: never subscribed, then linked to its source, then terminated and
        unlinked (§3.13)."""
        sub: BaseSubscriber[int] = BaseSubscriber()
        row = only(sub)
        assert not row.subscribed and "never subscribed" in row.state
        gate: RecordingSubscriber[int] = RecordingSubscriber()
        from_iterable(range(3)).subscribe(gate)  # held at zero demand: a second subscriber
        held: BaseSubscriber[int] = _Holding()
        from_iterable(range(3)).subscribe(held)
        assert [s.name for s in snapshot(held)] == ["from_iterable", "_Holding"]
        from_iterable(range(3)).subscribe(sub)  # requests UNBOUNDED: completes at once
        row = only(sub)
        assert row.terminated and not row.cancelled and row.upstream is None
        held.cancel()
        assert only(held).cancelled

    def test_a_cycle_of_links_ends(self) -> None:
        """Stages that link back to one another: every stage once, then the walk stops."""
        a, b, c = _Stage("a"), _Stage("b"), _Stage("c")
        a.upstream, b.upstream, c.upstream = b, c, a
        assert [s.name for s in snapshot(a)] == ["c", "b", "a"]
        a.upstream = a
        assert [s.name for s in snapshot(a)] == ["a"]

    def test_a_walk_that_never_repeats_is_bounded(self) -> None:
        """A stage that links to a fresh stage on every scan: the walk stops at its bound."""
        stages = snapshot(_Endless())
        assert 1 < len(stages) <= 1000

    def test_scannable_is_runtime_checkable(self) -> None:
        """Everything snapshot accepts is a Scannable: sinks, subscriptions, subscribers."""
        subscription, _ = subscribed(range(1))
        it = to_iterator(from_iterable(range(1)))
        assert all(
            isinstance(x, Scannable) for x in (subscription, it, BaseSubscriber(), _Stage("x"))
        )
        assert not isinstance(from_iterable(range(1)), Scannable)
        it.close()


class _Holding(BaseSubscriber[int]):
    """Subscribes and requests nothing."""

    def hook_on_subscribe(self, subscription: object) -> None:
        pass


def test_table_widths_line_up() -> None:
    """Every row of the table has its columns where the header has them."""
    rows = Snapshot(
        (
            Scan("a-long-stage-name", requested=UNBOUNDED, delivered=3),
            Scan("b", requested=1, asked=12345, in_flight=2, buffered=7, delivered=None),
        )
    )
    lines = str(rows).splitlines()
    header = lines[0]
    for line in lines[1:]:
        # each count column ends where its header ends (right-aligned)
        for title in ("requested", "asked", "in flight", "buffered", "delivered"):
            end = header.index(title) + len(title)
            assert line[end - 1] != " ", (title, line)
            assert line[end] == " ", (title, line)
    assert lines[1].split()[1] == "unbounded"
    assert lines[2].split()[1:6] == ["1", "12345", "2", "7", "-"]
    assert list(itertools.islice(iter(rows), 1))[0].name == "a-long-stage-name"
