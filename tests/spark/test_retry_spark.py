"""retry over from_dataframe: a Spark read that fails on a transient error is read again."""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip("pyspark")

from spark_helpers import functions_for  # noqa: E402

from reactive_streams import UNBOUNDED, retry  # noqa: E402
from reactive_streams.spark import from_dataframe  # noqa: E402
from reactive_streams.testing import RecordingSubscriber  # noqa: E402

pytestmark = pytest.mark.spark


def test_retry_reads_a_dataframe_again_after_a_transient_failure(
    session: Any, tmp_path: Any
) -> None:
    """A Python UDF raises on its first run only (it leaves a marker file first): the first
    read fails, retry subscribes from_dataframe again after a backoff, and the second read
    delivers every row, once, in order; then on_complete. Classic and Spark Connect."""
    marker = str(tmp_path / "failed-once")

    def flaky(x: int) -> int:
        if not os.path.exists(marker):
            with open(marker, "w"):
                pass
            raise RuntimeError("transient: the first read fails")
        return x

    udf = functions_for(session).udf(flaky, "long", useArrow=False)
    df = session.range(0, 100, 1, 2).select(udf("id").alias("x"))
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
    retry(from_dataframe(df), attempts=2, backoff=0.01).subscribe(subscriber)
    subscriber.await_terminal(240)
    assert subscriber.error is None, subscriber.error
    assert subscriber.completed and os.path.exists(marker)
    assert [row.x for row in subscriber.elements] == list(range(100))
    subscriber.assert_no_violations()
