"""MySQL types as Spark types: every value of the MySQL range fits, and Delta stores it unchanged."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from pyspark.sql import types as T

from changefeed.model import Column, TableInfo
from changefeed.mysqltypes import ColumnType
from changefeed.spark.types import spark_type, table_schema

CASES = [
    ("tinyint(4)", T.ByteType()), ("tinyint(3) unsigned", T.ShortType()), ("tinyint(1)", T.ByteType()),
    ("smallint(6)", T.ShortType()), ("smallint(5) unsigned", T.IntegerType()),
    ("mediumint(8) unsigned", T.IntegerType()), ("int(11)", T.IntegerType()), ("int(10) unsigned", T.LongType()),
    ("bigint(20)", T.LongType()), ("bigint(20) unsigned zerofill", T.DecimalType(20, 0)),
    ("float", T.FloatType()), ("double", T.DoubleType()), ("decimal", T.DecimalType(10, 0)),
    ("decimal(12,2)", T.DecimalType(12, 2)), ("decimal(38,10)", T.DecimalType(38, 10)),
    ("decimal(65,30)", T.StringType()), ("date", T.DateType()), ("datetime(6)", T.TimestampNTZType()),
    ("timestamp(3)", T.TimestampType()), ("time(6)", T.StringType()), ("year(4)", T.ShortType()),
    ("varchar(64)", T.StringType()), ("longtext", T.StringType()), ("varbinary(16)", T.BinaryType()),
    ("blob", T.BinaryType()), ("enum('a','b')", T.StringType()), ("set('x','y')", T.StringType()),
    ("bit(1)", T.LongType()), ("bit(63)", T.LongType()), ("bit(64)", T.DecimalType(20, 0)),
    ("json", T.StringType()),
]


@pytest.mark.parametrize("mysql, expected", CASES)
def test_spark_type(mysql, expected):
    assert spark_type(ColumnType.parse(mysql)) == expected


def test_json_as_variant_when_asked():
    assert spark_type(ColumnType.parse("json"), json_as_variant=True) == T.VariantType()


def test_boundary_values_survive_a_delta_table(spark, tmp_path):
    cols = [Column("id", "bigint(20) unsigned", nullable=False, primary_key=True),
            Column("ti", "tinyint(4)"), Column("tu", "tinyint(3) unsigned"), Column("iu", "int(10) unsigned"),
            Column("d", "decimal(38,10)"), Column("dt", "datetime(6)"), Column("ts", "timestamp(6)"),
            Column("b", "bit(64)"), Column("y", "year(4)"), Column("bin", "varbinary(4)")]
    schema = table_schema(TableInfo("db", "t", cols))
    assert not schema["id"].nullable and schema["ti"].nullable
    row = (Decimal(2**64 - 1), -128, 255, 2**32 - 1, Decimal("9999999999999999999999999999.9999999999"),
           dt.datetime(9999, 12, 31, 23, 59, 59, 999999), dt.datetime(2038, 1, 19, 3, 14, 7, 999999, dt.UTC),
           Decimal(2**64 - 1), 2155, b"\x00\xff\x00\x01")
    path = str(tmp_path / "t")
    spark.createDataFrame([row], schema).write.format("delta").save(path)
    back = spark.read.format("delta").load(path)
    # (a DataFrame write leaves every Delta column nullable; NOT NULL needs the table created first)
    assert [(f.name, f.dataType) for f in back.schema] == [(f.name, f.dataType) for f in schema]
    got = back.collect()[0]
    assert tuple(got)[:5] == row[:5] and got.dt == row[5] and got.b == row[7] and got.y == 2155
    assert got.ts.astimezone(dt.UTC) == row[6] and bytes(got.bin) == row[9]
