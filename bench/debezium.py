"""debezium (JSON) encode/decode throughput on one core, beside a naive baseline, on the canal-json bench table.
Targets (issue 6): encode >= 120k rows/s with the schema disabled, >= 60k with it."""

from __future__ import annotations

import json
import time

from canal_json import make_events, timed
from changefeed.config import build_config
from changefeed.debezium import DebeziumDecoder, DebeziumEncoder
from changefeed.model import Event


def naive(enc: DebeziumEncoder, ev: Event, schema: bool) -> bytes:
    """The straightforward way: every field's value and schema computed per row, stdlib json."""
    t = ev.table
    after = {c.name: enc.field_value(c, ev.after.get(c.name)) for c in t.columns}
    value = {"payload": {"source": {"db": t.schema, "table": t.table, "commit_ts": ev.commit_ts},
                         "ts_ms": int(time.time() * 1000), "op": "c", "before": None, "after": after}}
    if schema:
        value["schema"] = {"fields": [enc.field_schema(c) for c in t.columns]}
    return json.dumps(value, separators=(",", ":"), default=str).encode()


def run(n: int) -> list[dict]:
    events = make_events(n)
    out = []
    for schema in (False, True):
        cfg = build_config("debezium", {"debezium-disable-schema": str(not schema).lower()})
        enc, dec = DebeziumEncoder(cfg), DebeziumDecoder(cfg)
        msgs = [enc.encode(ev)[0] for ev in events]
        size = sum(len(m.value) for m in msgs)
        t_enc = timed(lambda enc=enc: [enc.encode(ev) for ev in events])
        t_dec = timed(lambda dec=dec, msgs=msgs: [dec.decode(m.value, m.key) for m in msgs])
        t_naive = timed(lambda enc=enc, schema=schema: [naive(enc, ev, schema) for ev in events])
        label = "with schema" if schema else "no schema"
        out.append({"name": f"debezium encode {label}", "rows_per_s": n / t_enc, "mb_per_s": size / t_enc / 1e6,
                    "baseline_rows_per_s": n / t_naive, "target": 60_000 if schema else 120_000})
        out.append({"name": f"debezium decode {label}", "rows_per_s": n / t_dec, "mb_per_s": size / t_dec / 1e6,
                    "baseline_rows_per_s": n / t_naive, "target": 0})
    return out
