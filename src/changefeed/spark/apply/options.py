"""The applier's settings (`ApplyOptions`) and the names its modules share: the changelog's row kinds, the
dead-letter schema, the SCD2 period columns, SQL quoting."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import ApplyError
from .. import table_features as features

ROW_KINDS = ("insert", "update", "delete")
ROW_KINDS_SQL = "('insert', 'update', 'delete')"
DEAD_LETTER_SCHEMA = "topic string, partition int, offset long, key binary, value binary, reason string, _batch long"
START_AT, END_AT = "__START_AT", "__END_AT"  # an SCD2 version's period: [start, end), end NULL while open
CHANGELOG_STATS = "_batch,commit_ts,topic,partition,offset"  # the changelog columns with file statistics
DEAD_LETTER_STATS = "topic,partition,offset,_batch"


# Delta's conflicts with another writer's commit (a user's OPTIMIZE, DELETE or UPDATE beside the stream): nothing of
# the failed attempt was committed, and the operation planned again on the table's new version may commit
CONCURRENT_ERRORS = ("ConcurrentAppendException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
                     "DELTA_CONCURRENT_APPEND", "DELTA_CONCURRENT_DELETE_READ", "DELTA_CONCURRENT_DELETE_DELETE")
WRITE_ATTEMPTS = 5  # an operation tried again after such conflicts at most so many times in all


def conflicted(e: BaseException) -> bool:
    """Whether `e` is Delta's refusal of a commit that another writer's commit came before (`CONCURRENT_ERRORS`)."""
    text = str(e)
    return any(c in text for c in CONCURRENT_ERRORS)


def q(name: str) -> str:
    """A quoted SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def sql_string(s: str) -> str:
    """A quoted SQL string literal."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass
class ApplyOptions:
    keys: list[str] | None = None
    sequence_by: list[str] = field(default_factory=lambda: ["commit_ts"])
    scd_type: int = 1
    apply_as_deletes: str | None = None
    apply_as_truncates: str | None = None
    column_list: list[str] | None = None
    except_column_list: list[str] | None = None
    track_history_column_list: list[str] | None = None
    watermarks: bool = True
    on_ddl_error: str = "stop"  # stop | skip
    json_as_variant: bool = False
    ddl_definitions: bool = True  # the protocol's DDL carry table definitions (the avro protocol's do not)
    text_dialect: str = "text"  # how images hold values: "text" (types.text_of) or "canal" (canal-json's own)
    untimed_deletes: bool = False  # deletes may carry no commit ts (the avro protocol's tombstones)
    # without watermarks: the stream sends each DDL to every partition of its topic, after the rows before it
    # (TiCDC's MQ sink); a DDL then waits for every partition's copy, and rows after it wait for the DDL
    ddl_barrier: bool = False
    positions: bool = True  # changes may carry a binlog position that orders them within a commit ts (debezium)
    table_features: str = features.AUTO  # auto: turn a Delta feature on when a DDL needs it; minimal: rewrite
    # tables of one window written at once (each its own Spark jobs and Delta commit, from its own thread):
    # a window of many tables costs about its largest tables, not the sum of every table's fixed cost
    table_writers: int = 4
    # the bronze changelog: "minimal" keeps what a restart reads (DDL, BOOTSTRAP, row shapes, watermarks, truncates
    # and the rows the batch left unapplied); "full" every decoded change, as it came (an audit log)
    changelog: str = "minimal"
    # upkeep after each micro-batch (`maintenance`): VACUUM of the consumer's tables with this retention in hours
    # (None: never), and compaction (Delta's auto compaction for MERGE-written tables, the changelog's small files)
    vacuum_retention_hours: float | None = None
    compact: bool = True
    # the lake's tables by name (`names`): a Spark catalog (None: by path only), a prefix of its databases, and
    # "delta+iceberg": each table also an Iceberg table over the same files (`iceberg`)
    catalog: str | None = None
    database_prefix: str = ""
    table_format: str = "delta"
    # the changelog "full": applied changes older than this many hours deleted (None: kept); "minimal" deletes
    # what a restart no longer needs whatever its age (`retention`)
    changelog_retention_hours: float | None = None

    def check(self) -> None:
        """Refuse settings that contradict each other, before anything is read or written."""
        if self.scd_type not in (1, 2):
            raise ApplyError(f"stored_as_scd_type must be 1 or 2, not {self.scd_type}")
        if self.on_ddl_error not in ("stop", "skip"):
            raise ApplyError(f"on_ddl_error is stop or skip, not {self.on_ddl_error!r}")
        if self.changelog_retention_hours is not None and (self.changelog != "full"
                                                           or self.changelog_retention_hours < 0):
            raise ApplyError("a changelog retention is a number of hours >= 0, for the full changelog (the minimal "
                             f"one keeps only what a restart needs), not {self.changelog_retention_hours} with "
                             f"changelog={self.changelog}")
        if self.track_history_column_list is not None and self.scd_type != 2:
            raise ApplyError("track_history_column_list applies to stored_as_scd_type=2")
        if self.table_format not in ("delta", "delta+iceberg"):
            raise ApplyError(f"table-format is delta or delta+iceberg, not {self.table_format!r}")
        if self.table_format == "delta+iceberg" and self.table_features != features.MINIMAL:
            raise ApplyError("table-format delta+iceberg needs table-features minimal (Iceberg readers do not read "
                             "Delta's column mapping or type widening)")
        if self.table_format == "delta+iceberg" and self.vacuum_retention_hours is not None:
            raise ApplyError("table-format delta+iceberg keeps Iceberg metadata in each table's folder, which Delta's "
                             "VACUUM would remove: vacuum-retention is refused with it")
