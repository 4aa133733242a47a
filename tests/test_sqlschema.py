"""The DDL interpreter: CREATE TABLE parsing (MySQL, MariaDB and TiDB `SHOW CREATE TABLE` output, TiCDC's
type tests) and the schema tracker following DDL statement by statement.

Expected values come from MySQL/TiDB semantics (defaults as MySQL stores them, MySQL's names for unnamed
indexes, charset inheritance), not from running the code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from changefeed.model import Column, Index, TableInfo
from changefeed.mysqltypes import ColumnType
from changefeed.sqlschema import SchemaError, SchemaTracker, parse_create_table

VECTORS = json.loads((Path(__file__).parent / "canal" / "golden" / "tiflow_type_test_vectors.json").read_text())


def cols(t: TableInfo) -> list[tuple]:
    """(name, mysql_type, nullable, default, primary_key, unique_key) per column, in order."""
    return [(c.name, c.mysql_type, c.nullable, c.default, c.primary_key, c.unique_key) for c in t.columns]


def idxs(t: TableInfo) -> list[tuple]:
    return [(i.name, i.columns, i.primary, i.unique) for i in t.indexes]


def charsets(t: TableInfo) -> dict[str, tuple]:
    return {c.name: (c.charset, c.collate) for c in t.columns}


# ------------------------------------------------------------------------------------------------
# SHOW CREATE TABLE output
# ------------------------------------------------------------------------------------------------

TIDB_SHOW_CREATE = (
    "CREATE TABLE `t` (\n"
    "  `id` bigint(20) NOT NULL AUTO_INCREMENT,\n"
    "  `name` varchar(255) COLLATE utf8mb4_bin DEFAULT NULL,\n"
    "  `c` enum('a','b') NOT NULL DEFAULT 'a',\n"
    "  `ts` timestamp(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),\n"
    "  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */,\n"
    "  UNIQUE KEY `uk_name` (`name`),\n"
    "  KEY `idx_c` (`c`,`ts`)\n"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
)


def test_tidb_show_create_table():
    t = parse_create_table(TIDB_SHOW_CREATE, "test")
    assert (t.schema, t.table, t.version) == ("test", "t", 1)
    assert cols(t) == [
        ("id", "bigint(20)", False, None, True, False),
        ("name", "varchar(255) COLLATE utf8mb4_bin", True, None, False, True),
        ("c", "enum('a','b')", False, "a", False, False),
        ("ts", "timestamp(3)", False, "CURRENT_TIMESTAMP(3)", False, False),
    ]
    assert [c.auto_increment for c in t.columns] == [True, False, False, False]
    assert idxs(t) == [
        ("PRIMARY", ["id"], True, True),
        ("uk_name", ["name"], False, True),
        ("idx_c", ["c", "ts"], False, False),
    ]
    assert charsets(t) == {
        "id": (None, None),
        "name": ("utf8mb4", "utf8mb4_bin"),
        "c": ("utf8mb4", "utf8mb4_bin"),
        "ts": (None, None),
    }
    assert t.pk_names == ["id"] and t.handle_key == ["id"]
    assert [c.type.full_str() for c in t.columns] == ["bigint(20)", "varchar(255)", "enum('a','b')", "timestamp(3)"]


def test_tidb_auto_random_and_partitions():
    sql = (
        "CREATE TABLE `events` (\n"
        "  `tenant` int(11) NOT NULL,\n"
        "  `id` bigint(20) NOT NULL /*T![auto_rand] AUTO_RANDOM(5) */,\n"
        "  `kind` varchar(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL,\n"
        "  `body` text DEFAULT NULL,\n"
        "  `emb` vector(3) DEFAULT NULL,\n"
        "  `created_at` datetime NOT NULL DEFAULT CURRENT_TIMESTAMP,\n"
        "  PRIMARY KEY (`tenant`,`id`) /*T![clustered_index] CLUSTERED */,\n"
        "  KEY `idx_kind` (`kind`(10)) /*!80000 INVISIBLE */,\n"
        "  UNIQUE KEY `uk_expr` ((lower(`kind`)),`tenant`),\n"
        "  KEY `idx_lower` ((lower(`kind`))),\n"
        "  KEY `idx_created` (`created_at`) COMMENT 'by time, newest first'\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin "
        "/*T![auto_rand_base] AUTO_RANDOM_BASE=30001 */ COMMENT='events, partitioned'\n"
        "PARTITION BY RANGE (`tenant`)\n"
        "(PARTITION `p0` VALUES LESS THAN (100),\n"
        " PARTITION `p1` VALUES LESS THAN (MAXVALUE))"
    )
    t = parse_create_table(sql, "app")
    assert cols(t) == [
        ("tenant", "int(11)", False, None, True, False),
        ("id", "bigint(20)", False, None, True, False),
        ("kind", "varchar(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", False, None, False, False),
        ("body", "text", True, None, False, False),
        ("emb", "vector(3)", True, None, False, False),
        ("created_at", "datetime", False, "CURRENT_TIMESTAMP", False, False),
    ]
    assert t.pk_names == ["tenant", "id"]
    # the expression part is skipped; what is left of a unique key is not unique; an expression-only key is dropped
    assert idxs(t) == [
        ("PRIMARY", ["tenant", "id"], True, True),
        ("idx_kind", ["kind"], False, False),
        ("uk_expr", ["tenant"], False, False),
        ("idx_created", ["created_at"], False, False),
    ]
    assert charsets(t)["kind"] == ("utf8mb4", "utf8mb4_general_ci")
    assert charsets(t)["body"] == ("utf8mb4", "utf8mb4_bin")
    assert not any(c.auto_increment for c in t.columns)


def test_tidb_nonclustered_and_table_options():
    sql = (
        "CREATE TABLE `kv` (\n"
        "  `k` varbinary(64) NOT NULL,\n"
        "  `v` longblob DEFAULT NULL,\n"
        "  `ver` bigint(20) unsigned NOT NULL DEFAULT '0',\n"
        "  PRIMARY KEY (`k`) /*T![clustered_index] NONCLUSTERED */\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin "
        "/*T! SHARD_ROW_ID_BITS=4 PRE_SPLIT_REGIONS=2 */ /*T![placement] PLACEMENT POLICY=`p1` */ "
        "/*T![ttl] TTL=`ver` + INTERVAL 1 DAY */ /*T![ttl] TTL_ENABLE='OFF' */"
    )
    t = parse_create_table(sql, "s")
    assert cols(t) == [
        ("k", "varbinary(64)", False, None, True, False),
        ("v", "longblob", True, None, False, False),
        ("ver", "bigint(20) unsigned", False, "0", False, False),
    ]
    assert charsets(t) == {"k": (None, None), "v": (None, None), "ver": (None, None)}
    assert idxs(t) == [("PRIMARY", ["k"], True, True)]


MYSQL8_SHOW_CREATE = """CREATE TABLE `orders` (
  `id` bigint unsigned NOT NULL AUTO_INCREMENT,
  `customer_id` int NOT NULL,
  `status` enum('new','paid','shipped') NOT NULL DEFAULT 'new',
  `note` varchar(200) COLLATE utf8mb4_unicode_ci DEFAULT NULL,
  `total` decimal(12,2) NOT NULL DEFAULT '0.00',
  `created_at` datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  `updated_at` timestamp NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP,
  `flags` bit(3) NOT NULL DEFAULT b'101',
  `payload` json DEFAULT NULL,
  `code` char(8) CHARACTER SET latin1 COLLATE latin1_bin NOT NULL,
  `total_x2` decimal(13,2) GENERATED ALWAYS AS ((`total` * 2)) VIRTUAL,
  `uid` binary(16) NOT NULL DEFAULT (uuid_to_bin(uuid())),
  `hidden` int DEFAULT NULL /*!80023 INVISIBLE */,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uk_code` (`code`),
  UNIQUE KEY `uk_cust_created` (`customer_id`,`created_at`),
  KEY `idx_status` (`status`) USING BTREE,
  KEY `idx_note` (`note`(20)),
  KEY `idx_lower` ((lower(`note`))),
  KEY `idx_created_desc` (`created_at` DESC),
  CONSTRAINT `fk_customer` FOREIGN KEY (`customer_id`) REFERENCES `customers` (`id`) \
ON DELETE CASCADE ON UPDATE RESTRICT,
  CONSTRAINT `chk_total` CHECK ((`total` >= 0))
) ENGINE=InnoDB AUTO_INCREMENT=1001 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci \
COMMENT='orders, with ''quotes'''"""


def test_mysql8_show_create_table():
    t = parse_create_table(MYSQL8_SHOW_CREATE, "shop")
    assert cols(t) == [
        ("id", "bigint unsigned", False, None, True, False),
        ("customer_id", "int", False, None, False, False),
        ("status", "enum('new','paid','shipped')", False, "new", False, False),
        ("note", "varchar(200) COLLATE utf8mb4_unicode_ci", True, None, False, False),
        ("total", "decimal(12,2)", False, "0.00", False, False),
        ("created_at", "datetime(6)", False, "CURRENT_TIMESTAMP(6)", False, False),
        ("updated_at", "timestamp", True, None, False, False),
        ("flags", "bit(3)", False, 5, False, False),
        ("payload", "json", True, None, False, False),
        ("code", "char(8) CHARACTER SET latin1 COLLATE latin1_bin", False, None, False, True),
        ("total_x2", "decimal(13,2)", True, None, False, False),
        ("uid", "binary(16)", False, "uuid_to_bin(uuid())", False, False),
        ("hidden", "int", True, None, False, False),
    ]
    assert idxs(t) == [
        ("PRIMARY", ["id"], True, True),
        ("uk_code", ["code"], False, True),
        ("uk_cust_created", ["customer_id", "created_at"], False, True),
        ("idx_status", ["status"], False, False),
        ("idx_note", ["note"], False, False),
        ("idx_created_desc", ["created_at"], False, False),
    ]
    cs = charsets(t)
    assert cs["status"] == ("utf8mb4", "utf8mb4_0900_ai_ci")
    assert cs["note"] == ("utf8mb4", "utf8mb4_unicode_ci")
    assert cs["code"] == ("latin1", "latin1_bin")
    assert cs["payload"] == cs["uid"] == cs["total"] == (None, None)
    code = t.by_name["code"].type
    assert (code.effective_charset, code.effective_collate) == ("latin1", "latin1_bin")
    assert t.by_name["id"].type.full_str() == "bigint(20) unsigned"
    assert t.by_name["id"].auto_increment


def test_mariadb_show_create_table():
    sql = """CREATE TABLE `customers` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `email` varchar(191) NOT NULL,
  `name` varchar(100) NOT NULL DEFAULT '',
  `nick` varchar(50) DEFAULT 'O\\'Brien',
  `balance` decimal(10,2) DEFAULT 0.00,
  `created` datetime NOT NULL DEFAULT current_timestamp(),
  `updated` timestamp NOT NULL DEFAULT current_timestamp() ON UPDATE current_timestamp(),
  `attrs` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`attrs`)),
  `active` tinyint(1) DEFAULT 1,
  `score` double DEFAULT -1.5,
  PRIMARY KEY (`id`),
  UNIQUE KEY `email` (`email`),
  KEY `created` (`created`)
) ENGINE=InnoDB AUTO_INCREMENT=42 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""
    t = parse_create_table(sql, "crm")
    assert cols(t) == [
        ("id", "int(11)", False, None, True, False),
        ("email", "varchar(191)", False, None, False, True),
        ("name", "varchar(100)", False, "", False, False),
        ("nick", "varchar(50)", True, "O'Brien", False, False),
        ("balance", "decimal(10,2)", True, "0.00", False, False),
        ("created", "datetime", False, "current_timestamp()", False, False),
        ("updated", "timestamp", False, "current_timestamp()", False, False),
        ("attrs", "longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", True, None, False, False),
        ("active", "tinyint(1)", True, "1", False, False),
        ("score", "double", True, "-1.5", False, False),
    ]
    assert charsets(t)["email"] == ("utf8mb4", "utf8mb4_general_ci")
    assert charsets(t)["attrs"] == ("utf8mb4", "utf8mb4_bin")
    assert idxs(t) == [
        ("PRIMARY", ["id"], True, True),
        ("email", ["email"], False, True),
        ("created", ["created"], False, False),
    ]


def test_mysql57_dump_with_versioned_comments_and_partitions():
    sql = """/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!50503 SET character_set_client = utf8mb4 */;
CREATE TABLE `log` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `at` datetime NOT NULL,
  `msg` text CHARACTER SET latin1,
  PRIMARY KEY (`id`,`at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8
/*!50100 PARTITION BY RANGE (year(`at`))
(PARTITION p2019 VALUES LESS THAN (2020) ENGINE = InnoDB,
 PARTITION pmax VALUES LESS THAN MAXVALUE ENGINE = InnoDB) */;
/*!40101 SET character_set_client = @saved_cs_client */;"""
    tr = SchemaTracker()
    before, after = tr.apply(sql, "ops")
    assert before is None
    assert cols(after) == [
        ("id", "int(10) unsigned", False, None, True, False),
        ("at", "datetime", False, None, True, False),
        ("msg", "text CHARACTER SET latin1", True, None, False, False),
    ]
    assert charsets(after)["msg"] == ("latin1", None)
    assert tr.get("ops", "log") is after


# ------------------------------------------------------------------------------------------------
# TiCDC's canal type tests: every column's type text must give TiCDC's full mysqlType
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("vec", VECTORS, ids=[f"{v['column']}:{v['column_def']}" for v in VECTORS])
def test_tiflow_type_vectors(vec):
    t = parse_create_table(vec["table_sql"])
    assert t.schema == "test"
    col = t.by_name[vec["column"]]
    assert col.mysql_type == vec["column_def"]
    assert ColumnType.parse(col.mysql_type).full_str() == vec["full"]
    assert col.type.full_str() == vec["full"]
    assert t.pk_names == ["a"] and t.by_name["a"].nullable is False


# ------------------------------------------------------------------------------------------------
# Columns
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("definition", "mysql_type", "full"),
    [
        ("int(11) unsigned zerofill NOT NULL", "int(11) unsigned zerofill", "int(11) unsigned zerofill"),
        ("INT UNSIGNED DEFAULT NULL", "INT UNSIGNED", "int(10) unsigned"),
        ("decimal(10, 2) unsigned", "decimal(10, 2) unsigned", "decimal(10,2) unsigned"),
        ("double precision(10,2) NOT NULL", "double precision(10,2)", "double(10,2)"),
        ("national varchar(10)", "national varchar(10)", "varchar(10)"),
        ("character varying(7) NULL", "character varying(7)", "varchar(7)"),
        (
            "varchar(10) character set utf8mb4 collate utf8mb4_bin NOT NULL",
            "varchar(10) character set utf8mb4 collate utf8mb4_bin",
            "varchar(10)",
        ),
        ("varchar(10) CHARSET binary", "varchar(10) CHARSET binary", "varbinary(10)"),
        ("char(4) BINARY", "char(4) BINARY", "char(4)"),
        ("enum('a','b,c','it''s') DEFAULT 'a'", "enum('a','b,c','it''s')", "enum('a','b,c','it''s')"),
        ("set('x', 'y') NOT NULL", "set('x', 'y')", "set('x','y')"),
        ("bool DEFAULT TRUE", "bool", "tinyint(1)"),
        ("float(10,3) zerofill", "float(10,3) zerofill", "float(10,3) unsigned zerofill"),
        ("datetime(6) ON UPDATE CURRENT_TIMESTAMP(6)", "datetime(6)", "datetime(6)"),
        ("year", "year", "year(4)"),
        ("json NOT NULL", "json", "json"),
        ("varchar(10)\n    COLLATE   utf8mb4_unicode_ci", "varchar(10) COLLATE utf8mb4_unicode_ci", "varchar(10)"),
    ],
)
def test_column_type_text(definition, mysql_type, full):
    t = parse_create_table(f"CREATE TABLE t (x {definition})")
    col = t.columns[0]
    assert col.mysql_type == mysql_type
    assert ColumnType.parse(col.mysql_type).full_str() == full


@pytest.mark.parametrize(
    ("clause", "default"),
    [
        ("int DEFAULT '0'", "0"),
        ("int DEFAULT 0", "0"),
        ("int DEFAULT -1", "-1"),
        ("decimal(5,2) DEFAULT +1.5", "1.50"),  # stored with the column's scale (test_a_default_is_stored...)
        ("double DEFAULT 1.5e3", "1.5e3"),
        ("varchar(10) DEFAULT 'it''s'", "it's"),
        ("varchar(10) DEFAULT 'a\\'b'", "a'b"),
        ("varchar(10) DEFAULT 'line\\nbreak\\ttab\\\\'", "line\nbreak\ttab\\"),
        ("varchar(10) DEFAULT 'a\\%b\\_c'", "a\\%b\\_c"),  # MySQL keeps the backslash of \% and \_
        ("varchar(10) DEFAULT 'a' 'b'", "ab"),
        ("varchar(10) DEFAULT _utf8mb4'x'", "x"),
        ("varchar(10) DEFAULT N'nat'", "nat"),
        ('varchar(10) DEFAULT "dq"', "dq"),
        ("varchar(10) DEFAULT ''", ""),
        ("varchar(10) DEFAULT 'a,b' COMMENT 'c, (d'", "a,b"),
        ("varchar(10) DEFAULT NULL", None),
        ("varchar(10) NOT NULL", None),
        ("timestamp DEFAULT CURRENT_TIMESTAMP", "CURRENT_TIMESTAMP"),
        ("timestamp(3) DEFAULT current_timestamp(3) ON UPDATE current_timestamp(3)", "current_timestamp(3)"),
        ("datetime(3) DEFAULT NOW(3)", "NOW(3)"),
        ("date DEFAULT DATE '2020-01-02'", "2020-01-02"),
        ("datetime DEFAULT '2020-01-02 03:04:05'", "2020-01-02 03:04:05"),
        ("bit(8) DEFAULT b'1010'", 10),
        ("varbinary(4) DEFAULT 0x0A0B", b"\x0a\x0b"),
        ("varbinary(4) DEFAULT X'0a'", b"\n"),
        ("tinyint(1) DEFAULT TRUE", "1"),
        ("tinyint(1) DEFAULT false", "0"),
        ("varchar(36) DEFAULT (uuid())", "uuid()"),
        ("json DEFAULT (JSON_ARRAY())", "JSON_ARRAY()"),
        ("int NOT NULL DEFAULT '5' COMMENT 'five'", "5"),
    ],
)
def test_defaults(clause, default):
    t = parse_create_table(f"CREATE TABLE t (x {clause})")
    assert t.columns[0].default == default


def test_column_attributes_are_skipped():
    sql = """CREATE TABLE t (
      id bigint NOT NULL AUTO_RANDOM(5, 54) PRIMARY KEY /*T![clustered_index] CLUSTERED */ COMMENT 'pk',
      a int COLUMN_FORMAT FIXED STORAGE DISK INVISIBLE,
      b int GENERATED ALWAYS AS (a + 1) STORED NOT NULL,
      c int AS (a * 2) VIRTUAL,
      d int REFERENCES p (id) ON DELETE SET NULL ON UPDATE CASCADE,
      e int CONSTRAINT c_pos CHECK (e > 0) NOT ENFORCED,
      f geometry NOT NULL SRID 4326,
      g timestamp(2) NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP(2),
      h varchar(10) VISIBLE COLLATE utf8mb4_unicode_ci,
      i int ENGINE_ATTRIBUTE '{}' SECONDARY_ENGINE_ATTRIBUTE = '{}' DEFAULT 7,
      j int NULL UNIQUE KEY,
      k int KEY
    )"""
    with pytest.raises(SchemaError, match="primary key"):
        parse_create_table(sql)  # id PRIMARY KEY and k KEY: two primary keys
    t = parse_create_table(sql.replace("k int KEY", "k int UNIQUE"))
    assert cols(t) == [
        ("id", "bigint", False, None, True, False),
        ("a", "int", True, None, False, False),
        ("b", "int", False, None, False, False),
        ("c", "int", True, None, False, False),
        ("d", "int", True, None, False, False),
        ("e", "int", True, None, False, False),
        ("f", "geometry", False, None, False, False),
        ("g", "timestamp(2)", True, None, False, False),
        ("h", "varchar(10)", True, None, False, False),
        ("i", "int", True, "7", False, False),
        ("j", "int", True, None, False, True),
        ("k", "int", True, None, False, True),
    ]
    assert charsets(t)["h"] == ("utf8mb4", "utf8mb4_unicode_ci")
    assert t.by_name["h"].type.effective_collate == "utf8mb4_unicode_ci"
    assert idxs(t) == [("PRIMARY", ["id"], True, True), ("j", ["j"], False, True), ("k", ["k"], False, True)]


def test_key_in_column_definition_means_primary_key_and_serial():
    t = parse_create_table("CREATE TABLE t (a int KEY, b serial, c int SERIAL DEFAULT VALUE)")
    assert cols(t) == [
        ("a", "int", False, None, True, False),
        ("b", "serial", False, None, False, True),
        ("c", "int", False, None, False, True),
    ]
    assert [c.auto_increment for c in t.columns] == [False, True, True]
    assert t.by_name["b"].type.full_str() == "bigint(20) unsigned"
    assert idxs(t) == [("PRIMARY", ["a"], True, True), ("b", ["b"], False, True), ("c", ["c"], False, True)]


def test_unquoted_and_quoted_names_qualified_tables_and_comments():
    sql = """-- a comment line
    /* block */ create temporary table if not exists `my db`.`Weird``Name` (
      `select` int, plain_col varchar(3), `über` int, # trailing comment
      "dq" int
    ) /*!40101 CHARSET latin1 */;"""
    t = parse_create_table(sql, "ignored")
    assert (t.schema, t.table) == ("my db", "Weird`Name")
    assert [c.name for c in t.columns] == ["select", "plain_col", "über", "dq"]
    assert charsets(t)["plain_col"] == ("latin1", None)


# ------------------------------------------------------------------------------------------------
# Keys
# ------------------------------------------------------------------------------------------------


def test_mysql_default_index_names():
    t = parse_create_table(
        "CREATE TABLE t (a int, b int UNIQUE, c int, KEY (a), KEY (a, b), UNIQUE (b), "
        "INDEX USING BTREE (c), KEY a_3 (c), KEY (a DESC), CONSTRAINT uc UNIQUE (c), "
        "CONSTRAINT named_pk PRIMARY KEY (c))"
    )
    assert {i.name: (i.columns, i.primary, i.unique) for i in t.indexes} == {
        "PRIMARY": (["c"], True, True),
        "b": (["b"], False, True),
        "a": (["a"], False, False),
        "a_2": (["a", "b"], False, False),
        "b_2": (["b"], False, True),
        "c": (["c"], False, False),
        "a_3": (["c"], False, False),
        "a_4": (["a"], False, False),
        "uc": (["c"], False, True),
    }
    assert t.indexes[0].name == "PRIMARY"
    assert t.by_name["c"].nullable is False and t.by_name["c"].primary_key


def test_fulltext_spatial_foreign_check_and_prefix_parts():
    t = parse_create_table(
        "CREATE TABLE t (id int, doc text, g geometry NOT NULL, p int, "
        "FULLTEXT KEY ft (doc) WITH PARSER ngram, SPATIAL INDEX (g), "
        "CONSTRAINT fk FOREIGN KEY (p) REFERENCES parent (id) ON DELETE CASCADE, "
        "CHECK (p > 0), UNIQUE INDEX ux USING HASH (doc(100) ASC, p) KEY_BLOCK_SIZE = 8 COMMENT 'x')"
    )
    assert idxs(t) == [
        ("ft", ["doc"], False, False),
        ("g", ["g"], False, False),
        ("ux", ["doc", "p"], False, True),
    ]
    assert t.pk_names == [] and t.handle_key == []


def test_handle_key_without_primary_key():
    t = parse_create_table(
        "CREATE TABLE t (a int NOT NULL, b int NOT NULL, c int, UNIQUE KEY u1 (c), UNIQUE KEY u2 (a, b))"
    )
    # the first all-NOT-NULL unique index is TiDB's (and MySQL's) implicit primary key; u1's column is nullable;
    # no column has the PRI flag (TiDB sets it for a primary index alone)
    assert t.primary_columns == ["a", "b"] and t.pk_names == [] and not t.explicit_pk
    assert t.handle_key == ["a", "b"]


def test_create_errors():
    with pytest.raises(SchemaError, match="LIKE"):
        parse_create_table("CREATE TABLE t2 LIKE t1")
    with pytest.raises(SchemaError, match="SELECT"):
        parse_create_table("CREATE TABLE t2 AS SELECT * FROM t1")
    with pytest.raises(SchemaError, match="SELECT"):
        parse_create_table("CREATE TABLE t2 (a int) SELECT a FROM t1")
    with pytest.raises(SchemaError, match="'nope'"):
        parse_create_table("CREATE TABLE t (a int, KEY (nope))")
    with pytest.raises(SchemaError, match="duplicate column"):
        parse_create_table("CREATE TABLE t (a int, A int)")
    with pytest.raises(SchemaError, match="not a CREATE TABLE"):
        parse_create_table("ALTER TABLE t ADD COLUMN a int")
    with pytest.raises(SchemaError):
        parse_create_table("CREATE TABLE t (a hologram)")  # not a MySQL type


def test_create_like_with_source():
    src = parse_create_table(TIDB_SHOW_CREATE, "db")
    for sql in ("CREATE TABLE t2 LIKE t", "create table if not exists `db`.`t2` (like `db`.`t`)"):
        t = parse_create_table(sql, "db", like_source=src)
        assert (t.schema, t.table, t.version) == ("db", "t2", 1)
        assert cols(t) == cols(src) and idxs(t) == idxs(src) and charsets(t) == charsets(src)
        assert all(a is not b for a, b in zip(t.columns, src.columns, strict=True))


# ------------------------------------------------------------------------------------------------
# Charsets
# ------------------------------------------------------------------------------------------------


def test_table_charset_applies_to_string_columns_without_one():
    t = parse_create_table(
        "CREATE TABLE t (a varchar(10), b text, c varchar(10) CHARACTER SET latin1, "
        "d varchar(10) COLLATE utf8mb4_unicode_ci, e int, f blob, g enum('x'), h char(4) BINARY, i json, "
        "j varchar(5) NOT NULL COLLATE utf8mb4_bin, k varbinary(3)) "
        "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
    )
    assert charsets(t) == {
        "a": ("utf8mb4", "utf8mb4_general_ci"),
        "b": ("utf8mb4", "utf8mb4_general_ci"),
        "c": ("latin1", None),  # a charset without a collation: that charset's default collation
        "d": ("utf8mb4", "utf8mb4_unicode_ci"),
        "e": (None, None),
        "f": (None, None),
        "g": ("utf8mb4", "utf8mb4_general_ci"),
        "h": ("utf8mb4", None),  # BINARY: the _bin collation of the charset
        "i": (None, None),
        "j": ("utf8mb4", "utf8mb4_bin"),
        "k": (None, None),
    }
    assert t.by_name["h"].type.effective_collate == "utf8mb4_bin"
    assert t.by_name["c"].type.effective_charset == "latin1"
    assert t.by_name["j"].mysql_type == "varchar(5)"


def test_table_collation_alone_implies_charset_and_no_options_means_none():
    t = parse_create_table("CREATE TABLE t (a char(2)) COLLATE = latin1_swedish_ci")
    assert charsets(t) == {"a": ("latin1", "latin1_swedish_ci")}
    t = parse_create_table("CREATE TABLE t (a char(2)) ENGINE=InnoDB")
    assert charsets(t) == {"a": (None, None)}
    t = parse_create_table("CREATE TABLE t (a char(2)) CHARACTER SET = 'gbk'")
    assert charsets(t) == {"a": ("gbk", None)}


def test_database_charset_is_the_default_for_its_tables():
    tr = SchemaTracker()
    assert tr.apply("CREATE DATABASE IF NOT EXISTS `legacy` DEFAULT CHARACTER SET latin1 COLLATE latin1_bin") == (
        None,
        None,
    )
    _, t = tr.apply("CREATE TABLE legacy.t (a varchar(3), b int)")
    assert charsets(t) == {"a": ("latin1", "latin1_bin"), "b": (None, None)}
    _, t = tr.apply("CREATE TABLE u (a varchar(3)) CHARSET utf8mb4", "legacy")
    assert charsets(t) == {"a": ("utf8mb4", None)}
    _, t = tr.apply("CREATE TABLE other.t (a varchar(3))")
    assert charsets(t) == {"a": (None, None)}


# ------------------------------------------------------------------------------------------------
# The tracker
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def tracker():
    tr = SchemaTracker()
    tr.apply(
        "CREATE TABLE shop.items (\n"
        "  id int NOT NULL,\n"
        "  name varchar(20) NOT NULL,\n"
        "  price decimal(10,2) DEFAULT '0.00',\n"
        "  PRIMARY KEY (id)\n"
        ") DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
    )
    return tr


def test_alter_sequence(tracker):
    t1 = tracker.get("shop", "items")
    snapshot = cols(t1)
    assert t1.version == 1

    before, t2 = tracker.apply(
        "ALTER TABLE items ADD COLUMN sku varchar(32) NOT NULL AFTER id, "
        "ADD COLUMN stock int UNSIGNED DEFAULT 0 FIRST, ADD UNIQUE INDEX uk_sku (sku)",
        "shop",
    )
    assert before is t1 and cols(t1) == snapshot  # the old definition is untouched
    assert cols(t2) == [
        ("stock", "int UNSIGNED", True, "0", False, False),
        ("id", "int", False, None, True, False),
        ("sku", "varchar(32)", False, None, False, True),
        ("name", "varchar(20)", False, None, False, False),
        ("price", "decimal(10,2)", True, "0.00", False, False),
    ]
    assert charsets(t2)["sku"] == ("utf8mb4", "utf8mb4_bin")
    assert t2.version == 2

    before, t3 = tracker.apply(
        "ALTER TABLE shop.items MODIFY COLUMN name varchar(50) NULL DEFAULT 'n/a', "
        "CHANGE price unit_price decimal(12,3) NOT NULL, RENAME COLUMN stock TO qty"
    )
    assert before is t2
    assert cols(t3) == [
        ("qty", "int UNSIGNED", True, "0", False, False),
        ("id", "int", False, None, True, False),
        ("sku", "varchar(32)", False, None, False, True),
        ("name", "varchar(50)", True, "n/a", False, False),
        ("unit_price", "decimal(12,3)", False, None, False, False),
    ]
    assert t3.version == 3

    _, t4 = tracker.apply(
        "ALTER TABLE items ALTER COLUMN qty SET DEFAULT 5, ALTER name DROP DEFAULT, "
        "ADD INDEX (unit_price), ADD KEY (unit_price, qty)",
        "shop",
    )
    assert [(c.name, c.default) for c in t4.columns] == [
        ("qty", "5"), ("id", None), ("sku", None), ("name", None), ("unit_price", None)
    ]
    assert idxs(t4) == [
        ("PRIMARY", ["id"], True, True),
        ("uk_sku", ["sku"], False, True),
        ("unit_price", ["unit_price"], False, False),
        ("unit_price_2", ["unit_price", "qty"], False, False),
    ]
    assert t4.version == 4

    _, t5 = tracker.apply("ALTER TABLE items DROP COLUMN unit_price", "shop")
    assert [c.name for c in t5.columns] == ["qty", "id", "sku", "name"]
    assert idxs(t5) == [
        ("PRIMARY", ["id"], True, True),
        ("uk_sku", ["sku"], False, True),
        ("unit_price_2", ["qty"], False, False),
    ]

    _, t6 = tracker.apply("ALTER TABLE items DROP PRIMARY KEY, ADD PRIMARY KEY (sku, id)", "shop")
    assert idxs(t6)[0] == ("PRIMARY", ["sku", "id"], True, True)
    assert sorted(t6.pk_names) == ["id", "sku"]
    assert cols(t6) == [
        ("qty", "int UNSIGNED", True, "5", False, False),
        ("id", "int", False, None, True, False),
        ("sku", "varchar(32)", False, None, True, True),
        ("name", "varchar(50)", True, None, False, False),
    ]

    before, t7 = tracker.apply(
        "ALTER TABLE items RENAME INDEX uk_sku TO uk_code, DROP INDEX unit_price_2, RENAME TO catalog.products",
        "shop",
    )
    assert before is t6
    assert (t7.schema, t7.table) == ("catalog", "products")
    assert tracker.get("shop", "items") is None and tracker.get("catalog", "products") is t7
    assert idxs(t7) == [("PRIMARY", ["sku", "id"], True, True), ("uk_code", ["sku"], False, True)]

    before, t8 = tracker.apply("ALTER TABLE catalog.products ENGINE=InnoDB, COMMENT='x', AUTO_INCREMENT=100")
    assert before is t7 and t8 is not t7 and t8.same_definition(t7)
    assert [t.version for t in (t5, t6, t7, t8)] == [5, 6, 7, 7]


def test_added_column_after_table_charset_change(tracker):
    tracker.apply("ALTER TABLE shop.items DEFAULT CHARSET=latin1")
    _, t = tracker.apply("ALTER TABLE shop.items ADD COLUMN z varchar(3), MODIFY name varchar(20) NOT NULL")
    assert charsets(t)["z"] == ("latin1", None)
    assert charsets(t)["name"] == ("latin1", None)  # MODIFY without a charset takes the table's


def test_convert_to_character_set():
    tr = SchemaTracker()
    tr.apply("CREATE TABLE d.t (a int, b varchar(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, c text, e blob)")
    _, t = tr.apply("ALTER TABLE d.t CONVERT TO CHARACTER SET latin1 COLLATE latin1_general_ci")
    assert [c.mysql_type for c in t.columns] == ["int", "varchar(10)", "text", "blob"]
    assert charsets(t) == {
        "a": (None, None),
        "b": ("latin1", "latin1_general_ci"),
        "c": ("latin1", "latin1_general_ci"),
        "e": (None, None),
    }
    _, t = tr.apply("ALTER TABLE d.t ADD COLUMN f char(1)")
    assert charsets(t)["f"] == ("latin1", "latin1_general_ci")


def test_add_columns_in_parentheses_and_if_not_exists(tracker):
    _, t = tracker.apply("ALTER TABLE shop.items ADD COLUMN (c1 int NOT NULL DEFAULT 1, c2 varchar(5) DEFAULT 'x')")
    assert cols(t)[-2:] == [("c1", "int", False, "1", False, False), ("c2", "varchar(5)", True, "x", False, False)]
    before, after = tracker.apply("ALTER TABLE shop.items ADD COLUMN IF NOT EXISTS c1 bigint")
    assert cols(after) == cols(before) and after.version == before.version
    before, after = tracker.apply("ALTER TABLE shop.items DROP COLUMN IF EXISTS nope, DROP INDEX IF EXISTS nope")
    assert cols(after) == cols(before)


def test_rename_swap_uses_original_names():
    tr = SchemaTracker()
    tr.apply("CREATE TABLE t (a int NOT NULL, b varchar(5), KEY ia (a))", "d")
    _, t = tr.apply("ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO a", "d")
    assert [(c.name, c.mysql_type) for c in t.columns] == [("b", "int"), ("a", "varchar(5)")]
    assert idxs(t) == [("ia", ["b"], False, False)]
    _, t = tr.apply("ALTER TABLE t CHANGE b a bigint NOT NULL, CHANGE a b char(2)", "d")
    assert [(c.name, c.mysql_type, c.nullable) for c in t.columns] == [("a", "bigint", False), ("b", "char(2)", True)]
    assert idxs(t) == [("ia", ["a"], False, False)]


def test_positions_of_modify_and_change():
    tr = SchemaTracker()
    tr.apply("CREATE TABLE t (a int, b int, c int, d int)", "d")
    _, t = tr.apply("ALTER TABLE t MODIFY COLUMN d bigint FIRST, CHANGE b b2 int NOT NULL AFTER c", "d")
    assert [(c.name, c.mysql_type, c.nullable) for c in t.columns] == [
        ("d", "bigint", True), ("a", "int", True), ("c", "int", True), ("b2", "int", False)
    ]
    _, t = tr.apply("ALTER TABLE t ADD COLUMN e int AFTER d, DROP COLUMN a, ADD COLUMN a varchar(2) FIRST", "d")
    assert [(c.name, c.mysql_type) for c in t.columns] == [
        ("a", "varchar(2)"), ("d", "bigint"), ("e", "int"), ("c", "int"), ("b2", "int")
    ]
    with pytest.raises(SchemaError, match="at least one column"):
        tr.apply("CREATE TABLE one (x int)", "d") and tr.apply("ALTER TABLE one DROP COLUMN x", "d")
    with pytest.raises(SchemaError, match="primary key"):
        tr.apply("CREATE TABLE two (x int PRIMARY KEY)", "d") and tr.apply(
            "ALTER TABLE two ADD COLUMN y int PRIMARY KEY", "d"
        )
    assert issubclass(SchemaError, ValueError)


def test_drop_column_shrinks_keys():
    tr = SchemaTracker()
    tr.apply("CREATE TABLE t (a int, b int, c int, d int, PRIMARY KEY (a, b), UNIQUE KEY u (b, c), KEY k (d))", "d")
    _, t = tr.apply("ALTER TABLE t DROP b, DROP COLUMN d", "d")
    assert idxs(t) == [("PRIMARY", ["a"], True, True), ("u", ["c"], False, True)]
    assert cols(t) == [("a", "int", False, None, True, False), ("c", "int", True, None, False, True)]
    _, t = tr.apply("ALTER TABLE t DROP COLUMN a", "d")
    assert idxs(t) == [("u", ["c"], False, True)] and t.pk_names == []


def test_modify_primary_key_column_stays_not_null_and_case_insensitive_names():
    tr = SchemaTracker()
    tr.apply("CREATE TABLE `Shop`.`Items` (`ID` int PRIMARY KEY, `Name` varchar(5))")
    t = tr.get("shop", "items")
    assert (t.schema, t.table) == ("Shop", "Items")
    _, t = tr.apply("ALTER TABLE SHOP.ITEMS MODIFY id bigint, ADD INDEX idx (name)")
    assert cols(t) == [("id", "bigint", False, None, True, False), ("Name", "varchar(5)", True, None, False, False)]
    assert idxs(t) == [("PRIMARY", ["id"], True, True), ("idx", ["Name"], False, False)]
    assert (t.schema, t.table) == ("Shop", "Items")


def test_create_and_drop_index_statements(tracker):
    _, t = tracker.apply("CREATE UNIQUE INDEX uk_name ON items (name)", "shop")
    assert idxs(t)[-1] == ("uk_name", ["name"], False, True) and t.by_name["name"].unique_key
    _, t = tracker.apply("CREATE INDEX idx2 USING BTREE ON shop.items (name(5) DESC, price) ALGORITHM=INPLACE")
    assert idxs(t)[-1] == ("idx2", ["name", "price"], False, False)
    _, t = tracker.apply("DROP INDEX uk_name ON shop.items")
    assert [i.name for i in t.indexes] == ["PRIMARY", "idx2"] and not t.by_name["name"].unique_key
    _, t = tracker.apply("DROP INDEX `PRIMARY` ON shop.items")
    assert t.pk_names == [] and not t.by_name["id"].primary_key and t.by_name["id"].nullable is False
    with pytest.raises(SchemaError, match="nope"):
        tracker.apply("CREATE INDEX i ON shop.items (nope)")


def test_truncate_drop_rename():
    tr = SchemaTracker()
    tr.apply("CREATE TABLE a (x int)", "d")
    tr.apply("CREATE TABLE b (y int)", "d")
    tr.apply("CREATE TABLE e.c (z int)")
    a = tr.get("d", "a")

    before, after = tr.apply("TRUNCATE TABLE a", "d")
    assert before is a and after is not a and after.same_definition(a)
    assert tr.get("d", "a") is after
    assert tr.apply("TRUNCATE nope", "d") == (None, None)

    a = tr.get("d", "a")
    b = tr.get("d", "b")
    before, after = tr.apply("RENAME TABLE a TO tmp, b TO a, tmp TO b", "d")
    assert before is a and (after.schema, after.table) == ("d", "tmp") and after.version == 2
    assert [c.name for c in tr.get("d", "a").columns] == ["y"]
    assert [c.name for c in tr.get("d", "b").columns] == ["x"]
    assert tr.get("d", "tmp") is None and b.table == "b"

    before, after = tr.apply("RENAME TABLE e.c TO c2")  # no current database: stays in e
    assert (after.schema, after.table) == ("e", "c2") and before.table == "c"
    before, after = tr.apply("ALTER TABLE e.c2 RENAME AS c3", "d")  # unqualified new name: current database
    assert (after.schema, after.table) == ("d", "c3")

    x = tr.get("d", "b")
    before, after = tr.apply("DROP TABLE IF EXISTS b, d.a, missing", "d")
    assert before is x and after is None
    assert tr.get("d", "a") is None and tr.get("d", "b") is None
    assert tr.apply("DROP TABLE missing", "d") == (None, None)


def test_create_if_not_exists_replace_and_like():
    tr = SchemaTracker()
    _, t = tr.apply("CREATE TABLE d.t (a int)")
    before, after = tr.apply("CREATE TABLE IF NOT EXISTS d.t (b int)")
    assert before is t and [c.name for c in after.columns] == ["a"] and after is not t
    before, t2 = tr.apply("CREATE TABLE d.u LIKE d.t")
    assert before is None and (t2.table, cols(t2)) == ("u", cols(t))
    assert tr.apply("CREATE TABLE d.v LIKE d.unknown") == (None, None) and tr.get("d", "v") is None


def test_databases():
    tr = SchemaTracker()
    tr.apply("CREATE TABLE d1.a (x int)")
    tr.apply("CREATE TABLE D1.b (x int)")
    tr.apply("CREATE TABLE d2.a (x int)")
    assert tr.apply("DROP DATABASE IF EXISTS `d1`") == (None, None)
    assert tr.get("d1", "a") is None and tr.get("d1", "b") is None
    assert tr.get("d2", "a") is not None


def test_missing_columns_raise_and_leave_the_state_alone(tracker):
    t = tracker.get("shop", "items")
    for sql in (
        "ALTER TABLE shop.items DROP COLUMN nope",
        "ALTER TABLE shop.items MODIFY nope int",
        "ALTER TABLE shop.items CHANGE nope x int",
        "ALTER TABLE shop.items RENAME COLUMN nope TO x",
        "ALTER TABLE shop.items ALTER COLUMN nope SET DEFAULT 1",
        "ALTER TABLE shop.items ADD COLUMN x int AFTER nope",
        "ALTER TABLE shop.items ADD INDEX (nope)",
        "ALTER TABLE shop.items ADD COLUMN z int, DROP COLUMN nope",
    ):
        with pytest.raises(SchemaError) as info:
            tracker.apply(sql)
        msg = str(info.value)
        assert "'nope'" in msg and sql in msg
        assert tracker.get("shop", "items") is t
    with pytest.raises(SchemaError, match="already exists"):
        tracker.apply("ALTER TABLE shop.items ADD COLUMN name int")
    with pytest.raises(SchemaError, match="duplicate column"):
        tracker.apply("ALTER TABLE shop.items RENAME COLUMN price TO name")
    assert tracker.get("shop", "items") is t


@pytest.mark.parametrize(
    "sql",
    [
        "",
        "SELECT 1",
        "INSERT INTO shop.items VALUES (1, 'a', 1)",
        "SET NAMES utf8mb4",
        "CREATE VIEW shop.v AS SELECT * FROM shop.items",
        "DROP VIEW shop.items",
        "GRANT SELECT ON shop.* TO 'u'@'%'",
        "ALTER TABLE",
        "ALTER TABLE shop.unknown ADD COLUMN x int",
        "ALTER TABLE shop.unknown DROP COLUMN nope",
        "CREATE TABLE shop.items2 (",
        "CREATE TABLE shop.geo (p hologram)",
        "CREATE TABLE shop.items3 AS SELECT * FROM shop.items",
        "ALTER TABLE shop.items MODIFY price hologram",
        "DROP INDEX i ON shop.unknown",
        "ALTER DATABASE shop CHARACTER SET utf8mb4",
        "CREATE SEQUENCE shop.seq",
    ],
)
def test_statements_not_understood_change_nothing(tracker, sql):
    t = tracker.get("shop", "items")
    assert tracker.apply(sql) == (None, None)
    assert tracker.get("shop", "items") is t
    assert len(tracker.tables()) == 1


def test_ignored_specs_keep_the_definition(tracker):
    t = tracker.get("shop", "items")
    before, after = tracker.apply(
        "ALTER TABLE shop.items ADD CONSTRAINT fk FOREIGN KEY (id) REFERENCES p (id), ADD CHECK (price > 0), "
        "ALTER INDEX `PRIMARY` VISIBLE, ADD PARTITION (PARTITION p1 VALUES LESS THAN (10)), "
        "ALGORITHM=INPLACE, LOCK=NONE, DROP FOREIGN KEY fk2, SET TIFLASH REPLICA 1"
    )
    assert before is t and after is not t and after.same_definition(t) and after.version == 1


def test_comments_and_versioned_comments_in_alter(tracker):
    _, t = tracker.apply(
        "/* app=x */ ALTER TABLE shop.items -- why\n ADD COLUMN c int /*!80023 INVISIBLE */ # more\n"
        ", ADD COLUMN d bigint /*T![auto_rand] AUTO_RANDOM(3) */ NOT NULL"
    )
    assert cols(t)[-2:] == [("c", "int", True, None, False, False), ("d", "bigint", False, None, False, False)]


def test_put_and_tables_from_protocols():
    tr = SchemaTracker()
    given = TableInfo(
        "db",
        "t",
        [Column("id", "int", nullable=False, primary_key=True), Column("u", "varchar(5)", unique_key=True)],
    )
    tr.put(given)
    assert tr.get("DB", "T") is given
    before, after = tr.apply("ALTER TABLE db.t ADD COLUMN x int")
    assert before is given and given.version is None and len(given.columns) == 2
    assert after.version == 1 and after.pk_names == ["id"]
    assert cols(after) == [
        ("id", "int", False, None, True, False),
        ("u", "varchar(5)", None, None, False, True),
        ("x", "int", True, None, False, False),
    ]


def test_multiple_statements():
    tr = SchemaTracker()
    before, after = tr.apply("CREATE TABLE d.a (x int); CREATE TABLE d.b (y int);")
    assert before is None and after.table == "a"
    assert tr.get("d", "b") is not None


def test_returned_objects_are_new_and_never_mutated(tracker):
    seen = []
    for sql in (
        "ALTER TABLE shop.items ADD COLUMN c int UNIQUE",
        "ALTER TABLE shop.items DROP PRIMARY KEY",
        "ALTER TABLE shop.items ADD PRIMARY KEY (c)",
        "TRUNCATE shop.items",
        "RENAME TABLE shop.items TO shop.items2",
    ):
        before, after = tracker.apply(sql)
        seen.append((after, cols(after), idxs(after), after.version, list(after.pk_names)))
        assert all(after is not s[0] for s in seen[:-1])
        assert all(a is not b for a, b in zip(after.columns, before.columns, strict=False))
    for t, c, i, v, pk in seen:
        assert (cols(t), idxs(t), t.version, t.pk_names) == (c, i, v, pk)
    assert [s[3] for s in seen] == [2, 3, 4, 4, 5]


def test_index_model_fields():
    t = parse_create_table("CREATE TABLE t (a int NOT NULL, PRIMARY KEY (a))")
    assert t.indexes == [Index("PRIMARY", ["a"], primary=True, unique=True)]


def test_clustered_and_nonclustered_keywords():
    t = parse_create_table("CREATE TABLE t (id bigint PRIMARY KEY NONCLUSTERED, v int)")
    assert idxs(t) == [("PRIMARY", ["id"], True, True)]
    t = parse_create_table("CREATE TABLE t (a int, b int, PRIMARY KEY (a, b) CLUSTERED, KEY k (b) GLOBAL)")
    assert idxs(t) == [("PRIMARY", ["a", "b"], True, True), ("k", ["b"], False, False)]
    tr = SchemaTracker()
    tr.apply("CREATE TABLE t (a int NULL, b int)", "d")
    _, t = tr.apply("ALTER TABLE t ADD COLUMN c int, ADD INDEX idx_c (c), ADD PRIMARY KEY (a) NONCLUSTERED", "d")
    assert idxs(t) == [("PRIMARY", ["a"], True, True), ("idx_c", ["c"], False, False)]
    assert t.by_name["a"].nullable is False  # a primary key column becomes NOT NULL


def test_a_create_table_applied_again_in_another_tracker_is_not_parsed_again(monkeypatch):
    import changefeed.sqlschema.tracker as tracker_mod

    parsed = []
    real = tracker_mod._create_table
    monkeypatch.setattr(tracker_mod, "_create_table", lambda *a: parsed.append(1) or real(*a))
    monkeypatch.setattr(tracker_mod, "_CREATED", {})
    sql = "CREATE TABLE cache_t (id bigint PRIMARY KEY, name varchar(8))"
    a, b = SchemaTracker(), SchemaTracker()  # a partition's decoder each: a DDL arrives on every partition
    before, t = a.apply(sql, "db")
    assert before is None and cols(t) == [("id", "bigint", False, None, True, False),
                                          ("name", "varchar(8)", True, None, False, False)]
    assert b.apply(sql, "db") == (None, t) and b.get("db", "cache_t") is t and len(parsed) == 1
    assert b.apply(sql, "db") == (t, t)  # created again over itself, as before
    assert b.apply(sql.replace("TABLE", "TABLE IF NOT EXISTS"), "db")[0] is t
    # what a definition depends on is in the key: the default schema, the databases' default charsets
    other = b.apply(sql, "db2")[1]
    assert other is not t and other.schema == "db2"
    c = SchemaTracker()
    c.apply("CREATE DATABASE db CHARACTER SET latin1", "")
    latin = c.apply(sql, "db")[1]
    assert latin is not t and latin.by_name["name"].charset == "latin1" and t.by_name["name"].charset != "latin1"
    # LIKE depends on the tracker's own tables: parsed each time
    n = len(parsed)
    a.apply("CREATE TABLE cache_u LIKE cache_t", "db")
    b.apply("CREATE TABLE cache_u LIKE cache_t", "db")
    assert len(parsed) == n + 2


@pytest.mark.parametrize("column, stored", [
    ("i int DEFAULT 0x10", "16"),  # a hexadecimal literal is a number in a numeric column
    ("i int DEFAULT X'0a'", "10"),
    ("b bit(8) DEFAULT b'101'", 5),  # and bits in a BIT one
    ("b bit(16) DEFAULT 0x3132", 0x3132),
    ("bb binary(3) DEFAULT x'0102'", b"\x01\x02\x00"),  # BINARY(N) zero-padded to N
    ("bb binary(4) DEFAULT 'ab'", "ab\0\0"),
    ("vb varbinary(4) DEFAULT 'ab'", "ab"),
    ("y year DEFAULT 99", "1999"),  # YEAR's two digits
    ("y year DEFAULT '05'", "2005"),
    ("d decimal(5,2) DEFAULT 1.5", "1.50"),  # a DECIMAL's scale
    ("d decimal(5,2) DEFAULT '1.555'", "1.56"),
    ("dt datetime(3) DEFAULT '2020-01-01 01:02:03'", "2020-01-01 01:02:03.000"),  # a DATETIME's fraction
    ("ts timestamp DEFAULT '2020-01-01 01:02:03.000'", "2020-01-01 01:02:03"),
    ("ts timestamp(2) DEFAULT CURRENT_TIMESTAMP(2)", "CURRENT_TIMESTAMP(2)"),
    ("e enum('x','y') DEFAULT 'X'", "x"),  # a member as declared
    ("s set('a','b','c') DEFAULT 'C,A'", "a,c"),
    ("v varchar(10) DEFAULT 'X'", "X"),
])
def test_a_default_is_stored_as_tidb_keeps_it(column, stored):
    """TiDB converts a DEFAULT literal to the column's type when the table is made (ddl getDefaultValue), and
    TiCDC's encoders write that value: the Avro schema's default of `int DEFAULT 0x10` is 16, not "0x10"."""
    t = parse_create_table(f"CREATE TABLE t (id int PRIMARY KEY, {column})")
    assert t.columns[1].default == stored


def test_avro_defaults_of_a_made_table_are_of_their_fields_types():
    from changefeed.avro.schema import value_schema
    from changefeed.config import build_config

    t = parse_create_table("CREATE TABLE t (id int PRIMARY KEY, i int NOT NULL DEFAULT 0x10, b bit(8) NOT NULL "
                           "DEFAULT b'101', bb binary(3) NOT NULL DEFAULT x'0102', y year NOT NULL DEFAULT 99, "
                           "d decimal(5,2) NOT NULL DEFAULT 1.5, e enum('x','y') NOT NULL DEFAULT 'X')")
    fields = {f["name"]: f for f in value_schema(t, build_config("avro", {"avro-decimal-handling-mode": "string"}))[
        "fields"]}
    # tiflow avro's columnToAvroData of the stored defaults
    assert {n: fields[n].get("default") for n in ("i", "b", "bb", "y", "d", "e")} == {
        "i": 16, "b": "BQ==", "bb": "AQIA", "y": 1999, "d": "1.50", "e": "x"}
