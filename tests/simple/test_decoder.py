"""The consumer side: schema cache, scenarios 1 and 2 of the spec, bad input, large messages."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from changefeed.checksum import row_checksum
from changefeed.codecs import make_decoder, make_encoder
from changefeed.config import build_config
from changefeed.errors import DecodeError
from changefeed.model import Column, Event, Index, Kind, TableInfo
from changefeed.simple import SimpleDecoder, SimpleEncoder

T1 = TableInfo("d", "t", [Column("id", "int", nullable=False, primary_key=True), Column("v", "varchar(10)")],
               [Index("PRIMARY", ["id"], primary=True, unique=True)], 5, 100)
T2 = TableInfo("d", "t", [Column("id", "int", nullable=False, primary_key=True), Column("v", "varchar(10)"),
                          Column("w", "bigint")], [Index("PRIMARY", ["id"], primary=True, unique=True)], 5, 200)


def ins(t: TableInfo, i: int) -> Event:
    row = {"id": i, "v": f"v{i}"}
    if "w" in t.by_name:
        row["w"] = i * 10
    return Event(kind=Kind.INSERT, commit_ts=i << 18, table=t, after=row)


@pytest.fixture(params=["json", "avro"])
def codec(request):
    cfg = build_config("simple", {"encoding-format": request.param})
    return SimpleEncoder(cfg, clock_ms=lambda: 1), SimpleDecoder(cfg), cfg


def test_scenario_1_from_the_start(codec):
    enc, dec, _ = codec
    stream = [Event(kind=Kind.DDL, commit_ts=1, table=T1, query="CREATE TABLE d.t (id int primary key, v varchar(10))",
                    ddl_type="ActionCreateTable"), ins(T1, 1),
              Event(kind=Kind.DDL, commit_ts=2 << 18, table=T2, pre_table=T1, query="ALTER TABLE d.t ADD w bigint",
                    ddl_type="ActionAddColumn"), ins(T2, 3)]
    out = [ev for e in stream for m in enc.encode(e) for ev in dec.decode(m.value)]
    assert [e.kind.value for e in out] == ["ddl", "insert", "ddl", "insert"]
    assert out[1].table.version == 100 and out[1].after == {"id": 1, "v": "v1"}
    assert out[3].table.version == 200 and out[3].after == {"id": 3, "v": "v3", "w": 30}
    assert out[2].pre_table.version == 100 and dec.pending == 0


def test_scenario_2_join_in_the_middle(codec):
    enc, dec, _ = codec
    msgs = [enc.encode(ins(T2, i))[0].value for i in range(3)]
    assert [dec.decode(m) for m in msgs] == [[], [], []]
    assert dec.pending == 3
    out = dec.decode(enc.encode(Event(kind=Kind.BOOTSTRAP, table=T2))[0].value)
    assert [e.kind.value for e in out] == ["bootstrap", "insert", "insert", "insert"]
    assert [e.after["id"] for e in out[1:]] == [0, 1, 2]  # arrival order kept
    dec.finish()


def test_bounded_buffer_and_unresolved_end_are_errors(codec):
    enc, _, cfg = codec
    dec = SimpleDecoder(cfg, max_pending=2)
    dec.decode(enc.encode(ins(T1, 1))[0].value)
    dec.decode(enc.encode(ins(T1, 2))[0].value)
    with pytest.raises(DecodeError, match="already wait for their schema"):
        dec.decode(enc.encode(ins(T1, 3))[0].value)
    with pytest.raises(DecodeError, match=r"2 DML messages never got their schema .*d\.t version 100"):
        dec.finish()


def test_bad_messages_are_named():
    dec = SimpleDecoder(build_config("simple"))
    with pytest.raises(DecodeError, match="unknown message type 'UPSERT'") as e:
        dec.decode(b'{"version":1,"type":"UPSERT","commitTs":1,"buildTs":1}')
    assert e.value.field == "type" and e.value.offset is not None
    with pytest.raises(DecodeError, match="unknown simple-protocol version 2"):
        dec.decode(b'{"version":2,"type":"WATERMARK","commitTs":1,"buildTs":1}')
    with pytest.raises(DecodeError, match="not JSON"):
        dec.decode(b'{"version":1,')
    enc = SimpleEncoder(build_config("simple"))
    dec.decode(enc.encode(Event(kind=Kind.BOOTSTRAP, table=T1))[0].value)
    bad = orjson.loads(enc.encode(ins(T1, 1))[0].value)
    bad["data"]["nope"] = "1"
    with pytest.raises(DecodeError, match="column 'nope' is not in the schema of d.t version 100") as e:
        dec.decode(orjson.dumps(bad))
    assert e.value.field == "data.nope"


def test_checksums_are_verified():
    dec = SimpleDecoder(build_config("simple"))
    enc = SimpleEncoder(build_config("simple"))
    dec.decode(enc.encode(Event(kind=Kind.BOOTSTRAP, table=T1))[0].value)
    msg = orjson.loads(enc.encode(ins(T1, 1))[0].value)
    good = row_checksum(T1, {"id": 1, "v": "v1"})
    msg["checksum"] = {"version": 1, "corrupted": False, "current": good, "previous": 0}
    [ev] = dec.decode(orjson.dumps(msg))
    assert ev.after == {"id": 1, "v": "v1"}
    msg["checksum"]["current"] = good ^ 1
    with pytest.raises(DecodeError, match="row checksum mismatch"):
        dec.decode(orjson.dumps(msg))
    msg["checksum"] = {"version": 1, "corrupted": True, "current": good, "previous": 0}
    with pytest.raises(DecodeError, match="marked corrupted"):
        dec.decode(orjson.dumps(msg))


BIG = TableInfo("d", "big", [Column("id", "int", nullable=False, primary_key=True), Column("blob", "longblob")],
                [Index("PRIMARY", ["id"], primary=True, unique=True)], 9, 1)


def test_handle_key_only_and_claim_check(tmp_path: Path):
    ev = Event(kind=Kind.INSERT, commit_ts=1 << 18, table=BIG, after={"id": 1, "blob": bytes(5000)})
    cfg = build_config("simple", {"max-message-bytes": "1000", "large-message-handle-option": "handle-key-only"})
    [m] = SimpleEncoder(cfg).encode(ev)
    msg = orjson.loads(m.value)
    assert msg["handleKeyOnly"] is True and msg["data"] == {"id": "1"}
    uri = f"file://{tmp_path}"
    cfg = build_config("simple", {"max-message-bytes": "1000", "large-message-handle-option": "claim-check",
                                  "claim-check-storage-uri": uri})
    enc = make_encoder(cfg, bootstrap=False)
    [m] = enc.encode(ev)
    msg = orjson.loads(m.value)
    assert msg["claimCheckLocation"].startswith(uri) and msg["handleKeyOnly"] is True
    dec = make_decoder(build_config("simple"))
    dec.decode(SimpleEncoder(build_config("simple")).encode(Event(kind=Kind.BOOTSTRAP, table=BIG))[0].value)
    [full] = dec.decode(m.value)
    assert full.after == ev.after


@pytest.mark.parametrize("codec_name", ["snappy", "lz4"])
def test_compression(codec_name):
    cfg = build_config("simple", {"large-message-handle-compression": codec_name})
    enc, dec = SimpleEncoder(cfg), SimpleDecoder(cfg)
    dec.decode(enc.encode(Event(kind=Kind.BOOTSTRAP, table=T1))[0].value)
    raw = enc.encode(ins(T1, 4))[0].value
    assert not raw.startswith(b"{")
    [ev] = dec.decode(raw)
    assert ev.after == {"id": 4, "v": "v4"}


@pytest.mark.parametrize("where", ["s3://bucket/changefeed/claims", "file:///data/producer/claims"])
def test_claim_check_is_read_from_the_consumers_storage_by_file_name(tmp_path: Path, where: str):
    """TiCDC's consumers keep only the file name of `claimCheckLocation` (`filepath.Split`) and read it from their
    own configured storage: the producer's bucket or folder need not be reachable."""
    ev = Event(kind=Kind.INSERT, commit_ts=1 << 18, table=BIG, after={"id": 1, "blob": bytes(5000)})
    produced = tmp_path / "produced"
    cfg = build_config("simple", {"max-message-bytes": "1000", "large-message-handle-option": "claim-check",
                                  "claim-check-storage-uri": f"file://{produced}"})
    [m] = make_encoder(cfg, bootstrap=False).encode(ev)
    msg = orjson.loads(m.value)
    [stored] = list(produced.iterdir())
    msg["claimCheckLocation"] = f"{where}/{stored.name}"  # as a producer writing elsewhere names it
    mine = tmp_path / "mine"
    mine.mkdir()
    stored.rename(mine / stored.name)
    dec = make_decoder(build_config("simple", {"claim-check-storage-uri": f"file://{mine}"}))
    dec.decode(SimpleEncoder(build_config("simple")).encode(Event(kind=Kind.BOOTSTRAP, table=BIG))[0].value)
    [full] = dec.decode(orjson.dumps(msg))
    assert full.after == ev.after


