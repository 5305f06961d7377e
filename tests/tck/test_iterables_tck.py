"""The TCK over adapters.iterables and publish_on (cases in compat_matrix/cases/iterables.py)."""

from compat_matrix.cases.iterables import (
    FromGeneratorVerification,
    FromIterableOnExecutorVerification,
    FromIterableVerification,
    PublishOnVerification,
    ToIteratorSubscriberBlackboxVerification,
    ToIteratorSubscriberWhiteboxVerification,
)


class TestFromIterable(FromIterableVerification):
    pass


class TestFromGenerator(FromGeneratorVerification):
    pass


class TestFromIterableOnExecutor(FromIterableOnExecutorVerification):
    pass


class TestPublishOn(PublishOnVerification):
    pass


class TestToIteratorWhitebox(ToIteratorSubscriberWhiteboxVerification):
    pass


class TestToIteratorBlackbox(ToIteratorSubscriberBlackboxVerification):
    pass
