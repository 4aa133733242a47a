"""The MySQL/TiDB column type system.

Every protocol renders values differently, but all of them start from TiDB's view of a column:
its type code, flags (unsigned, zerofill, binary), display length and decimal, charset and
enum/set elements. `ColumnType.parse` turns the type text of a CREATE TABLE (or the short
type names canal-json writes) into that view; the value helpers turn event-line values into
the datum forms TiCDC's encoders receive (REFERENCE-NOTES §0) and back.

One module per concern, all re-exported here (import from `changefeed.mysqltypes`):

- `types`     TiDB's type codes, `Family`, `ColumnType` and the parser of type text
- `typetext`  the words of type text: aliases, argument lists, quoted SQL string literals
- `values`    event-line values to datums and back (`make_normalizer`, `make_json_out`)
- `gotext`    floats and JSON as Go and TiDB print them
- `text`      datums as the text TiCDC's JSON encoders write, and that text read back
- `tidb`      TiDB's FieldType numbers (flen, decimal, flags), enum/set member helpers
"""

from ..errors import TypeParseError, ValueError_
from .gotext import (
    canonical_float32,
    go_format_float32,
    go_format_float64,
    shortest_float32,
    tidb_json_text,
    to_float32,
)
from .text import _as_text as _as_text
from .text import make_text_formatter, make_text_parser
from .tidb import (
    escape_enum_option,
    name_to_enum_index,
    names_to_set_mask,
    split_escaped_list,
    tidb_decimal,
    tidb_flags,
    tidb_flen,
)
from .types import (
    INT_RANGES,
    TYPE_BIT,
    TYPE_BLOB,
    TYPE_DATE,
    TYPE_DATETIME,
    TYPE_DOUBLE,
    TYPE_DURATION,
    TYPE_ENUM,
    TYPE_FLOAT,
    TYPE_GEOMETRY,
    TYPE_INT24,
    TYPE_JSON,
    TYPE_LONG,
    TYPE_LONG_BLOB,
    TYPE_LONGLONG,
    TYPE_MEDIUM_BLOB,
    TYPE_NEWDECIMAL,
    TYPE_NULL,
    TYPE_SET,
    TYPE_SHORT,
    TYPE_STRING,
    TYPE_TIMESTAMP,
    TYPE_TINY,
    TYPE_TINY_BLOB,
    TYPE_VAR_STRING,
    TYPE_VARCHAR,
    TYPE_VECTOR,
    TYPE_YEAR,
    UNSPECIFIED,
    ColumnType,
    Family,
)
from .typetext import unquote_sql_string
from .values import make_json_out, make_normalizer, parse_decimal

__all__ = [
    "INT_RANGES",
    "TYPE_BIT",
    "TYPE_BLOB",
    "TYPE_DATE",
    "TYPE_DATETIME",
    "TYPE_DOUBLE",
    "TYPE_DURATION",
    "TYPE_ENUM",
    "TYPE_FLOAT",
    "TYPE_GEOMETRY",
    "TYPE_INT24",
    "TYPE_JSON",
    "TYPE_LONG",
    "TYPE_LONG_BLOB",
    "TYPE_LONGLONG",
    "TYPE_MEDIUM_BLOB",
    "TYPE_NEWDECIMAL",
    "TYPE_NULL",
    "TYPE_SET",
    "TYPE_SHORT",
    "TYPE_STRING",
    "TYPE_TIMESTAMP",
    "TYPE_TINY",
    "TYPE_TINY_BLOB",
    "TYPE_VAR_STRING",
    "TYPE_VARCHAR",
    "TYPE_VECTOR",
    "TYPE_YEAR",
    "UNSPECIFIED",
    "ColumnType",
    "Family",
    "TypeParseError",
    "ValueError_",
    "canonical_float32",
    "go_format_float32",
    "go_format_float64",
    "make_json_out",
    "make_normalizer",
    "make_text_formatter",
    "make_text_parser",
    "name_to_enum_index",
    "names_to_set_mask",
    "parse_decimal",
    "shortest_float32",
    "split_escaped_list",
    "escape_enum_option",
    "tidb_decimal",
    "tidb_flags",
    "tidb_flen",
    "tidb_json_text",
    "to_float32",
    "unquote_sql_string",
]
