"""The TCK over adapters.async_iterables (cases in compat_matrix/cases/async_iterables.py)."""

from compat_matrix.cases.async_iterables import (
    ConsumedToAsyncIteratorBlackboxVerification,
    FromAsyncIterableVerification,
    ToAsyncIteratorSubscriberBlackboxVerification,
)


class TestFromAsyncIterable(FromAsyncIterableVerification):
    pass


class TestToAsyncIteratorBlackbox(ToAsyncIteratorSubscriberBlackboxVerification):
    pass


class TestConsumedToAsyncIteratorBlackbox(ConsumedToAsyncIteratorBlackboxVerification):
    pass


class TestConsumedToAsyncIteratorWithTimeoutBlackbox(ConsumedToAsyncIteratorBlackboxVerification):
    """The same, each wait of the async for under a timeout (generous: none fires)."""

    timeout = 30.0
