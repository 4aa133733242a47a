"""Delta file statistics (an add action's `stats`) from a data file's Parquet footer, as Delta's writers record them.

Every Delta writer records, for each file it adds, its row count and the min, max and null count of the columns
the table indexes (the first 32 leaf columns, `delta.dataSkippingNumIndexedCols`, or exactly those named by
`delta.dataSkippingStatsColumns`): readers (Spark, delta-rs, DuckDB) skip a file whose range a filter excludes.
The commits made on the driver (`logfile`, `log_rs`, `log_jvm`) add files whose footers already hold these
figures per row group, so no data is read again. Conventions follow Delta's `StatisticsCollection`: min and max
only for numbers, dates, timestamps and strings (booleans and binaries get a null count only); a string is cut to
32 characters, its max then ending in a character above any it replaces; timestamps in milliseconds (the min
rounded down, the max up: never narrower than the rows). Float and double columns get no min or max here: a
footer's range leaves NaN out, which Spark orders above every number, so a reader could skip a file that holds one.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Iterator
from typing import Any

import orjson

from .tablefiles import MAPPING_MODE, physical_names

NUM_INDEXED = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS = "delta.dataSkippingStatsColumns"
DEFAULT_INDEXED = 32
PREFIX = 32  # Delta's spark.databricks.io.skipping.stringPrefixLength
ASCII_MAX = "\x7f"
UTF8_MAX = "\U0010ffff"
_RANGED = re.compile(r"byte|short|integer|long|date|timestamp|timestamp_ntz|string|decimal\(\d+,\s*\d+\)")


def _leaves(fields: list[dict[str, Any]], parent: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Each leaf column of a Delta schema (a struct's fields in turn; an array or map is one leaf), in order."""
    for f in fields:
        name = (*parent, f["name"])
        t = f["type"]
        if isinstance(t, dict) and t.get("type") == "struct":
            yield from _leaves(t["fields"], name)
        else:
            yield name, t


def _split_names(spec: str) -> list[tuple[str, ...]]:
    """`delta.dataSkippingStatsColumns`: comma-separated column names, nested ones dotted, any part backquoted."""
    out: list[tuple[str, ...]] = []
    parts: list[str] = []
    cur, quoted, i = "", False, 0
    while i < len(spec):
        ch = spec[i]
        if quoted:
            if ch == "`" and spec[i + 1:i + 2] == "`":
                cur += "`"
                i += 1
            elif ch == "`":
                quoted = False
            else:
                cur += ch
        elif ch == "`":
            quoted = True
        elif ch == ".":
            parts.append(cur.strip())
            cur = ""
        elif ch == ",":
            parts.append(cur.strip())
            out.append(tuple(parts))
            parts, cur = [], ""
        else:
            cur += ch
        i += 1
    if cur.strip() or parts:
        parts.append(cur.strip())
        out.append(tuple(parts))
    return [p for p in out if all(p)]


def indexed(schema_json: str, configuration: dict[str, str]) -> list[tuple[tuple[str, ...], Any]]:
    """The leaf columns (path, Delta type) Delta keeps statistics on for this schema and these properties."""
    leaves = list(_leaves(orjson.loads(schema_json)["fields"]))
    named = configuration.get(STATS_COLUMNS)
    if named is not None:
        wanted = {tuple(p.lower() for p in n) for n in _split_names(named)}
        # a named struct stands for all its leaves (Delta matches names case-insensitively)
        return [(p, t) for p, t in leaves
                if any(tuple(x.lower() for x in p[:k]) in wanted for k in range(1, len(p) + 1))]
    n = int(configuration.get(NUM_INDEXED, DEFAULT_INDEXED))
    return leaves if n < 0 else leaves[:n]


def truncate_min(s: str) -> str:
    return s if len(s) <= PREFIX else s[:PREFIX]


def truncate_max(s: str) -> str | None:
    """A string's max cut to the prefix, then one character above what it replaces (Delta's tie-breaker); None
    when no such end is found within twice the prefix (Delta then keeps no max)."""
    if len(s) <= PREFIX:
        return s
    n = PREFIX
    while n <= 2 * PREFIX:
        if n >= len(s):
            return s
        if s[n] == UTF8_MAX:
            n += 1
        elif s[n] < ASCII_MAX:
            return s[:n] + ASCII_MAX
        else:
            return s[:n] + UTF8_MAX
    return None


def _ms(v: dt.datetime, up: bool) -> dt.datetime:
    """A timestamp at millisecond precision: rounded down, or up (`up`) when it had more."""
    extra = v.microsecond % 1000
    v = v - dt.timedelta(microseconds=extra)
    return v + dt.timedelta(milliseconds=1) if up and extra else v


