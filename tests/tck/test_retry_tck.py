"""The TCK over retry (cases in compat_matrix/cases/retry.py)."""

from compat_matrix.cases.retry import RetryAfterFailuresVerification, RetryVerification


class TestRetry(RetryVerification):
    pass


class TestRetryAfterFailures(RetryAfterFailuresVerification):
    pass
