"""PublisherVerification: the Publisher rules of the TCK, one test method per official test.

Each method follows the procedure of its JVM counterpart
(``PublisherVerification.java``), read the Python way: ``None`` is ``TypeError``,
``IllegalArgumentException`` is ``ValueError``, ``Long.MAX_VALUE`` is ``UNBOUNDED``.
The tests live in ``_publisher_signals.py`` (setup, config, §1) and
``_publisher_subscription.py`` (§3), the hooks and helpers in ``_publisher_base.py``.
"""

from __future__ import annotations

from typing import TypeVar

from reactive_streams.tck._publisher_signals import SignalTests
from reactive_streams.tck._publisher_subscription import SubscriptionTests

__all__ = ["PublisherVerification"]

T = TypeVar("T")


class PublisherVerification(SignalTests[T], SubscriptionTests[T]):
    """The Publisher rules (§1, §3) verified over ``create_publisher(n)``.

    Subclass it, implement ``create_publisher(elements)`` and name the subclass ``Test…``
    (pytest collects the ``test_*`` methods; each takes only ``self``).

    Optional hooks: ``create_failed_publisher()`` (a publisher that signals ``on_subscribe``
    then ``on_error`` to every subscriber; None skips the tests that need one),
    ``max_elements_from_publisher()`` (default ``UNBOUNDED - 1``; tests needing more skip;
    ``UNBOUNDED`` means "never completes" and skips the tests that need ``on_complete``),
    ``bounded_depth_of_on_next_and_request_recursion()`` (default 1, §3.3),
    ``skip_stochastic_tests()``, ``env()`` (timeouts).

    Failures raise :class:`~reactive_streams.tck.TCKFailure` whose message starts with the rule;
    skips raise ``unittest.SkipTest`` saying why. As in the JVM TCK, an optional test the
    publisher does not pass is skipped, its message kept in the reason.
    """