def _value(t: str, v: Any, scale: int, up: bool) -> Any:
    """A footer min/max in the form Delta's stats JSON holds for Delta type `t` (None: not kept)."""
    if t == "string":
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        if not isinstance(v, str):
            return None
        return truncate_max(v) if up else truncate_min(v)
    if t.startswith("decimal"):
        if isinstance(v, int) and not isinstance(v, bool):
            v = decimal.Decimal(v).scaleb(-scale)
        return v if isinstance(v, decimal.Decimal) else None
    if t == "date":
        return v.isoformat() if isinstance(v, dt.date) and not isinstance(v, dt.datetime) else None
    if t in ("timestamp", "timestamp_ntz"):
        if not isinstance(v, dt.datetime):
            return None  # (an INT96 column's footer holds no usable range)
        try:
            v = _ms(v, up)
        except OverflowError:  # 9999-12-31 23:59:59.999999 has no millisecond above it: no bound kept
            return None
        if t == "timestamp":
            v = v.astimezone(dt.UTC) if v.tzinfo is not None else v.replace(tzinfo=dt.UTC)
            return v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z"
        return v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}"
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def of_file(file: str, schema_json: str, configuration: dict[str, str], filesystem: Any = None) -> str:
    """The `stats` JSON of one Parquet data file of a table of that schema and properties (`filesystem`: pyarrow's,
    where the file is not local)."""
    import pyarrow.parquet as pq

    return of_metadata(pq.read_metadata(file, filesystem=filesystem), schema_json, configuration)


def of_metadata(md: Any, schema_json: str, configuration: dict[str, str]) -> str:
    """The `stats` JSON of a Parquet file whose footer is `md` (pyarrow's `FileMetaData`)."""
    cols = {tuple(md.schema.column(i).path.split(".")): i for i in range(md.num_columns)}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    # with column mapping, a column is named in the files, and in the stats, by its physical name (Delta's protocol)
    phys = physical_names(schema_json, configuration.get(MAPPING_MODE, "none")) or {}
    for logical, t in indexed(schema_json, configuration):
        path = (phys.get(logical[0], logical[0]), *logical[1:])
        i = cols.get(path)
        if i is None:  # an array or map (several Parquet leaves), or a column this file lacks
            if not any(c[:len(path)] == path for c in cols):  # missing: all its rows are null
                _put(nulls, path, md.num_rows)
            continue
        lo: Any = None
        hi: Any = None
        nc: int | None = 0
        ranged = isinstance(t, str) and bool(_RANGED.fullmatch(t))
        scale = int(t.rsplit(",", 1)[1].rstrip(")")) if ranged and t.startswith("decimal") else 0
        for g in range(md.num_row_groups):
            s = md.row_group(g).column(i).statistics
            if s is None or not s.has_null_count:
                nc = None
            elif nc is not None:
                nc += s.null_count
            if not ranged:
                continue
            if s is None or not s.has_min_max:
                if s is None or md.row_group(g).num_rows != s.null_count:  # (a row group of nulls has no range)
                    ranged = False
                continue
            try:
                a, b = _value(t, s.min, scale, False), _value(t, s.max, scale, True)
            except (OverflowError, ValueError):  # a date past Python's year 9999 (Spark writes them): no range
                a = b = None
            if a is None or b is None:
                ranged = False
                continue
            lo = a if lo is None or _key(t, a) < _key(t, lo) else lo
            hi = b if hi is None or _key(t, b) > _key(t, hi) else hi
        if ranged and lo is not None and hi is not None:
            _put(mins, path, lo)
            _put(maxs, path, hi)
        if nc is not None:
            _put(nulls, path, nc)
    stats: dict[str, Any] = {"numRecords": md.num_rows}
    if mins:
        stats["minValues"] = mins
        stats["maxValues"] = maxs
    if nulls:
        stats["nullCount"] = nulls
    return _json(stats)


def _key(t: str, v: Any) -> Any:
    """How values of type `t` order (strings by their UTF-8 bytes, as Spark and Parquet compare them)."""
    return v.encode("utf-8") if t == "string" else v


def _put(into: dict[str, Any], path: tuple[str, ...], v: Any) -> None:
    for p in path[:-1]:
        into = into.setdefault(p, {})
    into[path[-1]] = v


def _json(v: Any) -> str:
    """JSON with decimals as exact numbers (as Delta writes them), everything else as orjson writes it."""
    if isinstance(v, dict):
        return "{" + ",".join(orjson.dumps(k).decode() + ":" + _json(x) for k, x in v.items()) + "}"
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    return orjson.dumps(v).decode()
