"""TCK cases for ``spark``: ``from_dataframe`` in rows and arrow mode, the subscriber
inside ``to_dataframe`` / ``write_parquet`` / ``write_table`` (``BatchSubscriber``), and the
one inside ``to_stream`` (``Feed``), driven by calls standing for Spark's reader.

The publishers read small DataFrames of an embedded ``local[2]`` session (created on first
use, shared by every case); each test runs a Spark job or two, so the TCK timeouts are raised
through ``TestEnvironment``. A publisher built for ``n`` elements emits exactly ``n``: rows of
``spark.range(n)``, or, in arrow mode, batches of one row each (``max_rows_per_batch=1``).
Without pyspark or Java the module raises ImportError: the matrix shows the column as
unavailable.
"""

from __future__ import annotations

import threading
from typing import Any

from reactive_streams import Publisher, Subscriber, Subscription
from reactive_streams.tck import (
    ProbedSubscriber,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    TestEnvironment,
    WhiteboxSubscriberProbe,
)

try:
    from pyspark.sql import DataFrame

    from reactive_streams.spark import BatchSubscriber, from_dataframe
    from reactive_streams.spark._feed import Feed
    from reactive_streams.spark.local import java_problem, local_session
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"pyspark/pyarrow not installed: {exc}") from exc

_PROBLEM = java_problem()
if _PROBLEM is not None:  # pragma: no cover - depends on the machine
    raise ImportError(_PROBLEM)

_ENV = TestEnvironment(default_timeout_ms=20_000, no_signals_timeout_ms=200, gc_timeout_ms=5_000)
_SMALL = 100_000

_session: Any = None
_session_lock = threading.Lock()


def _spark() -> Any:
    global _session
    with _session_lock:
        if _session is None or _session.sparkContext._jsc is None:
            _session = local_session("local[2]", app_name="rs-tck-spark")
        return _session


def _frame(elements: int) -> Any:
    """``elements`` rows, ids 0.., over one or a few partitions.

    A huge count (the TCK asks for 2**31 - 1 to overflow demand) keeps its first partition
    at 1,000 rows: only partitions that demand reaches are ever computed.
    """
    spark = _spark()
    if elements <= _SMALL:
        return spark.range(0, elements, 1, 1 if elements < 8 else 2)
    head = spark.range(0, 1000, 1, 1)
    return head.union(spark.range(1000, elements, 1, 2))  # 3 partitions: 1,000, rest, rest


class _StoppedSession:
    class sparkContext:  # noqa: N801 - the attribute pyspark's session has
        _jsc = None


class _DataFrameOfAStoppedSession(DataFrame):
    """Stands for a DataFrame whose SparkContext was stopped (stopping the shared session
    would end every other case): ``from_dataframe`` sees it from Python-side state and refuses
    each subscriber with ``on_subscribe`` then ``on_error``, without calling Spark. Never
    initialised (``object.__new__``): a pyspark DataFrame by type only."""

    sparkSession = _StoppedSession()  # type: ignore[assignment]


class FromDataFrameRowsVerification(PublisherVerification[Any]):
    """``from_dataframe(df)``: one ``Row`` per unit of demand, read on the subscription's
    own thread, partition by partition."""

    def env(self) -> TestEnvironment:
        return _ENV

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return from_dataframe(_frame(elements))

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return from_dataframe(object.__new__(_DataFrameOfAStoppedSession))


class FromDataFrameArrowVerification(FromDataFrameRowsVerification):
    """``from_dataframe(df, mode="arrow", max_rows_per_batch=1)``: one RecordBatch per unit
    of demand."""

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return from_dataframe(_frame(elements), mode="arrow", max_rows_per_batch=1)


class _BatchPuppet:
    """Plays the sink's consumer: ``trigger_request(n)`` makes the subscriber ask for ``n``
    more batches (of one element here); cancel closes it."""

    def __init__(self, subscriber: BatchSubscriber[Any]) -> None:
        self._subscriber = subscriber

    def trigger_request(self, n: int) -> None:
        self._subscriber.request_batches(n)

    def signal_cancel(self) -> None:
        self._subscriber.cancel()


class BatchSubscriberWhiteboxVerification(SubscriberWhiteboxVerification[dict[str, int]]):
    """The subscriber inside the Spark sinks, with batches of one element so that each
    batch the consumer asks for shows as one ``request``."""

    def env(self) -> TestEnvironment:
        return _ENV

    def create_subscriber(
        self, probe: WhiteboxSubscriberProbe[dict[str, int]]
    ) -> Subscriber[dict[str, int]]:
        inner: BatchSubscriber[dict[str, int]] = BatchSubscriber(1)

        def puppet(_: Subscription) -> _BatchPuppet:
            return _BatchPuppet(inner)

        return ProbedSubscriber(inner, probe, puppet)

    def create_element(self, i: int) -> dict[str, int]:
        return {"i": i}


class BatchSubscriberBlackboxVerification(SubscriberBlackboxVerification[dict[str, int]]):
    """The subscriber inside the Spark sinks as a publisher sees it (batches of 16)."""

    def env(self) -> TestEnvironment:
        return _ENV

    def create_subscriber(self) -> Subscriber[dict[str, int]]:
        return BatchSubscriber(16)

    def trigger_request(self, subscriber: Subscriber[dict[str, int]]) -> None:
        assert isinstance(subscriber, BatchSubscriber)
        subscriber.request_batches(1)

    def create_element(self, i: int) -> dict[str, int]:
        return {"i": i}


