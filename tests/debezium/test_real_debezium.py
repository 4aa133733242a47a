"""Messages written by the real Debezium MySQL connector (tests/debezium/golden/debezium/README.md and
ticdc/testdata/, Debezium 2.4.0.Final output that TiCDC's own tests compare against)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from changefeed.debezium import DebeziumDecoder
from changefeed.errors import DecodeError
from changefeed.model import Kind

REAL = Path(__file__).parent / "golden" / "debezium"
REF = Path(__file__).parent / "golden" / "ticdc" / "testdata"


def test_doc_create_with_schema():
    [ev] = DebeziumDecoder().decode((REAL / "doc-create.value.json").read_bytes(),
                                    (REAL / "doc-create.key.json").read_bytes())
    assert ev.kind is Kind.INSERT and ev.before is None
    assert ev.after == {"id": 1004, "first_name": "Anne", "last_name": "Kretchmar", "email": "annek@noanswer.org"}
    assert ev.table.qualified == "inventory.customers" and ev.table.pk_names == ["id"]
    assert ev.table.by_name["id"].type.name == "int" and ev.table.by_name["id"].nullable is False
    assert ev.commit_ts == 0  # no commit_ts in real Debezium: source.ts_ms << 18 (0 in the doc)


@pytest.mark.parametrize(("name", "kind"), [("doc-update", Kind.UPDATE), ("doc-delete", Kind.DELETE)])
def test_doc_update_and_delete(name, kind):
    [ev] = DebeziumDecoder().decode((REAL / f"{name}.value.json").read_bytes())
    assert ev.kind is kind
    assert ev.before["id"] == 1004 and ev.before["email"] == "annek@noanswer.org"
    if kind is Kind.UPDATE:
        assert ev.after["email"] == "annek@noanswer.org" or ev.after["id"] == 1004


def test_tutorial_message_of_an_old_connector():
    [ev] = DebeziumDecoder().decode((REAL / "tutorial-create.value.json").read_bytes(),
                                    (REAL / "tutorial-create.key.json").read_bytes())
    assert ev.kind is Kind.INSERT and ev.after


def test_tombstone_gives_no_event():
    assert DebeziumDecoder().decode(None, (REAL / "doc-create.key.json").read_bytes()) == []


def test_reference_datatypes_of_real_debezium():
    v = (REF / "datatype.dbz.json").read_bytes()
    [ev] = DebeziumDecoder().decode(v, (REF / "datatype.dbz.key.json").read_bytes())
    after = ev.after
    assert after["col_d_2023"] == "2023-11-30"  # io.debezium.time.Date: days since the epoch (datatype.dml.sql)
    assert after["col_d_0000"] is None
    t = ev.table
    assert t.by_name["col_dt_fsp_6"].type.compact_str() == "datetime(6)"


def test_bad_input_is_named():
    dec = DebeziumDecoder()
    msg = orjson.loads((REAL / "doc-create.value.json").read_bytes())
    msg["payload"]["op"] = "x"
    with pytest.raises(DecodeError, match="unknown op 'x'") as e:
        dec.decode(orjson.dumps(msg))
    assert e.value.field == "payload.op"
    msg = orjson.loads((REAL / "doc-create.value.json").read_bytes())
    msg["payload"]["after"]["surprise"] = 1
    with pytest.raises(DecodeError, match="does not match its schema"):
        dec.decode(orjson.dumps(msg))
    with pytest.raises(DecodeError, match="not JSON"):
        dec.decode(b"{")


def test_schema_change_event_of_real_debezium():
    [ev] = DebeziumDecoder().decode((REAL / "doc-schema-change.value.json").read_bytes(),
                                    (REAL / "doc-schema-change.key.json").read_bytes())
    assert ev.kind is Kind.DDL and ev.query
    assert ev.ddl_type != "ActionNone"


def test_real_debezium_events_carry_their_binlog_position():
    [ev] = DebeziumDecoder().decode((REAL / "doc-create.value.json").read_bytes(),
                                    (REAL / "doc-create.key.json").read_bytes())
    assert ev.position["file"].endswith("-bin.000003") and ev.position["pos"] == 154 and ev.position["row"] == 0


def test_a_ticdc_message_without_its_key_is_an_error():
    from pathlib import Path as _P

    line = (_P(__file__).parent / "golden" / "ticdc" / "default.messages.jsonl").read_bytes().splitlines()
    ref = next(orjson.loads(x) for x in line if b'"insert-1"' in x)
    with pytest.raises(DecodeError, match="without its key") as e:
        DebeziumDecoder().decode(ref["value"].encode(), None)
    assert e.value.field == "key"


def test_option_to_leave_out_ddl_and_watermark():
    from changefeed.config import build_config
    from changefeed.debezium import DebeziumEncoder
    from changefeed.model import Event, TableInfo

    cfg = build_config("debezium", {"debezium-output-ddl-and-watermark": "false", "enable-tidb-extension": "true"})
    enc = DebeziumEncoder(cfg)
    assert enc.encode(Event(kind=Kind.WATERMARK, commit_ts=5)) == []
    assert enc.encode(Event(kind=Kind.DDL, commit_ts=5, table=TableInfo("d", "t"), query="TRUNCATE TABLE t",
                            ddl_type="ActionTruncateTable")) == []
