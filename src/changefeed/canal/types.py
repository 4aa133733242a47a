"""canal-json's type columns: Java SQL type codes (`sqlType`) and MySQL type names (`mysqlType`)."""

from __future__ import annotations

from collections.abc import Callable

from ..mysqltypes import ColumnType

# java.sql.Types codes
BIT = -7
TINYINT = -6
SMALLINT = 5
INTEGER = 4
BIGINT = -5
REAL = 7
DOUBLE = 8
DECIMAL = 3
CHAR = 1
VARCHAR = 12
DATE = 91
TIME = 92
TIMESTAMP = 93
BINARY = -2
BLOB = 2004
CLOB = 2005

_BY_NAME = {
    "tinyint": TINYINT,
    "smallint": SMALLINT,
    "mediumint": INTEGER,
    "int": INTEGER,
    "bigint": BIGINT,
    "float": REAL,
    "double": DOUBLE,
    "decimal": DECIMAL,
    "date": DATE,
    "time": TIME,
    "datetime": TIMESTAMP,
    "timestamp": TIMESTAMP,
    "year": VARCHAR,
    "enum": INTEGER,
    "set": BIT,
    "bit": BIT,
    "json": VARCHAR,
    "vector": VARCHAR,
    "char": CHAR,
    "varchar": VARCHAR,
    "binary": BLOB,
    "varbinary": BLOB,
    "tinytext": CLOB,
    "text": CLOB,
    "mediumtext": CLOB,
    "longtext": CLOB,
    "tinyblob": BLOB,
    "blob": BLOB,
    "mediumblob": BLOB,
    "longblob": BLOB,
    "geometry": BINARY,
}

# unsigned integers move to a wider Java type when the value does not fit the signed one
_PROMOTION = {
    "tinyint": ((1 << 7) - 1, SMALLINT),
    "smallint": ((1 << 15) - 1, INTEGER),
    "int": ((1 << 31) - 1, BIGINT),
    "bigint": ((1 << 63) - 1, DECIMAL),
}


def java_sql_type(ctype: ColumnType) -> int:
    """The base code (tiflow internal/java.go MySQLType2JavaType)."""
    return _BY_NAME.get(ctype.name, VARCHAR)


def promotion(ctype: ColumnType) -> tuple[int, int, int] | None:
    """For unsigned integer columns: (the largest value of the base code, the base code, the wider code)."""
    if not ctype.unsigned or ctype.name not in _PROMOTION:
        return None
    limit, wider = _PROMOTION[ctype.name]
    return limit, java_sql_type(ctype), wider


def promoter(ctype: ColumnType) -> Callable[[int | None], int] | None:
    """For unsigned integer columns, the value-dependent code (tiflow getJavaSQLType); else None."""
    got = promotion(ctype)
    if got is None:
        return None
    limit, base, wider = got

    def code(v: int | None) -> int:
        return wider if v is not None and v > limit else base

    return code
