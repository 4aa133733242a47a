"""The lake's tables by name (`--catalog`, `[lake] catalog`/`database-prefix`), and their Iceberg side
(`--table-format delta+iceberg`): what the lake does to a table folder (created, moved, dropped) told to the
catalogs that name it (docs/catalog.md).

A table is registered by its location (`CREATE TABLE <catalog>.<prefix><db>.<table> USING delta LOCATION ...`):
an external table, whose schema Delta reads from the table's log, so every DDL the consumer applies shows
through the name without a catalog change. RENAME TABLE unregisters the old name before the folder moves and
registers the new one after; DROP TABLE unregisters the name before the folder goes. A name is only ever
replaced or unregistered when it is the lake's own table (an external table at the lake's path): a table of the
user's under the same name is refused in one line, never touched. A database is created with the property
`changefeed.lake` and dropped (DROP DATABASE upstream) only when it has it and is empty.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import ApplyError, ConfigError
from .options import q, sql_string

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .iceberg import IcebergMirror, SyncReport
    from .options import ApplyOptions

log = logging.getLogger("changefeed.lake")

LAKE_PROPERTY = "changefeed.lake"
FORMATS = ("delta", "delta+iceberg")


@dataclass(frozen=True)
class Naming:
    """How the lake's tables are named: the Spark catalog (None: no names), a prefix for databases."""

    catalog: str | None = None
    database_prefix: str = ""

    def database(self, db: str) -> str:
        return f"{self.database_prefix}{db}"

    def sql(self, db: str, table: str | None = None) -> str:
        parts = [self.catalog or "spark_catalog", self.database(db), *([table] if table is not None else [])]
        return ".".join(q(p) for p in parts)


def check_format(table_format: str) -> str:
    if table_format not in FORMATS:
        raise ConfigError(f"table-format is one of {', '.join(FORMATS)}, not {table_format!r}")
    return table_format


def _same_place(a: str, b: str) -> bool:
    """Two spellings of a table's location (file:/x, file:///x, /x) name the same folder."""
    def norm(p: str) -> str:
        for pre in ("file://", "file:"):
            if p.startswith(pre):
                p = p[len(pre):]
                break
        return p.rstrip("/")

    return norm(a) == norm(b)


