"""The Python TCK: verification base classes a user subclasses in pytest.

Each test method is named as its official counterpart (see ``official_tck_tests.tsv``),
carries its rule (``.rule``) and kind (``.kind``), raises :class:`TCKFailure` whose message
starts with the rule, and skips with ``unittest.SkipTest`` saying why. Timeouts come from
:class:`TestEnvironment` (environment variables ``RS_TCK_*_MS``).

Example::

    class TestMyPublisher(PublisherVerification[int]):
        def create_publisher(self, elements):
            return from_iterable(range(elements))
"""

from rs_core.tck._env import ManualPublisher, ManualSubscriber, TCKFailure, TestEnvironment, rule
from rs_core.tck._processor import IdentityProcessorVerification
from rs_core.tck._publisher import PublisherVerification
from rs_core.tck._subscriber import (
    ProbedSubscriber,
    SubscriberBlackboxVerification,
    SubscriberPuppet,
    SubscriberWhiteboxVerification,
    WhiteboxSubscriberProbe,
)

__all__ = [
    "IdentityProcessorVerification",
    "ManualPublisher",
    "ManualSubscriber",
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