class _ReaderPuppet:
    """Plays Spark's reader over a ``Feed(max_rows=1)``: ``read(position)`` tops the feed's
    demand up to ``position + 1``, so each unit of ``trigger_request`` is one read at the
    position where nothing is in flight (one ``request(1)``, each after the previous element
    arrived). While an element is in flight the puppet reads the same position again (each
    read waits up to 0.1 s, as ``latestOffset`` polls); rows read are committed and the
    position moves to their end, as a micro-batch would. ``signal_cancel`` closes the feed.

    Reads run on the puppet's own thread (started at the first ``trigger_request``), which
    owns the position; ``trigger_request`` / ``stop`` may come from any thread.
    """

    def __init__(self, feed: Feed) -> None:
        self._feed = feed
        self._cond = threading.Condition(threading.Lock())
        self._owed = 0  # units of demand not yet read for; under _cond
        self._stopped = False  # one-way; under _cond
        self._thread: threading.Thread | None = None  # under _cond

    def trigger_request(self, n: int) -> None:
        with self._cond:
            if self._stopped:
                return  # Spark's reader is gone once the feed was closed
            self._owed += n  # under _cond
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="rs-tck-feed-reader", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def signal_cancel(self) -> None:
        self.stop()
        self._feed.close()

    @property
    def reading(self) -> bool:
        """Whether the reader thread is still alive."""
        thread = self._thread  # no lock: set once, under _cond
        return thread is not None and thread.is_alive()

    def stop(self) -> None:
        """End the reader thread (a read in progress returns within 0.1 s) and wait for it."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_ENV.default_timeout)

    def _run(self) -> None:
        position = 0  # the next offset to read; owned: this thread
        asked = 0  # offsets asked of the feed by this reader's reads; owned: this thread
        while True:
            with self._cond:
                if position == asked:  # nothing in flight: wait for a unit of demand
                    self._cond.wait_for(lambda: self._stopped or self._owed > 0)
                    if not self._stopped:
                        self._owed -= 1  # under _cond; this read asks the feed for one
                        asked += 1
                if self._stopped:
                    return
            try:
                rows, end = self._feed.read(position)
            except Exception:
                return  # the publisher's error: Spark's query would fail with it
            if rows:
                self._feed.commit(end)  # the micro-batch ran
                position = end
            else:
                state = self._feed.scan()
                if state.terminated or state.cancelled:
                    return  # nothing left, nothing to come: Spark's query stops


class _ClosesFeeds:
    """Closes every feed (and stops every reader puppet) a test created, when it ends."""

    def _keep(self, feed: Feed, puppet: _ReaderPuppet | None = None) -> Feed:
        self.__dict__.setdefault("_feeds", []).append(feed)
        if puppet is not None:
            self.__dict__.setdefault("_puppets", []).append(puppet)
        return feed

    def teardown_method(self, method: object) -> None:
        for puppet in self.__dict__.pop("_puppets", []):
            puppet.stop()
        for feed in self.__dict__.pop("_feeds", []):
            feed.close()


class FeedWhiteboxVerification(_ClosesFeeds, SubscriberWhiteboxVerification[tuple[int]]):
    """The subscriber inside ``to_stream`` with ``max_rows=1``, its demand made by reads
    standing for Spark's (see ``_ReaderPuppet``); cancel is ``close()``."""

    def env(self) -> TestEnvironment:
        return _ENV

    def create_subscriber(
        self, probe: WhiteboxSubscriberProbe[tuple[int]]
    ) -> Subscriber[tuple[int]]:
        feed = Feed(_spark(), 1)
        puppet = _ReaderPuppet(feed)
        self._keep(feed, puppet)
        return ProbedSubscriber(feed, probe, lambda _: puppet)

    def create_element(self, i: int) -> tuple[int]:
        return (i,)


class FeedBlackboxVerification(_ClosesFeeds, SubscriberBlackboxVerification[tuple[int]]):
    """The subscriber inside ``to_stream`` (``max_rows=16``) as a publisher sees it:
    ``trigger_request`` is one read where Spark would read next (the highest end served),
    on the test thread (it waits up to 0.1 s for a first element, which none sends)."""

    def env(self) -> TestEnvironment:
        return _ENV

    def create_subscriber(self) -> Subscriber[tuple[int]]:
        return self._keep(Feed(_spark(), 16))

    def trigger_request(self, subscriber: Subscriber[tuple[int]]) -> None:
        assert isinstance(subscriber, Feed)
        delivered = subscriber.scan().delivered
        subscriber.read(delivered or 0)

    def create_element(self, i: int) -> tuple[int]:
        return (i,)


CASES = [
    ("from_dataframe(rows)", FromDataFrameRowsVerification),
    ("from_dataframe(arrow)", FromDataFrameArrowVerification),
    ("spark sink BatchSubscriber (whitebox)", BatchSubscriberWhiteboxVerification),
    ("spark sink BatchSubscriber (blackbox)", BatchSubscriberBlackboxVerification),
    ("spark to_stream Feed (whitebox)", FeedWhiteboxVerification),
    ("spark to_stream Feed (blackbox)", FeedBlackboxVerification),
]


def grid_sources() -> list[Any]:
    """The Spark sources for the source x sink grid (``compat_matrix.grid``): ``n`` rows of
    ``spark.range(n)``, normalised to their ids. They emit only on demand (slack 0); rows
    are counted as they leave the adapter (Spark's side, a partition at a time, is not)."""
    from compat_matrix.grid import Source, counted

    return [
        Source(
            "from_dataframe(rows)",
            lambda n, taken: counted(from_dataframe(_frame(n)), taken),
            lambda row: row.id,
            library="pyspark",
        ),
        Source(
            "from_dataframe(arrow)",
            lambda n, taken: counted(
                from_dataframe(_frame(n), mode="arrow", max_rows_per_batch=1), taken
            ),
            lambda batch: batch.column(0)[0].as_py(),
            library="pyspark",
        ),
    ]
