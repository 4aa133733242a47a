from __future__ import annotations

import pytest

from changefeed.ddl import action_from_canal, action_from_query, canal_type

CASES = [
    ("CREATE DATABASE IF NOT EXISTS `shop`", "ActionCreateSchema", "QUERY"),
    ("drop database if exists test", "ActionDropSchema", "QUERY"),
    ("CREATE TABLE t (a int primary key)", "ActionCreateTable", "CREATE"),
    ("create table if not exists `db`.`t` like `db`.`u`", "ActionCreateTable", "CREATE"),
    ("DROP TABLE `t`", "ActionDropTable", "ERASE"),
    ("TRUNCATE TABLE t", "ActionTruncateTable", "TRUNCATE"),
    ("RENAME TABLE a TO b", "ActionRenameTable", "RENAME"),
    ("RENAME TABLE a TO b, c TO d", "ActionRenameTables", "RENAME"),
    ("ALTER TABLE t RENAME TO u", "ActionRenameTable", "RENAME"),
    ("CREATE UNIQUE INDEX i ON t (a)", "ActionAddIndex", "CINDEX"),
    ("ALTER TABLE t ADD INDEX i (a, b)", "ActionAddIndex", "CINDEX"),
    ("ALTER TABLE t ADD CONSTRAINT pk PRIMARY KEY (a)", "ActionAddPrimaryKey", "CINDEX"),
    ("DROP INDEX i ON t", "ActionDropIndex", "DINDEX"),
    ("ALTER TABLE t DROP PRIMARY KEY", "ActionDropPrimaryKey", "DINDEX"),
    ("ALTER TABLE t ADD COLUMN c varchar(10) DEFAULT 'a,b'", "ActionAddColumn", "ALTER"),
    ("alter table t add c int", "ActionAddColumn", "ALTER"),
    ("ALTER TABLE t DROP COLUMN c", "ActionDropColumn", "ALTER"),
    ("ALTER TABLE t MODIFY COLUMN c bigint", "ActionModifyColumn", "ALTER"),
    ("ALTER TABLE t CHANGE c d int", "ActionModifyColumn", "ALTER"),
    ("ALTER TABLE t ALTER COLUMN c SET DEFAULT 5", "ActionSetDefaultValue", "ALTER"),
    ("ALTER TABLE t COMMENT = 'x'", "ActionModifyTableComment", "ALTER"),
    ("ALTER TABLE t ADD COLUMN a int, ADD INDEX (a)", "ActionMultiSchemaChange", "ALTER"),
    ("ALTER TABLE t ADD COLUMN (a int, b int)", "ActionAddColumn", "ALTER"),
    ("CREATE VIEW v AS SELECT 1", "ActionCreateView", "QUERY"),
    ("/* comment */ DROP VIEW v", "ActionDropView", "QUERY"),
    ("ALTER DATABASE d CHARACTER SET utf8mb4", "ActionModifySchemaCharsetAndCollate", "QUERY"),
    ("SELECT 1", "ActionNone", "QUERY"),
]


@pytest.mark.parametrize(("query", "action", "canal"), CASES)
def test_action_from_query(query, action, canal):
    assert action_from_query(query) == action
    assert canal_type(action) == canal
    assert action_from_canal(canal, query) == action


@pytest.mark.parametrize(("action", "number"), [
    # TiDB's pkg/meta/model/job.go (the avro protocol's DDL `type`)
    ("ActionCreateTable", 3), ("ActionTruncateTable", 11), ("ActionExchangeTablePartition", 42),
    ("ActionRenameTables", 47), ("ActionAlterTableAttributes", 49), ("ActionAlterTablePartitionAttributes", 50),
    ("ActionAlterTablePlacement", 56), ("ActionAlterNoCacheTable", 59), ("ActionCreateTables", 60),
    ("ActionMultiSchemaChange", 61), ("ActionReorganizePartition", 64), ("ActionRemovePartitioning", 72),
])
def test_action_numbers_are_tidbs(action, number):
    from changefeed.ddl import ACTIONS

    assert ACTIONS[action] == number
    assert len(set(ACTIONS.values())) == len(ACTIONS)  # no two actions share a number


@pytest.mark.parametrize("query", ["ALTER TABLE t ADD VECTOR INDEX idx ((VEC_COSINE_DISTANCE(v))) USING HNSW",
                                   "CREATE VECTOR INDEX idx ON t ((VEC_L2_DISTANCE(v)))",
                                   "ALTER TABLE t ADD COLUMNAR INDEX idx (c) USING INVERTED"])
def test_a_vector_index_is_tidbs_action_73(query):
    """TiDB's ADD VECTOR INDEX is its own job (ActionAddVectorIndex, 73; named ActionAddColumnarIndex since):
    not an ADD COLUMN, and canal-json's and the simple protocol's QUERY, as TiCDC's default branches give it."""
    from changefeed.ddl import ACTIONS, action_from_query, canal_type, check_action, simple_type

    action = action_from_query(query)
    assert action == "ActionAddColumnarIndex" and ACTIONS[action] == 73
    assert check_action("ActionAddVectorIndex") == action  # its earlier name
    assert canal_type(action) == "QUERY" and simple_type(action) == "QUERY"
