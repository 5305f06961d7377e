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
