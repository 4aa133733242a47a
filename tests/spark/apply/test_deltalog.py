"""Which tables `multiwrite` may rewrite from another writer's files (no Spark): only plain ones, whose
bookkeeping is all in their AddFile/RemoveFile actions."""

from __future__ import annotations

import orjson

from changefeed.spark.apply.deltalog import file_name, local_folder
from changefeed.spark.apply.tablefiles import TableFiles, field_ids, refusal

PLAIN = {"minReaderVersion": 1, "minWriterVersion": 2}


def test_a_plain_table_may_be_rewritten() -> None:
    assert refusal(PLAIN, {"partitionColumns": [], "configuration": {"changefeed.app.ddlVersion": "7"}},
                    [{"path": "a.parquet"}]) is None


def test_tables_with_what_only_deltas_writers_keep_are_refused() -> None:
    dv = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
          "writerFeatures": ["deletionVectors"]}
    assert refusal(dv, {}, []) == "table features"
    # a reader feature allowed, a writer feature with bookkeeping of its own beside it
    assert refusal({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz"],
                    "writerFeatures": ["timestampNtz", "domainMetadata"]}, {}, []) == "table features"
    assert refusal({"minReaderVersion": 1, "minWriterVersion": 4}, {}, []) == "table features"  # CDF, generated
    assert refusal({"minReaderVersion": 2, "minWriterVersion": 5}, {}, []) == "table features"  # (not mapped)
    assert refusal(PLAIN, {"partitionColumns": ["d"]}, []) == "partitioned"
    assert refusal(PLAIN, {"configuration": {"delta.enableChangeDataFeed": "true"}}, []) \
        == "delta.enableChangeDataFeed"
    assert refusal(PLAIN, {"configuration": {"delta.appendOnly": "true"}}, []) == "delta.appendOnly"
    assert refusal(PLAIN, {"configuration": {"delta.constraints.pos": "id > 0"}}, []) == "delta.constraints.pos"
    assert refusal(PLAIN, {"configuration": {"delta.columnMapping.mode": "id"}}, []) == "delta.columnMapping.mode"
    assert refusal(PLAIN, {}, [{"path": "a", "deletionVector": {"storageType": "u"}}]) == "deletion vectors"


def test_a_table_of_timestamp_ntz_columns_may_be_rewritten() -> None:
    # what Delta's CREATE TABLE makes for a TIMESTAMP_NTZ column: the feature, and writer version 2's features
    ntz = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz"],
           "writerFeatures": ["appendOnly", "invariants", "timestampNtz"]}
    assert refusal(ntz, {"configuration": {}, "schemaString": '{"type":"struct","fields":[]}'}, []) is None
    # ... unless a column carries an invariant, or the table is append-only
    inv = '{"fields":[{"name":"a","metadata":{"delta.invariants":"{\\"expression\\":\\"a > 0\\"}"}}]}'
    assert refusal(ntz, {"schemaString": inv}, []) == "column invariants"
    assert refusal(ntz, {"configuration": {"delta.appendOnly": "true"}}, []) == "delta.appendOnly"


def test_settings_that_change_nothing_for_a_writer_are_notrefusals() -> None:
    assert refusal(PLAIN, {"configuration": {"delta.enableChangeDataFeed": "false",
                                              "delta.columnMapping.mode": "none"}}, []) is None


def test_a_files_name_is_read_as_spark_reports_it() -> None:
    assert file_name("part-00000-x.snappy.parquet") == "part-00000-x.snappy.parquet"
    assert file_name("d%3D1/part%20a.parquet") == "part a.parquet"


def test_only_a_lake_on_the_local_file_system_is_committed_by_delta_rs() -> None:
    assert local_folder("/tmp/lake/db/t") == "/tmp/lake/db/t"
    assert local_folder("file:///tmp/lake/a%20b") == "/tmp/lake/a b"
    assert local_folder("file:/tmp/lake") == "/tmp/lake"
    assert local_folder("lake/db/t") == "lake/db/t"  # relative: to the working folder, as Hadoop takes it
    assert local_folder("hdfs://nn:8020/lake") is None
    assert local_folder("s3a://bucket/lake") is None
    assert local_folder("file://otherhost/lake") is None
    # a path without a scheme is on Hadoop's default file system, which may not be the local one
    assert local_folder("/lake/db/t", "hdfs://nn:8020") is None
    assert local_folder("/lake/db/t", "file:///") == "/lake/db/t"


MAPPED_SCHEMA = ('{"type":"struct","fields":['
                 '{"name":"id","type":"long","nullable":false,"metadata":{"delta.columnMapping.id":1,'
                 '"delta.columnMapping.physicalName":"id"}},'
                 '{"name":"remark","type":"string","nullable":true,"metadata":{"delta.columnMapping.id":2,'
                 '"delta.columnMapping.physicalName":"note"}},'
                 '{"name":"added","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":3,'
                 '"delta.columnMapping.physicalName":"col-7d1e"}}]}')


