"""Every private name of pyspark this package uses, in one place (docs/spark.md, "Private names").

- The classic reader serves partitions through the JVM side of ``toLocalIterator`` without its
  ``withNewExecutionId``, whose jobs keep every partition on the driver heap (docs/spark.md,
  "The toLocalIterator memory finding"): that takes py4j handles pyspark keeps private.
- The sinks use pyspark's own schema inference and verification (``createDataFrame``'s).
- The main job counts its jobs by tag and quiets one JVM logger.

:func:`missing` lists the names a pyspark release lacks; tests/spark/test_py4j.py fails with
:func:`explain` naming them and the release. Everything runs on the caller's thread.
"""

from __future__ import annotations

import importlib
import socket
from collections.abc import Iterator
from typing import Any, Final

import pyspark
import pyspark.serializers

__all__ = [
    "explain",
    "handler_done",
    "java_context",
    "job_ids_for_tag",
    "jvm",
    "local_socket",
    "missing",
    "parse_ddl",
    "private",
    "serializers",
    "serve",
    "session_job_tag",
    "table_iterator",
]

serializers: Any = pyspark.serializers
"""pyspark's framing of its local sockets (``read_int``, ``write_int``, the serializers)."""

_PROMISE: Final = "org$apache$spark$security$SocketAuthServer$$promise"

PYTHON_NAMES: Final = (
    ("pyspark.util", "_create_local_socket"),
    ("pyspark.serializers", "read_int"),
    ("pyspark.serializers", "write_int"),
    ("pyspark.serializers", "BatchedSerializer"),
    ("pyspark.serializers", "CPickleSerializer"),
    ("pyspark.serializers", "NoOpSerializer"),
    ("pyspark.sql.pandas.types", "to_arrow_schema"),
    ("pyspark.sql.conversion", "LocalDataToArrowConversion"),
    ("pyspark.sql.types", "_infer_schema"),
    ("pyspark.sql.types", "_merge_type"),
    ("pyspark.sql.types", "_has_nulltype"),
    ("pyspark.sql.types", "_make_type_verifier"),
)
"""(module, name): looked up by :func:`private` when used."""

CLASSIC_ATTRIBUTES: Final = (
    ("SparkContext", "_jsc"),
    ("SparkContext", "_jvm"),
    ("SparkSession", "_jsparkSession"),
    ("SparkSession", "_parse_ddl"),
    ("DataFrame", "_jdf"),
)
CONNECT_ATTRIBUTES: Final = (
    ("SparkSession", "_parse_ddl"),
    ("SparkSession", "client"),
    ("DataFrame", "_plan"),
)
JVM_METHODS: Final = (
    ("org.apache.spark.api.python.PythonRDD", "toLocalIteratorAndServe"),
    ("org.apache.spark.security.SocketAuthServer", _PROMISE),
    ("<the DataFrame's Dataset>", "javaToPython"),
    ("<the DataFrame's Dataset>", "toArrowBatchRdd"),
    ("<the session's SparkSession>", "sessionJobTag"),
)


def private(module: str, name: str) -> Any:
    """``module.name``, or a ``RuntimeError`` naming it and this pyspark's version."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(explain([f"{module}.{name}"])) from exc


def explain(names: list[str]) -> str:
    """Why the names are needed, which are gone, in which pyspark."""
    return (
        f"pyspark {pyspark.__version__} lacks private names reactive_streams.spark uses: "
        f"{', '.join(names)} (docs/spark.md, 'Private names'; use a pyspark this "
        "release supports, or report it)"
    )


# -- the classic reader (no execution id: no driver-heap leak) --------------------------------


def java_context(sc: Any) -> Any:
    """The ``JavaSparkContext`` behind ``sc``; ``None`` once the context was stopped."""
    return sc._jsc


def jvm(sc: Any) -> Any:
    """The py4j view of the driver JVM."""
    return sc._jvm


def session_job_tag(session: Any) -> str:
    """The tag Spark puts on a classic session's jobs (``interruptAll`` cancels by it)."""
    return str(session._jsparkSession.sessionJobTag())


