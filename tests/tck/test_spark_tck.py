"""The TCK over the Spark adapters (cases in compat_matrix/cases/spark.py); skipped without
pyspark or Java."""

import pytest

pytestmark = pytest.mark.spark

spark_cases = pytest.importorskip(
    "compat_matrix.cases.spark", reason="pyspark, pyarrow or Java is missing"
)


class TestFromDataFrameRows(spark_cases.FromDataFrameRowsVerification):  # type: ignore[misc,name-defined]
    pass


class TestFromDataFrameArrow(spark_cases.FromDataFrameArrowVerification):  # type: ignore[misc,name-defined]
    pass


class TestSparkSinkWhitebox(spark_cases.BatchSubscriberWhiteboxVerification):  # type: ignore[misc,name-defined]
    pass


class TestSparkSinkBlackbox(spark_cases.BatchSubscriberBlackboxVerification):  # type: ignore[misc,name-defined]
    pass
