"""The TCK over ``share`` (cases in compat_matrix/cases/share.py); the optional multi-subscriber
tests (§1.11) must run and pass here, not skip: a multicast that skips them is broken."""

from compat_matrix.cases.share import ShareOnExecutorVerification, ShareVerification


class TestShare(ShareVerification):
    pass


class TestShareOnExecutor(ShareOnExecutorVerification):
    pass
