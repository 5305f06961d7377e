"""The TCK over adapters.async_iterables and adapters.aioreactive."""

from compat_matrix.cases.aioreactive import FromAsyncObservableVerification
from compat_matrix.cases.async_iterables import (
    FromAsyncIterableVerification,
    ToAsyncIteratorSubscriberBlackboxVerification,
)


class TestFromAsyncIterable(FromAsyncIterableVerification):
    pass


class TestToAsyncIteratorBlackbox(ToAsyncIteratorSubscriberBlackboxVerification):
    pass


class TestFromAsyncObservable(FromAsyncObservableVerification):
    pass