@pytest.mark.parametrize(("action", "query", "dtype"), [
    # getDDLType (tiflow and ticdc pkg/sink/codec/simple/message.go) has no plural column actions: QUERY
    ("ActionAddColumns", "ALTER TABLE d.t ADD COLUMN (w bigint)", "QUERY"),
    ("ActionDropColumns", "ALTER TABLE d.t DROP COLUMN w", "QUERY"),
    # ticdc's lists EXCHANGE PARTITION with the ALTERs
    ("ActionExchangeTablePartition", "ALTER TABLE d.t EXCHANGE PARTITION p0 WITH TABLE d.t2", "ALTER"),
    ("ActionAddColumn", "ALTER TABLE d.t ADD w bigint", "ALTER"),
])
def test_ddl_type_is_the_simple_protocols_own(action, query, dtype):
    enc = SimpleEncoder(build_config("simple"))
    [m] = enc.encode(Event(kind=Kind.DDL, commit_ts=2 << 18, table=T2, pre_table=T1, query=query, ddl_type=action))
    assert orjson.loads(m.value)["type"] == dtype


def test_exchange_partition_from_ticdc_is_read_as_such():
    """ticdc writes EXCHANGE PARTITION as an ALTER; its consumer takes the action from the SQL."""
    enc = SimpleEncoder(build_config("simple"))
    [m] = enc.encode(Event(kind=Kind.DDL, commit_ts=2 << 18, table=T2, pre_table=T1, ddl_type="ActionAddColumn",
                           query="ALTER TABLE d.t ADD w bigint"))
    msg = orjson.loads(m.value)
    msg["sql"] = "ALTER TABLE d.t EXCHANGE PARTITION p0 WITH TABLE d.t2"
    dec = SimpleDecoder(build_config("simple"))
    [ev] = dec.decode(orjson.dumps(msg))
    assert ev.kind is Kind.DDL and ev.ddl_type == "ActionExchangeTablePartition"


