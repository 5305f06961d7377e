"""What the readers share: job tags, the kind and state of a session told without calling
Spark, the checks ``from_dataframe`` and ``from_stream`` make at the call, Spark's errors in
pyspark's classes, and Arrow re-chunking. Pure functions, safe on any thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, Final, Literal

from reactive_streams.spark import _py4j

__all__ = [
    "TAG_PREFIX",
    "Mode",
    "check_dataframe",
    "check_job_tag",
    "check_read_options",
    "chunks",
    "is_connect",
    "new_tag",
    "session_stopped",
    "spark_error",
    "stopped_session",
]

Mode = Literal["rows", "arrow"]

TAG_PREFIX: Final = "rs-spark-"


def new_tag() -> str:
    """A job tag unique to one subscription."""
    return f"{TAG_PREFIX}{uuid.uuid4().hex[:12]}"


def is_connect(obj: object) -> bool:
    """True for a Spark Connect DataFrame or SparkSession (decided by type, without a call)."""
    return type(obj).__module__.startswith("pyspark.sql.connect")


def stopped_session(df: Any) -> str | None:
    """Why ``df``'s session cannot serve it, read from Python-side state only (no call into
    Spark, so it is safe on any thread): ``None`` while the session looks alive."""
    try:
        return session_stopped(df.sparkSession, "of this DataFrame ")
    except Exception:  # an unexpected shape: let the first pull report the real error
        return None


def session_stopped(session: Any, whose: str = "") -> str | None:
    """Why ``session`` cannot run anything (stopped), from Python-side state only; ``None``
    while it looks alive, or when that cannot be told."""
    try:
        if is_connect(session):
            if session.is_stopped:
                return f"the Spark Connect session {whose}was stopped"
            return None
        if _py4j.java_context(session.sparkContext) is None:
            return f"the SparkContext {whose}was stopped"
    except Exception:
        return None
    return None


def check_dataframe(df: object, who: str) -> None:
    """Refuse anything but a pyspark DataFrame (classic or Connect) at the call: a list or a
    pandas DataFrame failed only at the first request, deep inside Spark."""
    from pyspark.sql import DataFrame

    if not isinstance(df, DataFrame):
        raise TypeError(f"{who} requires a pyspark DataFrame, got {type(df).__name__}")


def check_job_tag(job_tag: object) -> None:
    """Spark's rule for a job tag (a non-empty string without a comma), at the call: a bad
    one failed at the first request with a Py4JError or a Java IllegalArgumentException."""
    if job_tag is None:
        return
    if not isinstance(job_tag, str):
        raise TypeError(f"job_tag must be a str or None, got {type(job_tag).__name__}")
    if not job_tag or "," in job_tag:
        raise ValueError(
            f"job_tag must be non-empty and hold no comma (Spark's rule), got {job_tag!r}"
        )


def check_read_options(mode: str, max_rows_per_batch: int | None) -> None:
    """Refuse a bad ``mode`` or ``max_rows_per_batch`` at once (``from_dataframe``,
    ``from_stream``), with the parameter's name: a bad one would otherwise drop every row
    (a negative step) or fail the job much later.

    Raises:
        ValueError: ``mode`` is not ``"rows"`` or ``"arrow"``; ``max_rows_per_batch`` is
            given for rows mode, or is not a positive int.
    """
    if mode not in ("rows", "arrow"):
        raise ValueError(f"mode must be 'rows' or 'arrow', got {mode!r}")
    if max_rows_per_batch is not None:
        if mode != "arrow":
            raise ValueError("max_rows_per_batch applies to mode='arrow' only")
        if type(max_rows_per_batch) is not int or max_rows_per_batch <= 0:
            raise ValueError(
                f"max_rows_per_batch must be a positive int, got {max_rows_per_batch!r}"
            )


def spark_error(exc: Exception, what: str = "Spark failed") -> Exception:
    """The error to signal for ``exc``, a ``Py4JJavaError`` or any other: pyspark's own class
    when one fits a link of the Java cause chain (``PythonException`` for a failing UDF,
    ``SparkRuntimeException``); else a ``RuntimeError`` whose message is ``what`` and the
    chain's root reason (a job ``spark.stop()`` cancelled), not py4j's "An error occurred
    while calling o42.getResult"; ``exc`` itself when it carries no Java exception."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return exc
    try:
        from pyspark.errors.exceptions.captured import UnknownException, convert_exception

        root = java
        for _ in range(8):
            if java is None:
                break
            converted = convert_exception(java)
            if not isinstance(converted, UnknownException):
                return converted
            root, java = java, java.getCause()
        reason = str(root.toString())
    except Exception:  # the JVM may be gone: keep the original error
        return exc
    return RuntimeError(f"{what}: {reason}")


def chunks(batch: Any, max_rows: int | None) -> Iterator[Any]:
    """``batch`` in zero-copy slices of at most ``max_rows`` rows; nothing for an empty one."""
    rows = batch.num_rows
    if rows == 0:
        return
    if max_rows is None or rows <= max_rows:
        yield batch
        return
    for offset in range(0, rows, max_rows):
        yield batch.slice(offset, max_rows)  # zero-copy
