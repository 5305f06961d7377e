"""The TCK over adapters.rx (cases in compat_matrix/cases/rx.py)."""

from compat_matrix.cases.rx import (
    FromObservableBlockVerification,
    FromObservableBufferVerification,
    RxProcessorVerification,
    ToObservableSubscriberBlackboxVerification,
)


class TestFromObservableBlock(FromObservableBlockVerification):
    pass


class TestFromObservableBuffer(FromObservableBufferVerification):
    pass


class TestToObservableBlackbox(ToObservableSubscriberBlackboxVerification):
    pass


class TestRxProcessor(RxProcessorVerification):
    pass
