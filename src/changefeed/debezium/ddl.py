"""Debezium schema-change messages for DDL, as TiCDC writes them (tiflow debezium/codec.go EncodeDDLEvent).

Key `{"payload": {"databaseName"}}` (io.debezium.connector.mysql.SchemaChangeKey); value payload `source,
ts_ms, databaseName, schemaName, ddl, tableChanges[{type, id, table}]` with every column's jdbcType,
typeName/typeExpression, charset, length, scale, position, optional ... TiCDC re-reads the statement, so
for the columns the statement itself defines a comment reads null and a time type's length is the fsp
written there (null when none is written).
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import EncodeError
from ..model import Column, Event, TableInfo
from ..mysqltypes import Family
from .jsonnum import go_json_float
from .jsonnum import raw_number as _num

CREATE = ("ActionCreateSchema", "ActionCreateTable", "ActionCreateTables", "ActionCreateView")
ALTER = ("ActionAddColumn", "ActionModifyColumn", "ActionDropColumn", "ActionMultiSchemaChange",
         "ActionAddTablePartition", "ActionRemovePartitioning", "ActionReorganizePartition",
         "ActionExchangeTablePartition", "ActionAlterTablePartitioning", "ActionTruncateTablePartition",
         "ActionDropTablePartition", "ActionRebaseAutoID", "ActionSetDefaultValue", "ActionModifyTableComment",
         "ActionModifyTableCharsetAndCollate", "ActionModifySchemaCharsetAndCollate", "ActionAddIndex",
         "ActionAlterIndexVisibility", "ActionRenameIndex", "ActionRenameTable", "ActionRenameTables",
         "ActionAddPrimaryKey", "ActionDropPrimaryKey")
DROP = ("ActionDropSchema", "ActionDropTable", "ActionDropIndex", "ActionDropView", "ActionTruncateTable")

_JDBC = {"tinyint": 5, "smallint": 5, "mediumint": 4, "int": 4, "year": 4, "float": 6, "double": 8, "decimal": 3,
         "timestamp": 2014, "datetime": 93, "bigint": -5, "date": 91, "time": 92, "enum": 1, "set": 1, "bit": -7,
         "json": 1111, "geometry": 1111, "char": 1, "binary": -2, "varchar": 12, "varbinary": -3}
_DEFAULT_FLEN = {"tinyint": 4, "smallint": 6, "mediumint": 9, "int": 11, "bigint": 20, "float": 12, "double": 22,
                 "bit": 1, "char": 1, "binary": 1, "varchar": 5, "varbinary": 5}


def change_type(action: str) -> str:
    if action in CREATE:
        return "CREATE"
    if action in ALTER:
        return "ALTER"
    if action in DROP:
        return "DROP"
    raise EncodeError(f"the debezium protocol has no schema-change message for DDL type {action}")


def _jdbc(col: Column) -> int:
    t = col.type
    if t.family in (Family.STRING, Family.BYTES) and t.name not in _JDBC:
        return 2004 if t.is_binary else 12  # text/blob types
    return _JDBC.get(t.name, 12)


def _type_names(col: Column) -> tuple[str, str]:
    t = col.type
    prefix = t.name.upper()
    if t.name in ("year", "bit", "varchar", "char", "decimal", "binary", "varbinary"):
        return prefix, prefix
    suffix = ""
    if t.name == "double" and t.decimal not in (-1, 0):
        suffix = f"({t.display_length},{t.decimal})"
    unsigned = " UNSIGNED ZEROFILL" if t.zerofill else " UNSIGNED" if t.unsigned else ""
    return prefix + suffix + unsigned, prefix + unsigned


def _length(col: Column, in_statement: bool, explicit: dict[str, tuple[int | None, int | None]]) -> int | None:
    t = col.type
    name = t.name
    if t.family in (Family.DATETIME, Family.TIMESTAMP, Family.TIME):
        if in_statement:
            fsp = explicit.get(col.name, (None, None))[1]
            return fsp
        return t.fsp
    if name in ("bit", "varchar", "char", "binary", "varbinary", "bigint", "float", "double"):
        flen = t.display_length
        return flen if flen != _DEFAULT_FLEN.get(name, flen) else None
    if name in ("tinyint", "smallint", "mediumint", "int"):
        default = _DEFAULT_FLEN[name] - (1 if t.unsigned else 0) + (1 if name == "tinyint" and t.zerofill else 0)
        flen = t.display_length
        return flen if flen != default else None
    if name == "year":
        if in_statement:
            return explicit.get(col.name, (None, None))[0]
        return t.display_length
    if name == "decimal":
        return t.display_length
    if name == "set":
        return 2 * len(t.elements) - 1
    if name == "enum":
        return 1
    return None


def _scale(col: Column) -> Any:
    """Written as a Go float64 (`6`, not `6.0`)."""
    t = col.type
    if t.name == "decimal":
        return _num(go_json_float(float(t.scale)))
    if t.name in ("float", "double"):
        return _num(go_json_float(float(t.decimal))) if t.decimal >= 0 else None
    return None


_COLDEF = re.compile(r"[`\"]?([A-Za-z0-9_$]+)[`\"]?\s+([A-Za-z]+)\s*(\(\s*(\d+)\s*\))?", re.S)


def _statement_columns(query: str, t: TableInfo, action: str) -> dict[str, tuple[int | None, int | None]]:
    """Columns the statement itself defines, with the length/fsp written there (None when not written)."""
    out: dict[str, tuple[int | None, int | None]] = {}
    names = {c.name.lower(): c for c in t.columns}
    for m in _COLDEF.finditer(query):
        col = names.get(m.group(1).lower())
        if col is None or m.group(2).lower() not in (col.type.name, "int", "integer", "bool", "boolean", "dec",
                                                      "numeric", "character", "real"):
            continue
        if action != "ActionCreateTable" and not re.search(
                r"\b(ADD|MODIFY|CHANGE)\b(\s+COLUMN)?\s+[`\"]?" + re.escape(m.group(1)), query, re.I | re.S) and not \
                re.search(r"\bCHANGE\b(\s+COLUMN)?\s+[`\"]?\w+[`\"]?\s+[`\"]?" + re.escape(m.group(1)), query,
                          re.I | re.S):
            continue
        n = int(m.group(4)) if m.group(4) else None
        out[col.name] = (n, n)
    return out


def _default_expression(col: Column) -> str | None:
    d = col.default
    if d is None:
        return None
    if isinstance(d, str) and d.upper() == "CURRENT_TIMESTAMP":
        return "1970-01-01 00:00:00"
    if col.type.family is Family.BIT:
        n = col.type.display_length
        v = d if isinstance(d, int) else int(d) if str(d).isdigit() else int.from_bytes(str(d).encode("latin-1"), "big")
        # TiCDC formats the default's stored bytes after they went through a Go string, where bytes that are not
        # UTF-8 became U+FFFD: b'1010101010' comes out as 10 + the bits of EF BF BD. Reproduced as TiCDC does it.
        raw = v.to_bytes((n + 7) // 8, "big").decode("utf-8", "replace").encode("utf-8")
        head = format(raw[0], "b").zfill(n % 8) if raw else ""
        return head + "".join(format(b, "08b") for b in raw[1:])
    if isinstance(d, bytes):  # a binary default: its bytes as a Go string, not UTF-8 ones as U+FFFD
        return d.decode("utf-8", "replace")
    return d if isinstance(d, str) else str(d)


def table_change(ev: Event) -> list[dict[str, Any]]:
    action = ev.ddl_type or "ActionNone"
    ctype = change_type(action)
    t = ev.table if action != "ActionDropTable" else (ev.pre_table or ev.table)
    if t is None or not t.table or action == "ActionTruncateTable":
        return []
    if action in ("ActionRenameTable",) and ev.pre_table is not None and ev.table is not None:
        ident = f'"{ev.pre_table.schema}"."{ev.pre_table.table}","{t.schema}"."{t.table}"'
    else:
        ident = f'"{t.schema}"."{t.table}"'
    if action == "ActionDropTable":
        return [{"type": ctype, "id": ident, "table": None}]
    explicit = _statement_columns(ev.query or "", t, action)
    in_all = action == "ActionCreateTable"
    columns = []
    for pos, c in enumerate(t.columns, 1):
        in_statement = in_all or c.name in explicit
        expr, name = _type_names(c)
        columns.append({
            "name": c.name, "jdbcType": _jdbc(c), "nativeType": None,
            "comment": None if in_statement or not c.comment else c.comment,
            "defaultValueExpression": _default_expression(c),
            "enumValues": [f"'{e}'" for e in c.type.elements] if c.type.elements else None,
            "typeName": name, "typeExpression": expr,
            "charsetName": c.type.effective_charset if c.type.family in (Family.STRING, Family.ENUM, Family.SET)
            else None,
            "length": _length(c, in_statement, explicit),
            "scale": _scale(c),
            "position": pos, "optional": c.nullable is not False,
            "autoIncremented": c.auto_increment, "generated": c.auto_increment,
        })
    return [{"type": ctype, "id": ident, "table": {"defaultCharsetName": t.charset or "utf8mb4",
                                                   "primaryKeyColumnNames": list(t.primary_columns), "columns": columns,
                                                   "comment": None}}]


def _s(field: str, opt: bool, typ: str) -> dict[str, Any]:
    return {"field": field, "optional": opt, "type": typ}


COLUMN_FIELDS = [
    _s("name", False, "string"), _s("jdbcType", False, "int32"), _s("nativeType", True, "int32"),
    _s("typeName", False, "string"), _s("typeExpression", True, "string"), _s("charsetName", True, "string"),
    _s("length", True, "int32"), _s("scale", True, "int32"), _s("position", False, "int32"),
    _s("optional", True, "boolean"), _s("autoIncremented", True, "boolean"), _s("generated", True, "boolean"),
    _s("comment", True, "string"), _s("defaultValueExpression", True, "string"),
    {"field": "enumValues", "optional": True, "type": "array", "items": {"type": "string", "optional": False}},
]

KEY_SCHEMA = {"type": "struct", "name": "io.debezium.connector.mysql.SchemaChangeKey", "optional": False,
              "version": 1, "fields": [{"field": "databaseName", "optional": False, "type": "string"}]}


def value_schema(source_schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "optional": False, "type": "struct", "version": 1, "name": "io.debezium.connector.mysql.SchemaChangeValue",
        "fields": [
            source_schema, _s("ts_ms", False, "int64"), _s("databaseName", True, "string"),
            _s("schemaName", True, "string"), _s("ddl", True, "string"),
            {"field": "tableChanges", "optional": False, "type": "array", "items": {
                "name": "io.debezium.connector.schema.Change", "optional": False, "type": "struct", "version": 1,
                "fields": [
                    _s("type", False, "string"), _s("id", False, "string"),
                    {"field": "table", "optional": True, "type": "struct", "name": "io.debezium.connector.schema.Table",
                     "version": 1, "fields": [
                         _s("defaultCharsetName", True, "string"),
                         {"field": "primaryKeyColumnNames", "optional": True, "type": "array",
                          "items": {"type": "string", "optional": False}},
                         {"field": "columns", "optional": False, "type": "array", "items": {
                             "name": "io.debezium.connector.schema.Column", "optional": False, "type": "struct",
                             "version": 1, "fields": COLUMN_FIELDS}},
                         _s("comment", True, "string")]}]}},
        ],
    }