def test_a_table_with_column_mapping_by_name_may_be_rewritten_under_its_physical_names() -> None:
    """What a RENAME or DROP COLUMN turns on (`table_features`): the table stays on the rewrite, which reads and
    writes its files by their physical names (the soak's lag step was this table going to MERGE for good)."""
    mapped = {"configuration": {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "3"},
              "schemaString": MAPPED_SCHEMA}
    assert refusal({"minReaderVersion": 2, "minWriterVersion": 5}, mapped, []) is None
    assert refusal({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["columnMapping"],
                    "writerFeatures": ["columnMapping", "invariants", "appendOnly"]}, mapped, []) is None
    # what Delta makes of a table with TIMESTAMP_NTZ columns (table features) when column mapping comes on
    assert refusal({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz", "columnMapping"],
                    "writerFeatures": ["checkConstraints", "generatedColumns", "timestampNtz", "invariants",
                                       "changeDataFeed", "appendOnly", "columnMapping"]}, mapped, []) is None
    # writer 5 allows more than column mapping: each is looked for
    generated = MAPPED_SCHEMA.replace('"delta.columnMapping.id":3,', '"delta.generationExpression":"id + 1",'
                                      '"delta.columnMapping.id":3,')
    assert refusal({"minReaderVersion": 2, "minWriterVersion": 5}, {**mapped, "schemaString": generated}, []) \
        == "generated columns"
    assert refusal({"minReaderVersion": 2, "minWriterVersion": 5},
                   {**mapped, "configuration": {**mapped["configuration"], "delta.enableChangeDataFeed": "true"}},
                   []) == "delta.enableChangeDataFeed"
    assert refusal({"minReaderVersion": 2, "minWriterVersion": 6}, mapped, []) == "table features"  # identity
    nested = '{"type":"struct","fields":[{"name":"s","type":{"type":"struct","fields":[]},"metadata":{}}]}'
    assert refusal({"minReaderVersion": 2, "minWriterVersion": 5}, {**mapped, "schemaString": nested}, []) \
        == "column mapping of nested columns"
    tf = TableFiles(4, MAPPED_SCHEMA, {}, None, mapped["configuration"])
    assert tf.physical() == {"id": "id", "remark": "note", "added": "col-7d1e"}
    assert field_ids(MAPPED_SCHEMA) == {"id": 1, "remark": 2, "added": 3}
    assert TableFiles(4, MAPPED_SCHEMA, {}, None, {}).physical() is None  # no mapping: the names are the same


def _widened(*changes: tuple[str, str, str]) -> str:
    """A schema whose columns record type changes (name, from, to), as Delta's ALTER COLUMN ... TYPE leaves it."""
    fields = [{"name": "id", "type": "long", "nullable": False, "metadata": {}}]
    for name, old, new in changes:
        fields.append({"name": name, "type": new, "nullable": False,
                       "metadata": {"delta.typeChanges": [{"toType": new, "fromType": old}]}})
    return orjson.dumps({"type": "struct", "fields": fields}).decode()


def test_a_table_with_type_widening_may_be_rewritten_where_sparks_reader_widens_its_old_files() -> None:
    """What a widening MODIFY COLUMN turns on (Delta 4.0's `typeWidening`, as Delta leaves the protocol): the table
    stays on the rewrite (its old files, of the narrow type, read as the wide one by Spark's Parquet reader) rather
    than Delta's MERGE for the rest of its life (app.orders at 5,000 events/s)."""
    widening = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["typeWidening"],
                "writerFeatures": ["typeWidening", "invariants", "appendOnly"]}
    conf = {"configuration": {"delta.enableTypeWidening": "true"}}
    for old, new in (("decimal(10,2)", "decimal(12,2)"), ("decimal(5,2)", "decimal(20,2)"), ("integer", "long"),
                     ("byte", "short"), ("float", "double")):
        assert refusal(widening, {**conf, "schemaString": _widened(("c", old, new))}, []) is None, (old, new)
    # with column mapping too (a table renamed and widened)
    both = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["columnMapping", "typeWidening"],
            "writerFeatures": ["columnMapping", "typeWidening", "invariants", "appendOnly"]}
    assert refusal(both, {"configuration": {"delta.columnMapping.mode": "name", "delta.enableTypeWidening": "true"},
                          "schemaString": _widened(("c", "integer", "long"))}, []) is None
    # changes the files would need converting for (a scale raised, an integer to a decimal or double, a date to a
    # timestamp), or of a nested field: Delta's MERGE, which reads them through Delta's own reader
    unread = "type widening Spark's Parquet reader does not make"
    for old, new in (("decimal(10,2)", "decimal(12,4)"), ("integer", "decimal(12,0)"), ("integer", "double"),
                     ("date", "timestamp_ntz")):
        assert refusal(widening, {**conf, "schemaString": _widened(("c", old, new))}, []) == unread, (old, new)
    nested = _widened(("c", "integer", "long")).replace('"fromType"', '"fieldPath":"element","fromType"')
    assert refusal(widening, {**conf, "schemaString": nested}, []) == unread
    assert refusal(widening, {**conf, "schemaString": _widened(("c", "integer", "long"), ("d", "integer", "double"))},
                   []) is not None


def test_a_widened_table_is_rewritten_only_where_its_commit_is_a_log_file_written_here(tmp_path) -> None:
    """delta-rs opens and checkpoints a table with type widening but refuses to commit to it: without the log files
    written here (a file system without hard links) the table keeps Delta's MERGE."""
    from changefeed.spark.apply.log_rs import RustLog

    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_bytes(b"\n".join(orjson.dumps(a) for a in [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["typeWidening"],
                      "writerFeatures": ["typeWidening", "invariants", "appendOnly"]}},
        {"metaData": {"id": "4f1c", "format": {"provider": "parquet", "options": {}}, "partitionColumns": [],
                      "schemaString": _widened(("amount", "decimal(10,2)", "decimal(12,2)")), "createdTime": 0,
                      "configuration": {"delta.enableTypeWidening": "true"}}}]) + b"\n")
    direct = RustLog()
    direct.direct = True
    assert direct.read(str(tmp_path / "t"), None).refused is None
    through_delta_rs = RustLog()
    through_delta_rs.direct = False
    assert (through_delta_rs.read(str(tmp_path / "t"), None).refused or "").startswith("type widening")
