"""Spark DataFrames and Reactive Streams, both directions (a façade).

- ``from_dataframe`` (``_read``): a cold Publisher over a DataFrame's rows or Arrow record
  batches, pulled one partition at a time as demand reaches it, on a thread the subscription
  owns; cancel stops its Spark jobs without blocking.
- ``to_dataframe``, ``write_parquet``, ``write_table`` (``_sinks``): drain a Publisher into
  Spark one batch at a time through Arrow (``_arrow``), blocking the calling thread.
"""

from __future__ import annotations

from reactive_streams.spark._arrow import ArrowBatcher
from reactive_streams.spark._arrow import _fill_null_types as _fill_null_types
from reactive_streams.spark._arrow import _filled as _filled
from reactive_streams.spark._arrow import _has_null as _has_null
from reactive_streams.spark._arrow import _typed_map_keys as _typed_map_keys
from reactive_streams.spark._partitions import DaemonThread as DaemonThread
from reactive_streams.spark._partitions import Mode as Mode
from reactive_streams.spark._partitions import Reader as Reader
from reactive_streams.spark._partitions import check_dataframe as check_dataframe
from reactive_streams.spark._partitions import check_job_tag as check_job_tag
from reactive_streams.spark._partitions import check_read_options as check_read_options
from reactive_streams.spark._partitions import make_reader as make_reader
from reactive_streams.spark._partitions import session_stopped as session_stopped
from reactive_streams.spark._partitions import stopped_session as stopped_session
from reactive_streams.spark._read import DataFramePublisher, from_dataframe
from reactive_streams.spark._read import T as T
from reactive_streams.spark._read import _DataFrameSource as _DataFrameSource
from reactive_streams.spark._read import _DataFrameSubscription as _DataFrameSubscription
from reactive_streams.spark._read import _Hook as _Hook
from reactive_streams.spark._sinks import _NOT_ON_LOOP as _NOT_ON_LOOP
from reactive_streams.spark._sinks import (
    BatchSubscriber,
    WriteStats,
    refuse_on_loop,
    to_dataframe,
    write_parquet,
    write_table,
)
from reactive_streams.spark._sinks import _batcher as _batcher
from reactive_streams.spark._sinks import _create as _create
from reactive_streams.spark._sinks import _drain_batches as _drain_batches
from reactive_streams.spark._sinks import _target as _target
from reactive_streams.spark._sinks import _write as _write

_ArrowBatcher = ArrowBatcher  # its name before the split

__all__ = [
    "BatchSubscriber",
    "DataFramePublisher",
    "WriteStats",
    "from_dataframe",
    "refuse_on_loop",
    "to_dataframe",
    "write_parquet",
    "write_table",
]
