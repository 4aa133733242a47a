"""Which tables `multiwrite` may rewrite from another writer's files (no Spark): only plain ones, whose
bookkeeping is all in their AddFile/RemoveFile actions."""

from __future__ import annotations

from changefeed.spark.apply.deltalog import file_name, refusal

PLAIN = {"minReaderVersion": 1, "minWriterVersion": 2}


def test_a_plain_table_may_be_rewritten() -> None:
    assert refusal(PLAIN, {"partitionColumns": [], "configuration": {"changefeed.app.ddlVersion": "7"}},
                    [{"path": "a.parquet"}]) is None


def test_tables_with_what_only_deltas_writers_keep_are_refused() -> None:
    assert refusal({"minReaderVersion": 3, "minWriterVersion": 7}, {}, []) == "table features"
    assert refusal({"minReaderVersion": 2, "minWriterVersion": 5}, {}, []) == "table features"
    assert refusal(PLAIN, {"partitionColumns": ["d"]}, []) == "partitioned"
    assert refusal(PLAIN, {"configuration": {"delta.enableChangeDataFeed": "true"}}, []) \
        == "delta.enableChangeDataFeed"
    assert refusal(PLAIN, {"configuration": {"delta.appendOnly": "true"}}, []) == "delta.appendOnly"
    assert refusal(PLAIN, {"configuration": {"delta.constraints.pos": "id > 0"}}, []) == "delta.constraints.pos"
    assert refusal(PLAIN, {"configuration": {"delta.columnMapping.mode": "name"}}, []) \
        == "delta.columnMapping.mode"
    assert refusal(PLAIN, {}, [{"path": "a", "deletionVector": {"storageType": "u"}}]) == "deletion vectors"


def test_settings_that_change_nothing_for_a_writer_are_notrefusals() -> None:
    assert refusal(PLAIN, {"configuration": {"delta.enableChangeDataFeed": "false",
                                              "delta.columnMapping.mode": "none"}}, []) is None


def test_a_files_name_is_read_as_spark_reports_it() -> None:
    assert file_name("part-00000-x.snappy.parquet") == "part-00000-x.snappy.parquet"
    assert file_name("d%3D1/part%20a.parquet") == "part a.parquet"
