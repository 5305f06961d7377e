"""The TCK over the Spark adapters (cases in compat_matrix/cases/spark.py); skipped without
pyspark or Java; and a check that the ``to_stream`` Feed cases close every feed they make."""

import os
import threading
import time

import pytest

pytestmark = pytest.mark.spark

spark_cases = pytest.importorskip(
    "compat_matrix.cases.spark", reason="pyspark, pyarrow or Java is missing"
)


class TestFromDataFrameRows(spark_cases.FromDataFrameRowsVerification):  # type: ignore[misc,name-defined]
    pass


class TestFromDataFrameArrow(spark_cases.FromDataFrameArrowVerification):  # type: ignore[misc,name-defined]
    pass


class TestSparkSinkWhitebox(spark_cases.BatchSubscriberWhiteboxVerification):  # type: ignore[misc,name-defined]
    pass


class TestSparkSinkBlackbox(spark_cases.BatchSubscriberBlackboxVerification):  # type: ignore[misc,name-defined]
    pass


class TestFeedWhitebox(spark_cases.FeedWhiteboxVerification):  # type: ignore[misc,name-defined]
    pass


class TestFeedBlackbox(spark_cases.FeedBlackboxVerification):  # type: ignore[misc,name-defined]
    pass


def _feed_threads() -> int:
    return sum(t.name.startswith(("rs-to-stream-", "rs-tck-feed-")) for t in threading.enumerate())


@pytest.mark.parametrize(
    ("case", "method"),
    [
        ("FeedWhiteboxVerification", "test_required_exercise_whitebox_happy_path"),
        (
            "FeedWhiteboxVerification",
            "test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call",
        ),
        (
            "FeedWhiteboxVerification",
            "test_required_spec213_on_next_must_throw_null_pointer_exception_when_parameters_are_null",
        ),
        (
            "FeedBlackboxVerification",
            "test_required_spec201_blackbox_must_signal_demand_via_subscription_request",
        ),
    ],
)
def test_a_feed_case_closes_every_feed_it_created_when_its_test_ends(
    case: str, method: str
) -> None:
    """After a Feed test and its teardown: every feed it made is closed, gone from
    ``live_feeds``, its secret deleted, and its threads and the reader puppet's ended."""
    from reactive_streams.spark._feed import live_feeds

    threads_before = _feed_threads()
    instance = getattr(spark_cases, case)()
    try:
        getattr(instance, method)()
    finally:
        feeds = list(instance.__dict__.get("_feeds", []))
        puppets = list(instance.__dict__.get("_puppets", []))
        instance.teardown_method(None)
    assert feeds
    live = {feed.id for feed in live_feeds()}
    for feed in feeds:
        assert feed.closed
        assert feed.id not in live
        assert not os.path.exists(feed.secret_dir)
    assert not any(puppet.reading for puppet in puppets)
    deadline = time.monotonic() + 30
    while _feed_threads() > threads_before:  # the watcher looks every 0.5 s
        assert time.monotonic() < deadline, "a closed feed's threads did not end within 30 s"
        time.sleep(0.05)
