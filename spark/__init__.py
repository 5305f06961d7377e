"""Spark DataFrames (batch and streaming) as Publishers, and Publishers into Spark.

``from_dataframe`` streams a DataFrame with demand, ``from_stream`` a streaming query;
``to_dataframe``, ``write_parquet`` and ``write_table`` take a Publisher into Spark batch by
batch, ``to_stream`` into a streaming DataFrame paced by Spark's triggers.
``python -m reactive_streams.spark`` runs the main pipeline. Needs the ``spark`` extra
(pyspark, pyarrow) and Java 17; ``reactive_streams.spark.local`` starts local sessions and a local
Connect server.
"""

from reactive_streams.adapters._extras import missing_extra

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    raise missing_extra(exc, "the spark package", "spark") from exc

from reactive_streams.spark._map_partitions import map_partitions
from reactive_streams.spark._to_stream import to_stream
from reactive_streams.spark.dataframe import (
    BatchSubscriber,
    DataFramePublisher,
    WriteStats,
    from_dataframe,
    to_dataframe,
    write_parquet,
    write_table,
)
from reactive_streams.spark.streaming import StreamPublisher, from_stream

__all__ = [
    "BatchSubscriber",
    "DataFramePublisher",
    "StreamPublisher",
    "WriteStats",
    "from_dataframe",
    "from_stream",
    "map_partitions",
    "to_dataframe",
    "to_stream",
    "write_parquet",
    "write_table",
]
