"""``map_partitions``: a Reactive Streams pipeline inside every Spark task, over ``mapInArrow``.

On each task the partition becomes a Publisher (pulled only on demand, on a thread of the
task's own), runs through the stages the ``stages`` factory builds on the worker, and goes
back to Spark through a bounded blocking iterator: a task holds what the stages' windows,
``prefetch`` and one output batch hold, whatever the partition's size. What Spark does to
the worker when a job is cancelled is in docs/spark.md ("map_partitions: cancel").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Literal

import pyarrow as pa

from reactive_streams._pipe import pipe
from reactive_streams.adapters.iterables import from_iterable, to_iterator
from reactive_streams.api import Processor

__all__ = ["map_partitions"]

Mode = Literal["rows", "arrow"]

_MODES: Final = ("rows", "arrow")
_RELEASE_WAIT: Final = 60.0
"""Seconds the task waits, once its output ends, for a pull of the input still running."""
FLUSH_CONF: Final = "spark.python.udf.pipelined.enabled"
"""The Spark conf (set when the session starts) that makes a Python worker flush each output
batch: a worker whose task Spark ended (a cancel, a ``limit``) then fails at its next batch
and exits. Without it the worker runs on until 64 KB of output (``spark.buffer.size``) is
buffered. docs/spark.md ("map_partitions: cancel") has the measurements."""
_LINGER: Final = 0.1
"""Seconds an output row waits for its batch to fill (rows mode) before the batch goes out:
Spark then sees output, and a worker whose task has ended learns it at that write."""


def map_partitions(
    df: Any,
    stages: Callable[[], Sequence[Processor[Any, Any]]],
    schema: Any,
    *,
    mode: Mode = "rows",
    max_rows_per_batch: int = 1024,
    prefetch: int = 256,
) -> Any:
    """Run ``stages`` over every partition of ``df`` in the executors; return the output.

    Args:
        df: a DataFrame, classic or Spark Connect, batch or streaming.
        stages: a zero-argument callable, pickled to the workers, that builds the list of
            Processors for each task, e.g. ``lambda: [map_async(call_api, concurrency=16)]``.
        schema: the output's schema, a ``StructType`` or a DDL string.
        mode: ``"rows"``: the stages get a ``pyspark.sql.Row`` per input row (nested values
            as pyarrow's ``to_pylist()`` gives them: structs as dicts, timestamps UTC-aware)
            and emit a ``Row``, tuple or dict in ``schema``. ``"arrow"``: RecordBatches.
        max_rows_per_batch: rows mode: the most rows converted at once, in and out.
        prefetch: the most outputs requested ahead of Spark's consumption (``to_iterator``).

    Returns:
        ``df.mapInArrow(...)``; a stage's exception fails the task with its type and message.

    Raises:
        TypeError: ``stages`` is not callable; ``schema`` or a count has the wrong type.
        ValueError: ``mode`` is not "rows" or "arrow", or a count is not > 0.
    """
    if not callable(stages):
        raise TypeError(
            "map_partitions(): stages must be a zero-argument callable that returns a list "
            f"of Processors (e.g. lambda: [log()]), got {type(stages).__qualname__}"
        )
    if mode not in _MODES:
        raise ValueError(f"map_partitions(): mode must be 'rows' or 'arrow', got {mode!r}")
    _require_count(max_rows_per_batch, "max_rows_per_batch")
    _require_count(prefetch, "prefetch")
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    if isinstance(schema, str):  # parsed by the session (a Connect one has no local parser)
        schema = df.sparkSession.createDataFrame([], schema).schema
    if not isinstance(schema, StructType):
        raise TypeError(
            "map_partitions(): schema must be a StructType or a DDL string, "
            f"got {type(schema).__qualname__}"
        )
    _note_flush_conf(df.sparkSession)
    task = _Task(stages, mode, to_arrow_schema(schema), max_rows_per_batch, prefetch)
    return df.mapInArrow(task, schema)


_noted = threading.Lock()
_log = logging.getLogger("reactive_streams.spark")


def _note_flush_conf(session: Any) -> None:
    """Warns once per process when ``FLUSH_CONF`` is off (the first caller's thread)."""
    if _noted.locked() or session.conf.get(FLUSH_CONF, "false").lower() == "true":
        return
    if _noted.acquire(blocking=False):  # held for good: the first one warns, once
        _log.warning(
            "map_partitions: %s is not set, so a task Spark ends early (a cancelled job, "
            "a limit) leaves its Python worker calling on until 64 KB of output is "
            "buffered; set it to true when the session starts",
            FLUSH_CONF,
        )


def _require_count(value: object, name: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"map_partitions(): {name} must be an int, got {value!r}")
    if value <= 0:
        raise ValueError(f"map_partitions(): {name} must be > 0, got {value}")


class _Task:
    """The function ``mapInArrow`` runs on each task (pickled with its fields).

    Runs on the task's thread in the Python worker. The input is pulled by a thread of the
    task's own (``from_iterable(executor=...)``): never on an event loop a stage runs, and
    one puller at a time (:class:`_Input`). Closing the generator Spark got (Spark's worker
    closes it when its write fails; the generator's last reference going does too) cancels
    the pipeline (§3.12 via ``to_iterator``'s ``close``) in ``finally``.
    """

    def __init__(
        self,
        stages: Callable[[], Sequence[Processor[Any, Any]]],
        mode: Mode,
        arrow_schema: pa.Schema,
        max_rows: int,
        prefetch: int,
    ) -> None:
        self.stages = stages
        self.mode = mode
        self.arrow_schema = arrow_schema
        self.max_rows = max_rows
        self.prefetch = prefetch

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        built: object = self.stages()
        if not isinstance(built, (list, tuple)):
            raise TypeError(
                "map_partitions(): stages() must return a list of Processors, "
                f"got {type(built).__qualname__}"
            )
        source = _Input(batches)
        puller = ThreadPoolExecutor(1, thread_name_prefix="rs-map-partitions-input")
        items = source if self.mode == "arrow" else _rows(source, self.max_rows)
        output = to_iterator(
            pipe(from_iterable(items, executor=puller), *built), prefetch=self.prefetch
        )
        try:
            if self.mode == "arrow":
                yield from output
            else:
                yield from _batches(output, self.arrow_schema, self.max_rows)
        finally:
            output.close()  # cancels every stage and closes the input generator (§3.12)
            puller.shutdown(wait=False, cancel_futures=True)
            source.release()  # Spark's worker reads its socket next: no pull may overlap


class _Input:
    """Spark's input iterator, pulled by one thread at a time, until :meth:`release`.

    ``_guard`` is held for the length of each ``next()`` (the worker's socket is not for two
    readers): ``release`` (the task's thread) waits for a pull still running, then no pull
    starts again (``_released``, under ``_guard``).
    """

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self._batches = batches
        self._guard = threading.Lock()
        self._released = False

    def __iter__(self) -> _Input:
        return self

    def __next__(self) -> pa.RecordBatch:
        with self._guard:  # owned: one reader of the worker's socket at a time
            if self._released:
                raise StopIteration
            return next(self._batches)

    def release(self) -> None:
        # A pull in flight ends: Spark's writer feeds the input while it waits for output,
        # and a cancelled task's socket closes. The timeout only bounds a broken JVM.
        acquired = self._guard.acquire(timeout=_RELEASE_WAIT)
        self._released = True  # under _guard (or its holder is stuck for good)
        if acquired:
            self._guard.release()


def _rows(batches: Iterator[pa.RecordBatch], max_rows: int) -> Iterator[Any]:
    """One ``Row`` per input row, converting at most ``max_rows`` rows at a time."""
    from pyspark.sql import Row

    for part in _slices(batches, max_rows):
        make = Row(*part.schema.names)
        yield from map(make, *(column.to_pylist() for column in part.columns))


def _slices(batches: Iterator[pa.RecordBatch], max_rows: int) -> Iterator[pa.RecordBatch]:
    """Each batch cut into zero-copy slices of at most ``max_rows`` rows."""
    for batch in batches:
        for start in range(0, batch.num_rows, max_rows):
            yield batch.slice(start, max_rows)


def _batches(
    outputs: Iterator[Any], schema: pa.Schema, max_rows: int, linger: float = _LINGER
) -> Iterator[Any]:
    """Gather outputs (``Row``, tuple or dict) into RecordBatches of at most ``max_rows``,
    or fewer once the first held one is ``linger`` seconds old (looked at as outputs come);
    a dict or a ``Row`` with named fields goes by name, a tuple by position."""
    names = schema.names
    held: list[tuple[Any, ...]] = []
    first = 0.0
    for item in outputs:
        if isinstance(item, dict):
            item = tuple(item.get(name) for name in names)
        elif getattr(item, "__fields__", names) != names:  # a Row with named fields: by name
            fields = item.__fields__
            if set(fields) != set(names):
                raise ValueError(
                    f"map_partitions(): an output Row has the fields {', '.join(fields)}, "
                    f"the schema {', '.join(names)}"
                )
            item = tuple(item[name] for name in names)
        elif not isinstance(item, tuple):
            raise TypeError(
                "map_partitions(): in rows mode the last stage must emit a Row, tuple or "
                f"dict matching the schema, got {type(item).__qualname__}"
            )
        elif len(item) != len(names):
            raise ValueError(
                f"map_partitions(): an output has {len(item)} fields, the schema "
                f"{len(names)} ({', '.join(names)})"
            )
        if not held:
            first = time.monotonic()
        held.append(item)
        if len(held) == max_rows or time.monotonic() - first >= linger:
            yield _to_batch(held, schema)
            held = []
    if held:
        yield _to_batch(held, schema)


def _to_batch(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.RecordBatch:
    columns = [
        pa.array([row[i] for row in rows], type=field.type) for i, field in enumerate(schema)
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
