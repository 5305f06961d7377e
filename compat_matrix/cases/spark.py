"""TCK cases for ``spark``: ``from_dataframe`` in rows and arrow mode, and the subscriber
inside ``to_dataframe`` / ``write_parquet`` / ``write_table`` (``BatchSubscriber``).

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


CASES = [
    ("from_dataframe(rows)", FromDataFrameRowsVerification),
    ("from_dataframe(arrow)", FromDataFrameArrowVerification),
    ("spark sink BatchSubscriber (whitebox)", BatchSubscriberWhiteboxVerification),
    ("spark sink BatchSubscriber (blackbox)", BatchSubscriberBlackboxVerification),
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
