"""The TCK over adapters.aioreactive (cases in compat_matrix/cases/aioreactive.py)."""

from compat_matrix.cases.aioreactive import (
    FromAsyncObservableVerification,
    ToAsyncObservableSubscriberBlackboxVerification,
)


class TestFromAsyncObservable(FromAsyncObservableVerification):
    pass


class TestToAsyncObservableBlackbox(ToAsyncObservableSubscriberBlackboxVerification):
    pass
