"""``to_stream``: a Publisher as a Spark Structured Streaming source, paced by Spark's triggers.

The Publisher stays in this process, held by a feed (``_feed.py``); Spark's reader
(``_stream_source.py``) runs in the Python process the driver spawns to plan the stream and
asks the feed for rows over a loopback connection (127.0.0.1, HMAC with a per-feed secret
kept in a 0600 file; the options carry its path, never the secret).
Limits: the reader must run on this machine. Spark calls it in the planner, on the driver,
and on a replay after a restart (a batch in the offset log, not in the commit log) in an
executor's Python worker: executors on other machines cannot replay. On Spark Connect the
planner runs on the server, which must be on this machine (a local Connect server).
One query at a time reads a to_stream DataFrame: rows are released as that query commits them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reactive_streams._subscription import require_publisher
from reactive_streams.api import Publisher
from reactive_streams.spark._arrow import ArrowBatcher
from reactive_streams.spark._feed import Feed
from reactive_streams.spark._partitions import is_connect, session_stopped
from reactive_streams.spark._stream_source import SOURCE_NAME, PublisherDataSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["to_stream"]


def _is_session(obj: object) -> bool:
    from pyspark.sql import SparkSession

    if isinstance(obj, SparkSession):
        return True
    if is_connect(obj):
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        return isinstance(obj, ConnectSession)
    return False


def to_stream(
    publisher: Publisher[Any],
    spark_session: SparkSession,
    *,
    schema: StructType | str,
    max_rows_per_batch: int = 10_000,
) -> DataFrame:
    """A streaming DataFrame over ``publisher``'s elements, one row each; offsets are their
    sequence numbers.

    The publisher is asked only as far as Spark's triggers read: a micro-batch asks for up
    to ``max_rows_per_batch`` and takes what has arrived (Spark gives this source no read
    limit; this is its admission control), so at most that many are held or in flight.
    Rows are kept until Spark commits them: a replay after a failure or a restart from the
    checkpoint gets the same rows. The publisher's error fails the query (its type and
    message) after the rows before it; its completion stops the query once every row was
    committed. The feed ends (cancelling the publisher) when the session stops.

    Args:
        publisher: a Publisher of rows: tuples (by position), ``Row`` objects or dicts (by name).
        spark_session: a classic session, or a Connect session whose server runs here.
        schema: a ``StructType`` or a DDL string (required: a stream's schema is fixed).
        max_rows_per_batch: the most rows in a micro-batch, and asked of the publisher ahead.

    Raises ``TypeError`` or ``ValueError`` naming a wrong argument, ``RuntimeError`` when the
    session was stopped.
    """
    from pyspark.sql.types import StructType

    require_publisher(publisher, "to_stream(): publisher")
    if not _is_session(spark_session):
        raise TypeError(
            "to_stream(): spark_session must be a SparkSession (classic or Connect), "
            f"got {type(spark_session).__name__}"
        )
    if not isinstance(schema, StructType | str):
        raise TypeError(
            f"to_stream(): schema must be a StructType or a DDL str, got {type(schema).__name__}"
        )
    if type(max_rows_per_batch) is not int:
        raise TypeError(
            "to_stream(): max_rows_per_batch must be an int, "
            f"got {type(max_rows_per_batch).__name__}"
        )
    if max_rows_per_batch <= 0:
        raise ValueError(f"to_stream(): max_rows_per_batch must be > 0, got {max_rows_per_batch}")
    stopped = session_stopped(spark_session)
    if stopped is not None:
        raise RuntimeError(f"to_stream(): {stopped}")
    struct = ArrowBatcher(schema, spark_session, "to_stream").spark_schema
    assert struct is not None  # a schema was given
    spark_session.dataSource.register(PublisherDataSource)
    feed = Feed(spark_session, max_rows_per_batch)
    try:
        reader = spark_session.readStream.format(SOURCE_NAME).options(**feed.options)
        frame = reader.schema(struct).load()
        publisher.subscribe(feed)
    except BaseException:
        feed.close()
        raise
    return frame