def test_a_partition_rows_table_id_is_its_partitions(codec):
    """REFERENCE-NOTES (simple/message.go): a DML's `tableID` is the physical (partition) id; BOOTSTRAP and DDL carry
    the table's own (`tableSchema.tableID`). Read back, the row keeps its partition's id beside its table."""
    enc, dec, cfg = codec
    boot = enc.encode(Event(kind=Kind.BOOTSTRAP, table=T1))[0].value
    row = ins(T1, 7)
    row.physical_table_id = 9
    msgs = [m.value for m in enc.encode(row)]
    plain = enc.encode(ins(T1, 8))[0].value
    if cfg.encoding_format == "json":
        assert orjson.loads(msgs[0])["tableID"] == 9
        assert orjson.loads(plain)["tableID"] == 5 and orjson.loads(boot)["tableSchema"]["tableID"] == 5
    [b] = dec.decode(boot)
    [got] = dec.decode(msgs[0])
    [other] = dec.decode(plain)
    assert b.table.table_id == 5
    assert got.physical_table_id == 9 and got.table.table_id == 5 and got.after == {"id": 7, "v": "v7"}
    assert other.physical_table_id is None


def test_a_partition_rows_message_differs_from_its_tables_only_in_the_id(codec):
    """The byte templates hold the table's id: a partition's row takes the reference path, which gives the same
    message as for the table's own row but for `tableID`."""
    enc, _, cfg = codec
    row = ins(T1, 7)
    mine = enc.encode(row)[0].value
    row.physical_table_id = 9
    part = enc.encode(row)[0].value
    if cfg.encoding_format == "json":
        assert part == mine.replace(b'"tableID":5,', b'"tableID":9,')
    else:  # Avro's tableID is a zigzag long: 5 -> 0x0a, 9 -> 0x12, after the database and table strings
        assert len(part) == len(mine) and sum(a != b for a, b in zip(part, mine, strict=True)) == 1


def test_a_vector_column_keeps_its_dimension():
    """TiCDC's decoder sets a VECTOR's flen from the schema's `length` (message.go newTiColumnInfo)."""
    from changefeed.simple.schema import table_from_schema

    t = table_from_schema({"schema": "d", "table": "t", "tableID": 1, "version": 1, "indexes": [], "columns": [
        {"name": "v", "dataType": {"mysqlType": "vector", "charset": "binary", "collate": "binary", "length": 3},
         "nullable": True, "default": None}]})
    assert t.by_name["v"].type.full_str() == "vector(3)"
