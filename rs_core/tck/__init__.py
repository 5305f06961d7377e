"""The Python TCK: verification base classes a user subclasses in pytest.

Each test method is named as its official counterpart (``test_`` plus the JVM name in
snake case), carries its rule (``.rule``) and kind (``.kind``: required / optional /
stochastic / untested), raises :class:`TCKFailure` whose message starts with the rule
(``"§1.1: ..."``), and skips with ``unittest.SkipTest`` saying why. Timeouts come from
:class:`TestEnvironment` (arguments, or the environment variables ``RS_TCK_*_MS``).

Example::

    class TestMyPublisher(PublisherVerification[int]):
        def create_publisher(self, elements: int) -> Publisher[int]:
            return from_iterable(range(elements))
"""

from reactive_streams.tck._env import ConflictDetector, TCKFailure, TestEnvironment, rule
from reactive_streams.tck._manual import ManualPublisher, ManualSubscriber, ManualSubscription
from reactive_streams.tck._processor import IdentityProcessorVerification
from reactive_streams.tck._publisher import PublisherVerification
from reactive_streams.tck._subscriber_blackbox import SubscriberBlackboxVerification
from reactive_streams.tck._subscriber_probe import (
    ProbedSubscriber,
    SubscriberPuppet,
    WhiteboxSubscriberProbe,
)
from reactive_streams.tck._subscriber_whitebox import SubscriberWhiteboxVerification

__all__ = [
    "ConflictDetector",
    "IdentityProcessorVerification",
    "ManualPublisher",
    "ManualSubscriber",
    "ManualSubscription",
    "ProbedSubscriber",
    "PublisherVerification",
    "SubscriberBlackboxVerification",
    "SubscriberPuppet",
    "SubscriberWhiteboxVerification",
    "TCKFailure",
    "TestEnvironment",
    "WhiteboxSubscriberProbe",
    "rule",
]
