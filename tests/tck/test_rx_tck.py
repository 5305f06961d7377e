"""The TCK over reactive_streams.adapters.rx (cases in compat_matrix/cases/rx.py)."""

from compat_matrix.cases.rx import (
    FromObservableBlockOnRxThreadVerification,
    FromObservableBlockVerification,
    FromObservableBufferVerification,
    RxProcessorVerification,
    ToObservableSubscriberBlackboxVerification,
    ToObservableSubscriberWhiteboxVerification,
)


class TestFromObservableBlock(FromObservableBlockVerification):
    pass


class TestFromObservableBlockOnRxThread(FromObservableBlockOnRxThreadVerification):
    pass


class TestFromObservableBuffer(FromObservableBufferVerification):
    pass


class TestToObservableWhitebox(ToObservableSubscriberWhiteboxVerification):
    pass


class TestToObservableBlackbox(ToObservableSubscriberBlackboxVerification):
    pass


class TestRxProcessor(RxProcessorVerification):
    pass
