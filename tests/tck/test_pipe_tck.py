"""The TCK over reactive_streams.pipe (cases in compat_matrix/cases/pipe.py)."""

from compat_matrix.cases.pipe import PipeProcessorVerification, PipePublisherVerification


class TestPipePublisher(PipePublisherVerification):
    pass


class TestPipeProcessor(PipeProcessorVerification):
    pass
