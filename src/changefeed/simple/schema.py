"""The simple protocol's TableSchema: our TableInfo to TiCDC's JSON/Avro shape and back.

TiCDC builds it from TiDB's column info (simple/message.go newTableSchema): columns in column-ID order
with `dataType` (the bare TypeToStr name, charset, collate, flen, decimal, elements, unsigned,
zerofill), nullability and the default; indexes from the table's index list, plus a synthetic
`primary` index when the key is the integer row handle (TiDB keeps no index for it).
"""

from __future__ import annotations

from typing import Any

from ..model import Column, Index, TableInfo
from ..mysqltypes import UNSPECIFIED, ColumnType, Family, tidb_decimal, tidb_flags, tidb_flen


def _pk_is_handle(t: TableInfo) -> bool:
    """TiDB's PKIsHandle: a one-column integer primary key is the row id and has no index of its own."""
    if len(t.pk_names) != 1 or not t.explicit_pk:
        return False
    col = t.by_name.get(t.pk_names[0])
    return col is not None and col.type.family is Family.INT


def _default(col: Column) -> Any:
    d = col.default
    if d is None:
        return None
    if col.type.family is Family.BIT:
        if isinstance(d, int):
            return d
        if isinstance(d, str) and d.isdigit():
            return int(d)
        if isinstance(d, str):  # TiDB keeps a BIT default as its raw bytes
            return int.from_bytes(d.encode("latin-1", "replace"), "big")
        return d
    if isinstance(d, bool):
        return "1" if d else "0"
    if isinstance(d, int | float):
        return str(d)
    if isinstance(d, bytes):  # a binary default: its bytes as Go's JSON writes a string (U+FFFD for non-UTF-8)
        return d.decode("utf-8", "replace")
    return d


def data_type(ctype: ColumnType) -> dict[str, Any]:
    """The `dataType` object, with Go's omitempty rules (length, decimal, elements, unsigned, zerofill)."""
    out: dict[str, Any] = {
        "mysqlType": ctype.name,
        "charset": ctype.effective_charset,
        "collate": ctype.effective_collate,
    }
    flen = tidb_flen(ctype)
    if flen:
        out["length"] = flen
    if ctype.family is not Family.FLOAT:
        dec = tidb_decimal(ctype)
        if dec:
            out["decimal"] = dec
    if ctype.elements:
        out["elements"] = list(ctype.elements)
    unsigned, zerofill = tidb_flags(ctype)
    if unsigned:
        out["unsigned"] = True
    if zerofill:
        out["zerofill"] = True
    return out


def _nullable_columns(t: TableInfo) -> set[str]:
    """The columns TiCDC writes `nullable: true`: not declared NOT NULL, and not in the primary key (MySQL makes a
    primary key's columns NOT NULL, so TiDB flags them so even where the definition given does not say)."""
    primary = {c.name for c in t.columns if c.primary_key}
    primary.update(n for idx in t.indexes if idx.primary for n in idx.columns)
    return {c.name for c in t.columns if c.nullable is not False and c.name not in primary}


def index_schemas(t: TableInfo) -> list[dict[str, Any]]:
    handle = _pk_is_handle(t)
    nullable = _nullable_columns(t)
    out = []
    for idx in t.indexes:
        if idx.primary and handle:
            continue
        out.append({
            "name": idx.name,
            "unique": idx.unique or idx.primary,
            "primary": idx.primary,
            "nullable": any(c in nullable for c in idx.columns),
            "columns": list(idx.columns),
        })
    if handle or (t.primary_columns and not any(i["primary"] for i in out)):
        out.append({"name": "primary", "unique": True, "primary": True, "nullable": False,
                    "columns": list(t.primary_columns)})
    return out


def table_schema(t: TableInfo) -> dict[str, Any]:
    """TiCDC's TableSchema JSON object (Go struct field order)."""
    nullable = _nullable_columns(t)
    return {
        "schema": t.schema,
        "table": t.table,
        "tableID": t.table_id or 0,
        "version": t.version or 0,
        "columns": [
            {"name": c.name, "dataType": data_type(c.type), "nullable": c.name in nullable,
             "default": _default(c)}
            for c in t.columns
        ],
        "indexes": index_schemas(t),
    }


# ------------------------------------------------------------------------------------------------
# back to our model
# ------------------------------------------------------------------------------------------------


def _quote(e: str) -> str:
    return "'" + e.replace("\\", "\\\\").replace("'", "''") + "'"


