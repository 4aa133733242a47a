"""simple-protocol encode/decode throughput (JSON and Avro) on one core, beside naive baselines.

The 11-column table of the canal-json bench, and a 65-column row as wide as TiCDC's own Avro marshaller
benchmark (which does ~34k rows/s per core in Go). Targets (issue 4): JSON encode >= 120k rows/s,
Avro encode >= 60k rows/s.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import time

import fastavro

from canal_json import TABLE, make_events, timed
from changefeed.config import build_config
from changefeed.model import Column, Event, Index, Kind, TableInfo
from changefeed.mysqltypes import make_text_formatter
from changefeed.simple import SimpleDecoder, SimpleEncoder
from changefeed.simple.encoder import load_avro_schema


def wide_table() -> TableInfo:
    kinds = ["bigint", "int", "decimal(20,4)", "varchar(64)", "datetime(6)", "double", "tinyint", "date",
             "varbinary(32)", "timestamp(3)", "json", "enum('a','b','c')", "bigint unsigned"]
    cols = [Column("id", "bigint", nullable=False, primary_key=True)]
    cols += [Column(f"c{i}", kinds[i % len(kinds)], nullable=True) for i in range(64)]
    return TableInfo("bench", "wide", cols, [Index("PRIMARY", ["id"], primary=True, unique=True)], 101, 1)


def wide_events(n: int) -> list[Event]:
    t = wide_table()
    rnd = random.Random(7)
    samples = {
        "bigint": lambda: rnd.randrange(-(1 << 40), 1 << 40), "int": lambda: rnd.randrange(-1000, 1000),
        "decimal": lambda: f"{rnd.randrange(10**8)}.{rnd.randrange(10**4):04d}",
        "varchar": lambda: f"name-{rnd.randrange(10**6)}", "datetime": lambda: "2026-11-22 10:11:12.123456",
        "double": lambda: rnd.random() * 1000, "tinyint": lambda: rnd.randrange(-128, 128),
        "date": lambda: "2026-11-22", "varbinary": lambda: rnd.randbytes(16),
        "timestamp": lambda: "2026-11-22 10:11:12.123", "json": lambda: '{"a": 1}', "enum": lambda: 2,
    }
    out = []
    for i in range(n):
        row = {"id": i}
        for c in t.columns[1:]:
            key = c.type.name if c.type.name in samples else ("bigint" if c.type.name == "bigint" else "int")
            v = samples[key]()
            if c.type.name == "bigint" and c.type.unsigned:
                v = rnd.randrange(0, 1 << 64)
            row[c.name] = None if (i + len(c.name)) % 11 == 0 else v
        out.append(Event(kind=Kind.INSERT, commit_ts=(i + 1) << 18, table=t, after=row))
    return out


def naive_json(ev: Event) -> bytes:
    t = ev.table
    data = {}
    for c in t.columns:
        v = ev.after[c.name]
        data[c.name] = None if v is None else make_text_formatter(c.type, "base64")(v)
    msg = {"version": 1, "database": t.schema, "table": t.table, "tableID": t.table_id, "type": "INSERT",
           "commitTs": ev.commit_ts, "buildTs": int(time.time() * 1000), "schemaVersion": t.version,
           "data": dict(sorted(data.items()))}
    return json.dumps(msg, separators=(",", ":")).encode()


_SCHEMA = load_avro_schema()


def naive_avro(ev: Event) -> bytes:
    """fastavro's own union resolution, no precomputation: the straightforward way to use it."""
    t = ev.table
    data = {}
    for c in t.columns:
        v = ev.after[c.name]
        if v is None:
            data[c.name] = None
        elif c.type.name == "bigint" and c.type.unsigned:
            data[c.name] = ("com.pingcap.simple.avro.UnsignedBigint", {"value": v - (1 << 64) if v >= 1 << 63 else v})
        elif c.type.name == "timestamp":
            data[c.name] = ("com.pingcap.simple.avro.Timestamp", {"location": "UTC", "value": v})
        elif isinstance(v, float):
            data[c.name] = ("double", v)
        else:
            data[c.name] = v
    payload = {"version": 1, "database": t.schema, "table": t.table, "tableID": t.table_id, "type": "INSERT",
               "commitTs": ev.commit_ts, "buildTs": int(time.time() * 1000), "schemaVersion": t.version,
               "claimCheckLocation": None, "handleKeyOnly": None, "checksum": None, "data": data, "old": None}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _SCHEMA, ("com.pingcap.simple.avro.Message", {
        "type": "DML", "payload": ("com.pingcap.simple.avro.DML", payload)}))
    return buf.getvalue()


def _measure(label: str, events: list[Event], fmt: str, naive, target: int) -> list[dict]:
    cfg = build_config("simple", {"encoding-format": fmt})
    enc = SimpleEncoder(cfg)
    dec = SimpleDecoder(cfg)
    dec.decode(enc.encode(Event(kind=Kind.BOOTSTRAP, table=events[0].table))[0].value)
    values = [enc.encode(ev)[0].value for ev in events]
    n = len(events)
    size = sum(len(v) for v in values)
    t_enc = timed(lambda: [enc.encode(ev) for ev in events])
    t_dec = timed(lambda: [dec.decode(v) for v in values])
    naive_values = [naive(ev) for ev in events]
    t_nenc = timed(lambda: [naive(ev) for ev in events])
    t_ndec = timed(lambda: [json.loads(v) for v in naive_values]) if fmt == "json" else timed(
        lambda: [fastavro.schemaless_reader(io.BytesIO(v), _SCHEMA, None) for v in naive_values])
    return [
        {"name": f"simple {fmt} encode {label}", "rows_per_s": n / t_enc, "mb_per_s": size / t_enc / 1e6,
         "baseline_rows_per_s": n / t_nenc, "target": target},
        {"name": f"simple {fmt} decode {label}", "rows_per_s": n / t_dec, "mb_per_s": size / t_dec / 1e6,
         "baseline_rows_per_s": n / t_ndec, "target": 0},
    ]


def run(n: int) -> list[dict]:
    narrow = make_events(n)
    wide = wide_events(max(n // 5, 1000))
    assert narrow[0].table is TABLE
    return (_measure("11 cols", narrow, "json", naive_json, 120_000)
            + _measure("11 cols", narrow, "avro", naive_avro, 60_000)
            + _measure("65 cols", wide, "json", naive_json, 0)
            + _measure("65 cols", wide, "avro", naive_avro, 0))


def main() -> None:
    from canal_json import print_table

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    args = ap.parse_args()
    print_table(run(args.rows))


if __name__ == "__main__":
    main()
