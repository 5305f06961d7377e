"""The reader of a Spark Connect session: the client's lazy gRPC result stream.

Rows mode iterates ``DataFrame.toLocalIterator()``, arrow mode the client's Arrow batch
iterator; the server runs the whole query and the reader pulls the stream as demand reaches
it. Cancel interrupts the operation by tag. Everything runs on the subscription's thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reactive_streams.spark import _py4j
from reactive_streams.spark._partitions._cancel import Reader
from reactive_streams.spark._partitions._common import Mode, chunks

__all__ = ["ConnectReader"]


class ConnectReader(Reader):
    """Reader on a Spark Connect session; its tags go with this thread's requests."""

    def __init__(self, df: Any, mode: Mode, max_rows: int | None, tags: tuple[str, ...]) -> None:
        super().__init__(tags)
        self._df = df
        self._mode = mode
        self._max_rows = max_rows
        self._session: Any = None
        self._iterator: Iterator[Any] | None = None

    def open(self) -> Iterator[Any]:
        df = self._df
        session = self._session = df.sparkSession
        for tag in self.tags:
            session.addTag(tag)  # thread-local on the client: sent with this thread's requests
        # Opening lasts until the first result: before the server registered the operation,
        # an interruptTag finds nothing to interrupt.
        self._begin_opening()
        try:
            if self._mode == "rows":
                iterator: Iterator[Any] = df.toLocalIterator()
            else:
                iterator = _connect_batches(self, df, self._max_rows)
        except BaseException:
            self._end_opening()
            raise
        self._iterator = _track_end(self, iterator)
        return self._iterator

    def _cancel_tag(self) -> None:
        session = self._session
        if session is not None:
            session.interruptTag(self.tags[0])

    def close(self) -> None:
        iterator, self._iterator = self._iterator, None  # owned: the subscription's thread
        session = self._session
        if session is not None and self._started and not self.finished:
            try:
                session.interruptTag(self.tags[0])
            except Exception:
                pass
        if iterator is not None:
            close = getattr(iterator, "close", None)
            if close is not None:
                try:
                    close()  # releases the gRPC stream (ReleaseExecute)
                except Exception:
                    pass
        if session is not None:
            for tag in self.tags:
                try:
                    session.removeTag(tag)
                except Exception:
                    pass
        self._df = None
        self._session = None


def _track_end(reader: Reader, iterator: Iterator[Any]) -> Iterator[Any]:
    """``iterator``, ending the reader's opening at its first item (or its end, or error)
    and marking the reader finished at its end."""
    try:
        for item in iterator:
            reader._end_opening()
            yield item
            break
        yield from iterator
        reader.finished = True
    finally:
        reader._end_opening()
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


def _connect_batches(reader: Reader, df: Any, max_rows: int | None) -> Iterator[Any]:
    """Arrow batches of a Connect DataFrame as the server streams them, cast to the schema
    of ``toArrow()``; if this pyspark has no batch iterator, ``toArrow()``'s batches (which
    collects the result first). The slices of the batch being handed out are the reader's
    ``held`` (set once per batch, on the subscription's thread)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    schema = to_arrow_schema(
        df.schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC"
    )
    stream = _py4j.table_iterator(df)
    if stream is None:  # pragma: no cover - fallback for other pyspark versions
        for batch in df.toArrow().to_batches():
            yield from chunks(batch, max_rows)
        return
    for item in stream:
        if isinstance(item, StructType):
            continue
        for batch in item.to_batches():
            if batch.num_rows and batch.schema != schema:
                batch = batch.cast(schema)
            held = reader.held = iter(list(chunks(batch, max_rows)))  # owned: this thread
            yield from held
    reader.held = None