def type_text(dt: dict[str, Any]) -> str:
    """A column type string our type parser reads back to the same TiDB facts."""
    name = dt["mysqlType"]
    length = dt.get("length") or UNSPECIFIED
    dec = dt.get("decimal") or 0
    elements = dt.get("elements") or []
    if name in ("enum", "set"):
        text = f"{name}({','.join(_quote(e) for e in elements)})" if elements else name
    elif name == "decimal":
        text = f"decimal({length if length > 0 else 10},{dec})"
    elif name in ("datetime", "timestamp", "time"):
        if not dec and length > 0:
            # the Avro TableSchema carries no decimal for time types; their flen gives the fsp back
            base = 10 if name == "time" else 19
            dec = length - base - 1 if length > base + 1 else 0
        text = f"{name}({dec})" if dec else name
    elif name in ("float", "double"):
        text = f"{name}({length},{dec})" if dec and dec > 0 and length > 0 else name
    elif name in ("tinyint", "smallint", "mediumint", "int", "bigint", "bit", "char", "varchar", "binary",
                  "varbinary", "vector") and length > 0:
        text = f"{name}({length})"
    elif name in ("blob", "text") and length > 0 and length != 65535:
        text = f"{name}({length})"
    else:
        text = name
    if dt.get("unsigned") and name not in ("year", "bit"):
        text += " unsigned"
    if dt.get("zerofill") and name not in ("year", "bit"):
        text += " zerofill"
    return text


def _want(ok: bool, path: str, what: str) -> None:
    if not ok:
        raise ValueError(f"{path} must be {what}")


def _opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def check_schema(obj: Any) -> None:
    """A TableSchema of the right shape, else a ValueError naming the field: what passes here becomes a lake
    table, where a column named by a list would stop the consumer instead of being a dead letter."""
    _want(isinstance(obj, dict), "tableSchema", "an object")
    _want(isinstance(obj.get("table"), str) and _opt_str(obj.get("schema", obj.get("database"))),
          "schema/table", "strings")
    cols = obj.get("columns")
    _want(isinstance(cols, list), "columns", "an array")
    names: set[str] = set()
    for i, c in enumerate(cols):
        _want(isinstance(c, dict) and isinstance(c.get("name"), str), f"columns[{i}].name", "a string")
        dt = c.get("dataType")
        _want(isinstance(dt, dict) and isinstance(dt.get("mysqlType"), str), f"columns[{i}].dataType.mysqlType",
              "a string")
        _want(_opt_str(dt.get("charset")) and _opt_str(dt.get("collate")), f"columns[{i}].dataType",
              "charset/collate strings")
        for k in ("length", "decimal"):
            _want(dt.get(k) is None or type(dt.get(k)) is int, f"columns[{i}].dataType.{k}", "an integer")
        names.add(c["name"])
    idxs = obj.get("indexes")
    _want(idxs is None or isinstance(idxs, list), "indexes", "an array")
    for i, x in enumerate(idxs or []):
        _want(isinstance(x, dict) and isinstance(x.get("name"), str), f"indexes[{i}].name", "a string")
        ic = x.get("columns")
        _want(isinstance(ic, list) and all(isinstance(n, str) and n in names for n in ic), f"indexes[{i}].columns",
              "an array of the table's column names")
    for k in ("tableID", "version"):
        _want(obj.get(k) is None or type(obj.get(k)) is int, k, "an integer")


def table_from_schema(obj: dict[str, Any]) -> TableInfo:
    """A TableInfo from a TableSchema object (JSON, or the Avro record's native form)."""
    check_schema(obj)
    cols = []
    pk: list[str] = []
    uniques: set[str] = set()
    for idx in obj.get("indexes") or []:
        if idx.get("primary"):
            pk = list(idx["columns"])
        elif idx.get("unique") and len(idx["columns"]) == 1:
            uniques.add(idx["columns"][0])
    for c in obj["columns"]:
        dt = c["dataType"]
        cs = dt.get("charset")
        coll = dt.get("collate")
        string_like = dt["mysqlType"] in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum",
                                          "set")
        default = c.get("default")
        if dt["mysqlType"] == "bit" and isinstance(default, str):
            # JSON writes the number; TiCDC's Avro the raw bytes (read back with surrogateescape)
            default = int(default) if default.isdigit() else int.from_bytes(
                default.encode("utf-8", "surrogateescape"), "big")
        cols.append(Column(
            name=c["name"],
            mysql_type=type_text(dt),
            charset=cs if string_like else None,
            collate=coll if string_like else None,
            nullable=bool(c.get("nullable")),
            default=default,
            primary_key=c["name"] in pk,
            unique_key=c["name"] in uniques,
        ))
    indexes = [
        Index(name=i["name"], columns=list(i["columns"]), primary=bool(i.get("primary")),
              unique=bool(i.get("unique")))
        for i in obj.get("indexes") or []
    ]
    return TableInfo(
        schema=obj.get("schema", obj.get("database", "")),
        table=obj["table"],
        columns=cols,
        indexes=indexes,
        table_id=obj.get("tableID"),
        version=obj.get("version"),
    )
