"""`changefeed encode` and `changefeed decode` on event-line files, beside a naive orjson script in the same run.

    .venv/bin/python bench/cli_codec.py [--rows 100000]

Both sides are whole processes, timed by the CPU they use (start-up, reading and writing files included): the CLI
as a user runs it (`changefeed encode -i events.jsonl -o messages.jsonl`, canal-json with TiDB's extension), and a
20-line script that reads each line with `orjson.loads`, builds a canal-json-shaped dict and writes it with
`orjson.dumps` (no value typing, no Go-compatible text: less work than the CLI does). The rows are
bench/canal_json.py's 11-column table. Target (issue 39): the CLI at least 2x the naive script, both ways.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from canal_json import make_events  # noqa: E402
from changefeed.eventline import EventWriter  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CHANGEFEED = ROOT / ".venv" / "bin" / "changefeed"
TARGET = 2.0

NAIVE_ENCODE = """
import sys, orjson
KINDS = {"insert": "INSERT", "update": "UPDATE", "delete": "DELETE"}
def text(v):
    return None if v is None else v if isinstance(v, str) else orjson.dumps(v).decode()
with open(sys.argv[1], "rb") as fin, open(sys.argv[2], "wb") as fout:
    for line in fin:
        ev = orjson.loads(line)
        t, cols = ev["table"], ev["table"]["columns"]
        data = {c["name"]: text(ev["after"].get(c["name"])) for c in cols}
        msg = {"id": 0, "database": t["schema"], "table": t["table"],
               "pkNames": [c["name"] for c in cols if c.get("primaryKey")], "isDdl": False,
               "type": KINDS[ev["kind"]], "es": ev["commitTs"] >> 18, "ts": 0, "sql": "",
               "sqlType": {c["name"]: 12 for c in cols}, "mysqlType": {c["name"]: c["mysqlType"] for c in cols},
               "old": None, "data": [data], "_tidb": {"commitTs": ev["commitTs"]}}
        fout.write(orjson.dumps({"key": None, "value": orjson.dumps(msg).decode()}) + b"\\n")
"""

NAIVE_DECODE = """
import sys, orjson
with open(sys.argv[1], "rb") as fin, open(sys.argv[2], "wb") as fout:
    for line in fin:
        msg = orjson.loads(orjson.loads(line)["value"])
        cols = [{"name": n, "mysqlType": t, "primaryKey": n in msg["pkNames"]} for n, t in msg["mysqlType"].items()]
        ev = {"kind": msg["type"].lower(), "commitTs": msg["_tidb"]["commitTs"],
              "table": {"schema": msg["database"], "table": msg["table"], "columns": cols},
              "preTable": None, "before": None, "after": msg["data"][0], "ddl": None}
        fout.write(orjson.dumps(ev) + b"\\n")
"""


def timed(cmd: list[str], repeat: int, env: dict[str, str]) -> float:
    """Best CPU seconds (user + system) of `repeat` runs of a command. CPU time, not the wall clock: the machine
    is shared, and a process waiting for a core is not slower code (the wall clock is printed beside it)."""
    best = float("inf")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best


def run(rows: int, repeat: int) -> list[dict]:
    """Measure encode and decode, ours and naive, alternately; one dict per direction."""
    with tempfile.TemporaryDirectory(prefix="cli-codec-") as tmp:
        d = Path(tmp)
        events, msgs, back = d / "events.jsonl", d / "messages.jsonl", d / "events-back.jsonl"
        writer = EventWriter()
        with open(events, "wb") as f:
            for ev in make_events(rows):
                f.write(writer.line(ev) + b"\n")
        (d / "naive_encode.py").write_text(NAIVE_ENCODE)
        (d / "naive_decode.py").write_text(NAIVE_DECODE)
        opt = ["--option", "enable-tidb-extension=true"]
        ours_enc = [str(CHANGEFEED), "encode", *opt, "-i", str(events), "-o", str(msgs)]
        naive_enc = [sys.executable, str(d / "naive_encode.py"), str(events), str(d / "naive-messages.jsonl")]
        ours_dec = [str(CHANGEFEED), "decode", *opt, "-i", str(msgs), "-o", str(back)]
        naive_dec = [sys.executable, str(d / "naive_decode.py"), str(msgs), str(d / "naive-back.jsonl")]
        # compiled modules kept, as an installed program has them after its first run (in a folder of the run's
        # own: this environment may set PYTHONDONTWRITEBYTECODE, and then every start compiles every module)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(d / "pycache")
        for cmd in (ours_enc, naive_enc):  # the decode input, and the compiled modules of both sides
            subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL, env=env)
        subprocess.run(ours_dec, check=True, stderr=subprocess.DEVNULL, env=env)
        t = {name: timed(cmd, repeat, env) for name, cmd in
             [("ours_enc", ours_enc), ("naive_enc", naive_enc), ("ours_dec", ours_dec), ("naive_dec", naive_dec)]}
        size_in, size_msgs = os.path.getsize(events), os.path.getsize(msgs)
    return [
        {"name": "changefeed encode (canal-json)", "s": t["ours_enc"], "naive_s": t["naive_enc"], "mb": size_in / 1e6},
        {"name": "changefeed decode (canal-json)", "s": t["ours_dec"], "naive_s": t["naive_dec"],
         "mb": size_msgs / 1e6},
    ]


def print_table(rows: int, results: list[dict]) -> None:
    print(f"{'benchmark':<32}{'rows/s':>10}{'MB/s':>8}{'naive rows/s':>14}{'ratio':>8}{'target':>8}  met")
    for r in results:
        ratio = r["naive_s"] / r["s"]
        print(f"{r['name']:<32}{rows / r['s']:>10,.0f}{r['mb'] / r['s']:>8.1f}{rows / r['naive_s']:>14,.0f}"
              f"{ratio:>7.2f}x{TARGET:>7.1f}x  {'yes' if ratio >= TARGET else 'NO'}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command; the best is kept")
    args = ap.parse_args()
    print(f"the CLI against a naive orjson script: {args.rows:,} rows of an 11-column table, files in and out, "
          "whole processes, rows per CPU second (best of each)")
    print_table(args.rows, run(args.rows, args.repeat))


if __name__ == "__main__":
    main()