def serve(df: Any, mode: str, prefetch: bool, max_rows: int, large: bool) -> Any:
    """Start the JVM's partition server over ``df``: ``(port, secret, server)``.

    Rows: the pickled ``Row`` chunks of ``javaToPython``; arrow: Arrow IPC batches of
    ``toArrowBatchRdd``. One job per partition, submitted when the reader asks for it.
    """
    jdf = df._jdf
    if mode == "rows":
        jrdd = jdf.javaToPython().rdd()
    else:
        jrdd = jdf.toArrowBatchRdd(max_rows, "UTC", True, large)
    sc = df.sparkSession.sparkContext
    return sc._jvm.PythonRDD.toLocalIteratorAndServe(jrdd, prefetch)


def local_socket(port: int, secret: str) -> tuple[Any, socket.socket]:
    """Connect to a JVM server of pyspark's: ``(buffered file, socket)``."""
    create = private("pyspark.util", "_create_local_socket")
    sockfile, sock = create((port, secret))
    return sockfile, sock


def handler_done(server: Any) -> bool:
    """Whether the serving handler of ``toLocalIteratorAndServe`` returned (its result promise
    is complete); True when that cannot be asked (no server, the JVM gone)."""
    if server is None:
        return True
    try:  # SocketAuthServer's private promise: pyspark's own getResult() waits on it
        return bool(getattr(server, _PROMISE)().isCompleted())
    except Exception:
        return True


# -- Spark Connect, the sinks, the main job -----------------------------------------------------


def table_iterator(df: Any) -> Iterator[Any] | None:
    """The Connect client's lazy Arrow result stream of ``df`` (what its ``toLocalIterator``
    reads); ``None`` when this pyspark has no such iterator."""
    client = getattr(df.sparkSession, "client", None)
    to_iter = getattr(client, "to_table_as_iterator", None)
    plan = getattr(df, "_plan", None)
    if to_iter is None or plan is None:
        return None
    result: Iterator[Any] = to_iter(plan.to_proto(client), plan.observations)
    return result


def parse_ddl(session: Any, ddl: str) -> Any:
    """``ddl`` parsed by ``session`` (classic or Connect) into a Spark data type."""
    return session._parse_ddl(ddl)


def job_ids_for_tag(spark: Any, tag: str) -> list[int]:
    """The ids of the jobs Spark's status tracker still keeps under ``tag`` (classic)."""
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    return [int(j) for j in tracker.getJobIdsForTag(tag)]


# -- the check ------------------------------------------------------------------------------


def missing(spark: Any, connect: Any = None) -> list[str]:
    """The names above that this pyspark lacks, asked of a live classic session ``spark`` (and
    of a Connect session, when given); ``[]`` when all are there."""
    gone = []
    for module, name in PYTHON_NAMES:
        try:
            private(module, name)
        except RuntimeError:
            gone.append(f"{module}.{name}")
    df = spark.range(1)
    classic = {"SparkContext": spark.sparkContext, "SparkSession": spark, "DataFrame": df}
    gone += [f"{k}.{n}" for k, n in CLASSIC_ATTRIBUTES if not hasattr(classic[k], n)]
    if connect is not None:
        remote = {"SparkSession": connect, "DataFrame": connect.range(1)}
        gone += [f"Connect {k}.{n}" for k, n in CONNECT_ATTRIBUTES if not hasattr(remote[k], n)]
    if "SparkContext._jvm" in gone or "DataFrame._jdf" in gone:
        return gone  # the JVM side cannot be asked
    java = spark.sparkContext._jvm
    owners = {
        "<the DataFrame's Dataset>": df._jdf.getClass(),
        "<the session's SparkSession>": spark._jsparkSession.getClass(),
    }
    for owner, method in JVM_METHODS:
        try:
            cls = owners.get(owner) or java.java.lang.Class.forName(owner)
            found = any(m.getName() == method for m in cls.getMethods())
        except Exception:  # the class itself is gone (ClassNotFoundException)
            found = False
        if not found:
            gone.append(f"JVM {owner}.{method}")
    return gone
