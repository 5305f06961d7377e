"""Readers that stream a DataFrame to the driver one partition at a time, without leaking.

A reader is opened, pulled and closed by the subscription's own thread (a
:class:`DaemonThread`); only ``interrupt`` comes from elsewhere, and it never blocks (§3.5).
``_classic`` serves a classic session's partitions over a local socket, ``_connect`` pulls a
Spark Connect result stream, ``_cancel`` stops Spark by job tag, ``_thread`` owns the thread.
"""

from __future__ import annotations

from typing import Any

from reactive_streams.spark._partitions._cancel import (
    Interrupted,
    Reader,
    cancel_later,
    start_canceller,
)
from reactive_streams.spark._partitions._classic import ClassicReader
from reactive_streams.spark._partitions._common import (
    TAG_PREFIX,
    Mode,
    check_dataframe,
    check_job_tag,
    check_read_options,
    is_connect,
    new_tag,
    session_stopped,
    spark_error,
    stopped_session,
)
from reactive_streams.spark._partitions._connect import ConnectReader
from reactive_streams.spark._partitions._thread import DaemonThread, join_reads

__all__ = [
    "TAG_PREFIX",
    "DaemonThread",
    "Interrupted",
    "Mode",
    "Reader",
    "cancel_later",
    "check_dataframe",
    "check_job_tag",
    "check_read_options",
    "is_connect",
    "join_reads",
    "make_reader",
    "new_tag",
    "session_stopped",
    "spark_error",
    "start_canceller",
    "stopped_session",
]


def make_reader(
    df: Any,
    mode: Mode,
    *,
    prefetch_partitions: bool,
    max_rows_per_batch: int | None,
    job_tag: str | None,
) -> Reader:
    """A reader for ``df`` (no Spark call happens here: the reader is lazy)."""
    tags = (new_tag(),) if job_tag is None else (new_tag(), job_tag)
    if is_connect(df):
        return ConnectReader(df, mode, max_rows_per_batch, tags)
    return ClassicReader(df, mode, prefetch_partitions, max_rows_per_batch, tags)
