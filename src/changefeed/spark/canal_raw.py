"""canal-json read straight from its JSON in the decode tasks (read_changes' default for canal-json streams whose
row messages are plain JSON): a well-formed row or watermark message becomes change rows with its `data`/`old`
objects as the images, canal-json's own value text (the "canal" dialect of `types.typed`), no datum round trip
(measured faster in Spark, see bench/RESULTS.md). Anything else (DDL, claim-check rows, a shape this path does
not take) is left to the protocol's decoder, which names what is wrong. The JVM's counterpart is canal_jvm.py.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..canal.decoder import plain_row_commit_ts
from ..model import Column
from .columns import Columns

# canal-json row kinds
_CANAL_KINDS = {"INSERT": "insert", "UPDATE": "update", "DELETE": "delete"}
# canal-json's own value text: a string or JSON null (anything else takes the decoder)
_TEXT_TYPES = frozenset((str, type(None)))


class CanalRaw:
    """The fast path of one decode task, appending to its output columns; remembers the last table shape it
    emitted per table (a row carries its table's shape when the shape is new)."""

    __slots__ = ("cols", "sparse", "before", "after", "shapes")

    def __init__(self, out: Columns) -> None:
        self.cols = out.dense
        self.sparse = out.sparse
        self.before = out.before
        self.after = out.after
        self.shapes: dict[tuple[str, str], tuple[Any, Any]] = {}  # the last table shape emitted, per table

    def take(self, topic: str, part: int, off: int, m: Any) -> bool:
        """A canal-json row or watermark message taken from its JSON as it is; False: not one."""
        if type(m) is not dict or m.get("isDdl"):
            return False
        etype = m.get("type")
        if etype == "TIDB_WATERMARK":
            tidb = m.get("_tidb")
            wts = tidb.get("watermarkTs") if type(tidb) is dict else None
            if type(wts) is not int or not 0 <= wts < 1 << 64:
                return False
            self.mark(topic, part, off, wts)
            return True
        kind = _CANAL_KINDS.get(etype) if type(etype) is str else None
        data, mt, db, tbl = m.get("data"), m.get("mysqlType"), m.get("database"), m.get("table")
        if kind is None or type(data) is not list or not data or type(mt) is not dict or not mt \
                or type(db) is not str or type(tbl) is not str:
            return False
        ts = plain_row_commit_ts(m)  # the decoder's own rule: a claim-check or handle-key-only row is not one
        if ts is None:
            return False
        old = m.get("old") if kind == "update" else None
        if kind == "update" and (type(old) is not list or len(old) != len(data)):
            return False
        pk = m.get("pkNames")
        shapes = self.shapes
        have = shapes.get((db, tbl))
        if (have is None or have[0] != mt or have[1] != pk) and not _plain_shape(mt, pk):
            return False
        keys = mt.keys()
        for i, d in enumerate(data):
            if type(d) is not dict or d.keys() != keys or not _TEXT_TYPES.issuperset(map(type, d.values())) or (
                    old is not None and (type(old[i]) is not dict
                                         or not _TEXT_TYPES.issuperset(map(type, old[i].values())))):
                return False
        shape = None
        if have is None or have[0] != mt or have[1] != pk:
            shapes[(db, tbl)] = (mt, pk)
            shape = orjson.dumps({"schema": db, "table": tbl, "mysqlType": mt, "pkNames": pk}).decode()
        c = self.cols
        before_col, after_col = self.before, self.after
        for i, d in enumerate(data):
            if shape is not None:
                self.sparse["table_def"][len(c["topic"])] = shape
                shape = None
            c["topic"].append(topic)
            c["partition"].append(part)
            c["offset"].append(off)
            c["idx"].append(i)
            c["kind"].append(kind)
            c["database"].append(db)
            c["table"].append(tbl)
            c["commit_ts"].append(ts)
            if kind == "insert":
                before_col.add(None)
                after_col.add(d)
            elif kind == "delete":
                before_col.add(d)
                after_col.add(None)
            else:
                before_col.add(old[i])  # type: ignore[index]
                after_col.add(d)
        return True

    def mark(self, topic: str, part: int, off: int, ts: int) -> None:
        """A watermark row."""
        c = self.cols
        for f, v in (("topic", topic), ("partition", part), ("offset", off), ("idx", 0), ("kind", "watermark"),
                     ("database", None), ("table", None), ("commit_ts", ts)):
            c[f].append(v)
        self.before.add(None)
        self.after.add(None)


def _plain_shape(mysql_types: dict[str, Any], pk: Any) -> bool:
    """Whether canal-json's `mysqlType`/`pkNames` make a table the lake can create (checked once per shape): else
    the decoder takes the message and names the field that is wrong."""
    if pk is not None and (type(pk) is not list or not all(type(n) is str and n in mysql_types for n in pk)):
        return False
    try:
        for n, mt in mysql_types.items():
            if type(mt) is not str:
                return False
            Column(name=n, mysql_type=mt)
    except (ValueError, TypeError):  # TypeParseError is a ValueError
        return False
    return True