class TableNames:
    """The catalogs that name a lake's tables: Spark's (`naming.catalog`) and the Iceberg mirror (or neither).
    The lake calls `created`, `moving`/`moved` and `dropping`; the applier calls `sync` after a micro-batch."""

    def __init__(self, lake: str, naming: Naming, mirror: IcebergMirror | None) -> None:
        self.lake = lake.rstrip("/")
        self.naming = naming
        self.mirror = mirror
        self._named: set[str] = set()  # paths registered (or found registered) in this process
        self._dbs: set[str] = set()

    @property
    def active(self) -> bool:
        return self.naming.catalog is not None or self.mirror is not None

    def split(self, path: str) -> tuple[str, str] | None:
        """(database, table) of a table path of this lake; None for the lake's own tables (`_changefeed/...`)."""
        rest = path[len(self.lake) + 1:] if path.startswith(self.lake + "/") else ""
        parts = rest.split("/")
        if len(parts) != 2 or not all(parts) or parts[0].startswith("_"):
            return None
        return parts[0], parts[1]

    def iceberg_name(self, path: str) -> tuple[str, str] | None:
        dt = self.split(path)
        return None if dt is None else (self.naming.database(dt[0]), dt[1])

    # --- Spark's catalog ------------------------------------------------------------------------------
    def _location(self, spark: SparkSession, name: str) -> tuple[str, str] | None:
        """(type, location) of a catalog table, None when there is none."""
        if not spark.catalog.tableExists(name):
            return None
        rows = {r["col_name"]: r["data_type"] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}
        return rows.get("Type", ""), rows.get("Location", "")

    def _ours(self, spark: SparkSession, name: str, path: str) -> bool | None:
        """True: the name is the lake's table at `path`; None: no such name; False: someone else's table."""
        got = self._location(spark, name)
        if got is None:
            return None
        kind, where = got
        return kind.upper() == "EXTERNAL" and _same_place(where, path)

    def _database(self, spark: SparkSession, db: str) -> None:
        if db in self._dbs:
            return
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {self.naming.sql(db)} COMMENT "
                  f"{sql_string('tables of a changefeed lake')} WITH DBPROPERTIES "
                  f"({sql_string(LAKE_PROPERTY)} = {sql_string(self.lake)})")
        self._dbs.add(db)

    def register(self, spark: SparkSession, path: str) -> None:
        """The table at `path` known by its name (once per process; nothing when it already is)."""
        dt = self.split(path)
        if self.naming.catalog is None or dt is None or path in self._named:
            return
        name = self.naming.sql(*dt)
        ours = self._ours(spark, name, path)
        if ours is False:
            raise ApplyError(f"catalog table {self.naming.database(dt[0])}.{dt[1]} exists and is not the lake's "
                             f"table at {path}: not replaced (another --catalog or database-prefix avoids it)")
        if ours is None:
            self._database(spark, dt[0])
            spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING delta LOCATION {sql_string(path)}")
        self._named.add(path)

    def unregister(self, spark: SparkSession, path: str) -> None:
        dt = self.split(path)
        self._named.discard(path)
        if self.naming.catalog is None or dt is None:
            return
        name = self.naming.sql(*dt)
        if self._ours(spark, name, path):
            spark.sql(f"DROP TABLE IF EXISTS {name}")  # external: the catalog entry only, never the files

    def drop_database(self, spark: SparkSession, db: str) -> None:
        """DROP DATABASE upstream: the catalog's database too, when the lake made it and it holds no table."""
        self._dbs.discard(db)
        if self.mirror is not None:
            from pyiceberg.exceptions import NamespaceNotEmptyError, NoSuchNamespaceError

            try:
                self.mirror.catalog.drop_namespace(self.naming.database(db))
            except (NoSuchNamespaceError, NamespaceNotEmptyError):
                pass
        if self.naming.catalog is None:
            return
        name = self.naming.sql(db)
        if not spark.catalog.databaseExists(f"{self.naming.catalog}.{self.naming.database(db)}"
                                            if self.naming.catalog != "spark_catalog" else self.naming.database(db)):
            return
        props = {r[0]: r[1] for r in spark.sql(f"DESCRIBE DATABASE EXTENDED {name}").collect()}
        if LAKE_PROPERTY not in props.get("Properties", "") or spark.sql(f"SHOW TABLES IN {name}").count():
            return
        spark.sql(f"DROP DATABASE IF EXISTS {name}")

    # --- what the lake tells -------------------------------------------------------------------------
    def created(self, spark: SparkSession, path: str) -> None:
        self.register(spark, path)

    def moving(self, spark: SparkSession, src: str) -> None:
        self.unregister(spark, src)
        name = self.iceberg_name(src)
        if self.mirror is not None and name is not None:
            self.mirror.moving(src, name)

    def moved(self, spark: SparkSession, dst: str) -> None:
        if self.mirror is not None:
            self.mirror.moved(dst)
        self.register(spark, dst)

    def dropping(self, spark: SparkSession, path: str) -> None:
        self.unregister(spark, path)
        name = self.iceberg_name(path)
        if self.mirror is not None and name is not None:
            self.mirror.dropping(path, name)

    def start(self, spark: SparkSession, tables: list[str]) -> None:
        """A consumer's start: every table the lake holds named (a catalog turned on over an existing lake)."""
        cat = self.naming.catalog
        if cat is not None and cat != "spark_catalog" and spark.conf.get(f"spark.sql.catalog.{cat}", None) is None:
            raise ConfigError(f"--catalog {cat}: Spark has no such catalog (spark_catalog, or one set with "
                              f"--conf spark.sql.catalog.{cat}=<class>)")
        for path in tables:
            self.register(spark, path)

    def sync(self, tables: list[str], report: SyncReport) -> None:
        """After a micro-batch: the Iceberg side of each table whose Delta log moved on."""
        if self.mirror is None:
            return
        for path in tables:
            name = self.iceberg_name(path)
            if name is not None and self.mirror.behind(path):
                self.mirror.sync(path, name, report)


def lake_settings(config: str | None, catalog: str | None, database_prefix: str | None,
                  table_format: str | None) -> tuple[str | None, str, str]:
    """(catalog, database prefix, table format) of a command: its options, over the TOML's `[lake]` table."""
    sect: dict[str, str] = {}
    if config is not None:
        import tomllib
        from pathlib import Path

        try:
            sect = lake_section(tomllib.loads(Path(config).read_text()), config)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{config}: not TOML: {e}") from None
    fmt = check_format(table_format or sect.get("table-format") or "delta")
    return catalog or sect.get("catalog") or None, database_prefix or sect.get("database-prefix", ""), fmt


def lake_section(doc: dict[str, Any], path: str) -> dict[str, str]:
    """The `[lake]` table of a changefeed TOML: catalog, database-prefix, table-format (strings)."""
    sect = doc.get("lake", {})
    if not isinstance(sect, dict):
        raise ConfigError(f"{path}: [lake] must be a table (catalog = \"spark_catalog\", database-prefix = \"...\")")
    extra = sorted(set(sect) - {"catalog", "database-prefix", "table-format"})
    if extra:
        raise ConfigError(f"{path}: [lake] has unsupported key(s) {', '.join(extra)}")
    return {k: str(v) for k, v in sect.items()}


def table_names(lake: str, o: ApplyOptions, meta: str) -> TableNames:
    """The names a consumer keeps for its options: a Spark catalog's, an Iceberg mirror (a local lake only)."""
    mirror = None
    if o.table_format == "delta+iceberg":
        if "://" in lake:
            raise ApplyError(f"table-format delta+iceberg keeps its Iceberg side on a local lake, not {lake}")
        from .iceberg import IcebergMirror

        mirror = IcebergMirror(meta)
    return TableNames(lake, Naming(o.catalog, o.database_prefix), mirror)
