"""Elements to Arrow record batches of one schema, as Spark's ``createDataFrame`` would make
them: the conversion behind every sink. Runs on the sink's calling thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, final

import pyarrow as pa

from reactive_streams.spark import _py4j

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

__all__ = ["ArrowBatcher"]


@final
class ArrowBatcher:
    """Turns a list of elements into Arrow record batches of one schema, as Spark would.

    ``pyarrow.RecordBatch`` / ``pyarrow.Table`` elements pass through (cast to the schema).
    Any other element goes through pyspark's own conversion of local data to Arrow (the one
    ``createDataFrame`` uses on Spark Connect), so values mean what they mean to Spark: a
    naive ``datetime`` is local time, a ``dict`` value is a map, a ``Decimal`` is
    ``DECIMAL(38, 18)``, a tuple fills a struct. Elements may be ``Row``, dicts (columns in
    sorted order, as Spark infers them), tuples or lists (named by the schema, else ``_1``,
    ``_2``, …), objects with a ``__dict__``, or scalars (one column named ``value``).

    Without a schema, Spark's inference over the whole first batch gives it (read with the
    session's inference settings); a type it could not determine there (a column, or a
    nested field, all ``None``) is taken from the next batches that have a value. Errors
    name the sink ``who``. Owned by the sink's calling thread.
    """

    __slots__ = (
        "_given",
        "_infer",
        "_inferred",
        "_large",
        "_verified",
        "_verifier",
        "_who",
        "schema",
        "spark_schema",
    )

    def __init__(
        self, schema: StructType | str | None, session: SparkSession, who: str = "to_dataframe"
    ) -> None:
        from pyspark.sql.types import StructType

        self._who = who
        conf = session.conf
        self._large = conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
        self._infer = {
            "infer_dict_as_struct": conf.get(
                "spark.sql.pyspark.inferNestedDictAsStruct.enabled", "false"
            )
            == "true",
            "prefer_timestamp_ntz": conf.get("spark.sql.timestampType", "TIMESTAMP_LTZ")
            == "TIMESTAMP_NTZ",
        }
        self._given = schema is not None
        self._verifier: Callable[[Any], None] | None = None  # for the schema _verified
        self._verified: StructType | None = None
        self._inferred: StructType | None = None  # Spark's inference so far, merged
        self.spark_schema: StructType | None = None
        self.schema: pa.Schema | None = None  # every batch is cast to it
        if schema is not None:
            spark_schema = self._parse(session, schema) if isinstance(schema, str) else schema
            if not isinstance(spark_schema, StructType):
                raise TypeError(f"{who}(): schema must describe a struct, got {spark_schema!r}")
            self.spark_schema = spark_schema
            self.schema = self._arrow(spark_schema)

    def _parse(self, session: SparkSession, ddl: str) -> Any:
        """``ddl`` parsed by the session; a ``ValueError`` naming the sink and Spark's reason
        when it is not valid DDL (Spark's ``ParseException`` text starts with a blank line)."""
        try:
            return _py4j.parse_ddl(session, ddl)
        except Exception as exc:
            lines = [line for line in str(exc).splitlines() if line.strip()]
            reason = lines[0].strip() if lines else type(exc).__name__
            where = "".join(f"\n{line}" for line in lines[1:])  # Spark's caret under the error
            raise ValueError(
                f"{self._who}(): the schema {ddl!r} is not valid DDL: {reason}{where}"
            ) from exc

    def _arrow(self, spark_schema: StructType) -> pa.Schema:
        to_arrow_schema = _py4j.private("pyspark.sql.pandas.types", "to_arrow_schema")
        schema: pa.Schema = to_arrow_schema(
            spark_schema, timezone="UTC", prefers_large_types=self._large
        )
        return schema

    def convert(self, elements: Sequence[Any]) -> list[pa.RecordBatch]:
        first = elements[0]
        if isinstance(first, pa.RecordBatch | pa.Table):
            out: list[pa.RecordBatch] = []
            for element in elements:
                batches = element.to_batches() if isinstance(element, pa.Table) else [element]
                out.extend(self._fit(b) for b in batches)
            return self.unify(out)  # a later element may have typed an all-null column
        return [self._fit(self._from_local(elements))]

    def _from_local(self, elements: Sequence[Any]) -> pa.RecordBatch:
        from pyspark.sql import Row

        has_nulltype = _py4j.private("pyspark.sql.types", "_has_nulltype")
        infer_schema = _py4j.private("pyspark.sql.types", "_infer_schema")
        merge_type = _py4j.private("pyspark.sql.types", "_merge_type")

        first = elements[0]
        names: list[str] | None = None
        if isinstance(first, Mapping):  # Spark's inference sorts a dict's keys: so do we
            data: list[Any] = [dict(sorted(e.items())) for e in elements]
        elif isinstance(first, Row | tuple | list) or hasattr(first, "__dict__"):
            data = list(elements)
        else:  # scalars
            data = [(e,) for e in elements]
            names = ["value"]
        known = self._inferred
        if not self._given and (known is None or has_nulltype(known)):
            inferred = infer_schema(data[0], names, **self._infer)
            for row in data[1:]:
                inferred = merge_type(inferred, infer_schema(row, names, **self._infer))
            self._inferred = inferred if known is None else merge_type(known, inferred)
            self.spark_schema = _typed_map_keys(self._inferred)
            self.schema = self._arrow(self.spark_schema)
        schema = self.spark_schema
        assert schema is not None
        self._verify(data, schema)
        conversion = _py4j.private("pyspark.sql.conversion", "LocalDataToArrowConversion")
        table = conversion.convert(data, schema, self._large)
        return table.combine_chunks().to_batches()[0]

    def _verify(self, data: list[Any], schema: StructType) -> None:
        """Refuse an element that does not fit ``schema``, as ``createDataFrame`` does
        (``verifySchema``): the conversion would coerce it silently (``1.7`` into a ``BIGINT``
        column becomes ``1``), so whether a stream failed or was quietly changed would depend
        on where its batches happened to break."""
        if self._verifier is None or self._verified is not schema:
            make_type_verifier = _py4j.private("pyspark.sql.types", "_make_type_verifier")
            self._verifier = make_type_verifier(schema, nullable=False)
            self._verified = schema
        verify = self._verifier
        for row in data:
            try:
                verify(row)
            except (TypeError, ValueError) as exc:
                source = "given" if self._given else "inferred from the first batch"
                raise TypeError(
                    f"{self._who}(): the element {row!r} does not fit the schema {source} "
                    f"({schema.simpleString()}): {exc}"
                    + ("" if self._given else "; pass schema= to say what the columns hold")
                ) from exc

    def _fit(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.schema is None:
            self.schema = batch.schema
            return batch
        if batch.schema.equals(self.schema):
            return batch
        if not self._given:
            self.schema = _fill_null_types(self.schema, batch.schema)
        return batch.select(self.schema.names).cast(self.schema)

    def unify(self, batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
        """``batches`` cast to the schema kept now: the earliest may predate a column's type
        (all-null there, see :func:`_fill_null_types`)."""
        schema = self.schema
        assert schema is not None
        return [b if b.schema.equals(schema) else b.cast(schema) for b in batches]

    def untyped(self) -> list[str]:
        """The columns whose type is still unknown (Arrow ``null``, maybe nested)."""
        schema = self.schema
        return [] if schema is None else [f.name for f in schema if _has_null(f.type)]


def _typed_map_keys(data_type: Any) -> Any:
    """Spark infers an empty dict as ``map<void, void>``, but an Arrow map's key cannot be of
    the null type: such keys get a stand-in type (string; no key exists to convert) until a
    later batch tells, and the batches before it are cast then (see ``unify``)."""
    from pyspark.sql.types import ArrayType, MapType, NullType, StringType, StructField, StructType

    if isinstance(data_type, MapType):
        key = data_type.keyType
        return MapType(
            StringType() if isinstance(key, NullType) else _typed_map_keys(key),
            _typed_map_keys(data_type.valueType),
            data_type.valueContainsNull,
        )
    if isinstance(data_type, ArrayType):
        return ArrayType(_typed_map_keys(data_type.elementType), data_type.containsNull)
    if isinstance(data_type, StructType):
        return StructType(
            [
                StructField(f.name, _typed_map_keys(f.dataType), f.nullable, f.metadata)
                for f in data_type.fields
            ]
        )
    return data_type


def _has_null(arrow_type: pa.DataType) -> bool:
    if pa.types.is_null(arrow_type):
        return True
    return any(_has_null(arrow_type.field(i).type) for i in range(arrow_type.num_fields))


def _fill_null_types(kept: pa.Schema, batch: pa.Schema) -> pa.Schema:
    """An inferred schema whose column was all-null in the first batch (Arrow type ``null``,
    maybe nested: ``list<null>``, ``struct<x: null>``) takes that column's type from the
    first later batch that has values in it: Spark would have inferred it from all the rows,
    and nothing can be cast to ``null``."""
    for i, field in enumerate(kept):
        j = batch.get_field_index(field.name)
        if j >= 0 and _has_null(field.type):
            kept = kept.set(i, field.with_type(_filled(field.type, batch.field(j).type)))
    return kept


def _filled(kept: pa.DataType, new: pa.DataType) -> pa.DataType:
    """``kept`` with each ``null`` inside it replaced by the type ``new`` has there."""
    if pa.types.is_null(kept):
        return new
    if pa.types.is_struct(kept) and pa.types.is_struct(new):
        fields = []
        for field in kept:
            j = new.get_field_index(field.name)
            fields.append(field if j < 0 else field.with_type(_filled(field.type, new[j].type)))
        return pa.struct(fields)
    if pa.types.is_map(kept) and pa.types.is_map(new):
        return pa.map_(_filled(kept.key_type, new.key_type), _filled(kept.item_type, new.item_type))
    if pa.types.is_large_list(kept) and pa.types.is_large_list(new):
        return pa.large_list(kept.value_field.with_type(_filled(kept.value_type, new.value_type)))
    if pa.types.is_list(kept) and pa.types.is_list(new):
        return pa.list_(kept.value_field.with_type(_filled(kept.value_type, new.value_type)))
    return kept
