"""TiDB DDL action names, and deriving one from a DDL statement when an event does not say."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from .errors import UnknownDDLType

# TiDB's ActionType numbers (pkg/meta/model/job.go); the Avro protocol writes the number.
ACTIONS: dict[str, int] = {
    "ActionNone": 0,
    "ActionCreateSchema": 1,
    "ActionDropSchema": 2,
    "ActionCreateTable": 3,
    "ActionDropTable": 4,
    "ActionAddColumn": 5,
    "ActionDropColumn": 6,
    "ActionAddIndex": 7,
    "ActionDropIndex": 8,
    "ActionAddForeignKey": 9,
    "ActionDropForeignKey": 10,
    "ActionTruncateTable": 11,
    "ActionModifyColumn": 12,
    "ActionRebaseAutoID": 13,
    "ActionRenameTable": 14,
    "ActionSetDefaultValue": 15,
    "ActionShardRowID": 16,
    "ActionModifyTableComment": 17,
    "ActionRenameIndex": 18,
    "ActionAddTablePartition": 19,
    "ActionDropTablePartition": 20,
    "ActionCreateView": 21,
    "ActionModifyTableCharsetAndCollate": 22,
    "ActionTruncateTablePartition": 23,
    "ActionDropView": 24,
    "ActionRecoverTable": 25,
    "ActionModifySchemaCharsetAndCollate": 26,
    "ActionLockTable": 27,
    "ActionUnlockTable": 28,
    "ActionRepairTable": 29,
    "ActionSetTiFlashReplica": 30,
    "ActionUpdateTiFlashReplicaStatus": 31,
    "ActionAddPrimaryKey": 32,
    "ActionDropPrimaryKey": 33,
    "ActionCreateSequence": 34,
    "ActionAlterSequence": 35,
    "ActionDropSequence": 36,
    "ActionAddColumns": 37,
    "ActionDropColumns": 38,
    "ActionModifyTableAutoIDCache": 39,
    "ActionRebaseAutoRandomBase": 40,
    "ActionAlterIndexVisibility": 41,
    "ActionExchangeTablePartition": 42,
    "ActionAddCheckConstraint": 43,
    "ActionDropCheckConstraint": 44,
    "ActionAlterCheckConstraint": 45,
    "ActionRenameTables": 47,
    "ActionDropIndexes": 48,
    "ActionAlterTableAttributes": 49,
    "ActionAlterTablePartitionAttributes": 50,
    "ActionCreatePlacementPolicy": 51,
    "ActionAlterPlacementPolicy": 52,
    "ActionDropPlacementPolicy": 53,
    "ActionAlterTablePartitionPlacement": 54,
    "ActionModifySchemaDefaultPlacement": 55,
    "ActionAlterTablePlacement": 56,
    "ActionAlterCacheTable": 57,
    "ActionAlterTableStatsOptions": 58,
    "ActionAlterNoCacheTable": 59,
    "ActionCreateTables": 60,
    "ActionMultiSchemaChange": 61,
    "ActionFlashbackCluster": 62,
    "ActionRecoverSchema": 63,
    "ActionReorganizePartition": 64,
    "ActionAlterTTLInfo": 65,
    "ActionAlterTTLRemove": 67,
    "ActionCreateResourceGroup": 68,
    "ActionAlterResourceGroup": 69,
    "ActionDropResourceGroup": 70,
    "ActionAlterTablePartitioning": 71,
    "ActionRemovePartitioning": 72,
    "ActionAddColumnarIndex": 73,  # TiDB's vector index job, named ActionAddVectorIndex before (ALIASES)
}

# canal's EventType for each action (tiflow canal_entry.go convertDdlEventType); anything else is QUERY.
_CANAL_TYPES = {
    "ActionCreateTable": "CREATE",
    "ActionRenameTable": "RENAME",
    "ActionRenameTables": "RENAME",
    "ActionAddIndex": "CINDEX",
    "ActionAddForeignKey": "CINDEX",
    "ActionAddPrimaryKey": "CINDEX",
    "ActionDropIndex": "DINDEX",
    "ActionDropForeignKey": "DINDEX",
    "ActionDropPrimaryKey": "DINDEX",
    "ActionDropTable": "ERASE",
    "ActionTruncateTable": "TRUNCATE",
}
for _a in (
    "ActionAddColumn", "ActionDropColumn", "ActionModifyColumn", "ActionRebaseAutoID", "ActionSetDefaultValue",
    "ActionModifyTableComment", "ActionRenameIndex", "ActionAddTablePartition", "ActionDropTablePartition",
    "ActionModifyTableCharsetAndCollate", "ActionTruncateTablePartition", "ActionAlterIndexVisibility",
    "ActionMultiSchemaChange", "ActionReorganizePartition", "ActionAlterTablePartitioning",
    "ActionRemovePartitioning", "ActionAddColumns", "ActionDropColumns",
):
    _CANAL_TYPES[_a] = "ALTER"

CANAL_DDL_TYPES = frozenset(("CREATE", "RENAME", "CINDEX", "DINDEX", "ALTER", "ERASE", "TRUNCATE", "QUERY"))


def canal_type(action: str) -> str:
    """canal-json's DDL `type` for a TiDB action."""
    return _CANAL_TYPES.get(action, "QUERY")


# the simple protocol's own table (`getDDLType`): canal's without the plural column actions, which it leaves to
# QUERY, and with EXCHANGE PARTITION as ALTER (ticdc; tiflow's gives QUERY)
_SIMPLE_TYPES = {a: t for a, t in _CANAL_TYPES.items() if a not in ("ActionAddColumns", "ActionDropColumns")}
_SIMPLE_TYPES["ActionExchangeTablePartition"] = "ALTER"


def simple_type(action: str) -> str:
    """The simple protocol's DDL `type` for a TiDB action."""
    return _SIMPLE_TYPES.get(action, "QUERY")


# earlier names TiDB gave an action
ALIASES = {"ActionAddVectorIndex": "ActionAddColumnarIndex"}


def check_action(name: str) -> str:
    """The action's name (an earlier name: the current one), or UnknownDDLType."""
    name = ALIASES.get(name, name)
    if name not in ACTIONS:
        raise UnknownDDLType(f"unknown DDL type {name!r}: expected a TiDB action name such as ActionCreateTable")
    return name


# What an action does, for the encoders, the decoders, the upstream state and the lake (one spelling each).
# DDL that may rename columns: values move from the old names to the new ones (paired in table order)
COLUMN_RENAMING = frozenset(("ActionRenameColumn", "ActionModifyColumn", "ActionMultiSchemaChange"))
# DDL that change a table's columns: without the definition after them a lake cannot follow
COLUMN_CHANGING = COLUMN_RENAMING | frozenset((
    "ActionAddColumn", "ActionAddColumns", "ActionDropColumn", "ActionDropColumns", "ActionSetDefaultValue",
    "ActionCreateTable"))
# DDL that remove one table (a view goes as a table does)
TABLE_DROPPING = frozenset(("ActionDropTable", "ActionDropView"))
# DDL after which the table they name is gone: one table, or every table of a schema
DROPPING = TABLE_DROPPING | frozenset(("ActionDropSchema",))
TABLE_RENAMING = frozenset(("ActionRenameTable", "ActionRenameTables"))


def drops_table(action: str | None) -> bool:
    """DROP TABLE or DROP VIEW: the one table the event names is gone."""
    return action in TABLE_DROPPING


def drops_schema(action: str | None) -> bool:
    """DROP DATABASE: every table of the schema is gone."""
    return action == "ActionDropSchema"


def drops(action: str | None) -> bool:
    """A table or a schema dropped: what the event names exists only before it."""
    return action in DROPPING


def truncates(action: str | None) -> bool:
    """TRUNCATE TABLE: the table stays, its rows go."""
    return action == "ActionTruncateTable"


def renames_columns(action: str | None) -> bool:
    return action in COLUMN_RENAMING


def changes_columns(action: str | None) -> bool:
    return action in COLUMN_CHANGING


_COMMENT = r"/\*(?!\!).*?\*/|--[^\n]*|#[^\n]*"
_VERSIONED_COMMENT = r"/\*!\d*\s*(.*?)\*/"


def _clean(query: str) -> str:
    q = re.sub(_VERSIONED_COMMENT, r" \1 ", query, flags=re.S)
    q = re.sub(_COMMENT, " ", q, flags=re.S)
    return " ".join(q.split()).strip().rstrip(";").strip()


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside parentheses and quotes."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            cur.append(c)
            if c == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"`":
            quote = c
            cur.append(c)
        elif c == "(":
            depth += 1
            cur.append(c)
        elif c == ")":
            depth -= 1
            cur.append(c)
        elif c == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


# (the patterns are compiled when a statement is first read: ~50 of them are ~10 ms of a command's start)
_ALTER_SPEC_TEXTS: tuple[tuple[str, str], ...] = (
    (r"^ADD\s+(CONSTRAINT\s+(`[^`]*`|\w+)\s+)?PRIMARY\s+KEY\b", "ActionAddPrimaryKey"),
    (r"^ADD\s+(CONSTRAINT\s+(`[^`]*`|\w+)\s+)?FOREIGN\s+KEY\b", "ActionAddForeignKey"),
    (r"^ADD\s+(CONSTRAINT\s+(`[^`]*`|\w+)\s+)?CHECK\b", "ActionAddCheckConstraint"),
    (r"^ADD\s+(CONSTRAINT\s+(`[^`]*`|\w+)\s+)?(UNIQUE|INDEX|KEY|FULLTEXT|SPATIAL)\b", "ActionAddIndex"),
    (r"^ADD\s+(VECTOR|COLUMNAR)\s+(INDEX|KEY)\b", "ActionAddColumnarIndex"),
    (r"^ADD\s+PARTITION\b", "ActionAddTablePartition"),
    (r"^ADD\b", "ActionAddColumn"),
    (r"^DROP\s+PRIMARY\s+KEY\b", "ActionDropPrimaryKey"),
    (r"^DROP\s+FOREIGN\s+KEY\b", "ActionDropForeignKey"),
    (r"^DROP\s+(INDEX|KEY)\b", "ActionDropIndex"),
    (r"^DROP\s+(CHECK|CONSTRAINT)\b", "ActionDropCheckConstraint"),
    (r"^DROP\s+PARTITION\b", "ActionDropTablePartition"),
    (r"^DROP\b", "ActionDropColumn"),
    (r"^(MODIFY|CHANGE)\b", "ActionModifyColumn"),
    (r"^RENAME\s+COLUMN\b", "ActionModifyColumn"),
    (r"^RENAME\s+(INDEX|KEY)\b", "ActionRenameIndex"),
    (r"^RENAME\b", "ActionRenameTable"),
    (r"^ALTER\s+(COLUMN\s+)?(`[^`]*`|\w+)\s+(SET|DROP)\s+DEFAULT\b", "ActionSetDefaultValue"),
    (r"^ALTER\s+(INDEX|KEY)\b", "ActionAlterIndexVisibility"),
    (r"^COMMENT\b", "ActionModifyTableComment"),
    (r"^(DEFAULT\s+)?(CHARACTER\s+SET|CHARSET|COLLATE|CONVERT\s+TO)\b", "ActionModifyTableCharsetAndCollate"),
    (r"^AUTO_INCREMENT\b", "ActionRebaseAutoID"),
    (r"^AUTO_RANDOM_BASE\b", "ActionRebaseAutoRandomBase"),
    (r"^SHARD_ROW_ID_BITS\b", "ActionShardRowID"),
    (r"^TRUNCATE\s+PARTITION\b", "ActionTruncateTablePartition"),
    (r"^EXCHANGE\s+PARTITION\b", "ActionExchangeTablePartition"),
    (r"^REORGANIZE\s+PARTITION\b", "ActionReorganizePartition"),
    (r"^PARTITION\s+BY\b", "ActionAlterTablePartitioning"),
    (r"^REMOVE\s+PARTITIONING\b", "ActionRemovePartitioning"),
    (r"^SET\s+TIFLASH\s+REPLICA\b", "ActionSetTiFlashReplica"),
    (r"^TTL\b", "ActionAlterTTLInfo"),
    (r"^REMOVE\s+TTL\b", "ActionAlterTTLRemove"),
)

_STATEMENT_TEXTS: tuple[tuple[str, str], ...] = (
    (r"^CREATE\s+(DATABASE|SCHEMA)\b", "ActionCreateSchema"),
    (r"^DROP\s+(DATABASE|SCHEMA)\b", "ActionDropSchema"),
    (r"^ALTER\s+(DATABASE|SCHEMA)\b", "ActionModifySchemaCharsetAndCollate"),
    (r"^CREATE\s+(OR\s+REPLACE\s+)?(ALGORITHM\s*=\s*\w+\s+)?(DEFINER\s*=\s*\S+\s+)?"
     r"(SQL\s+SECURITY\s+\w+\s+)?VIEW\b", "ActionCreateView"),
    (r"^DROP\s+VIEW\b", "ActionDropView"),
    (r"^CREATE\s+(GLOBAL\s+)?(TEMPORARY\s+)?TABLE\b", "ActionCreateTable"),
    (r"^DROP\s+(TEMPORARY\s+)?TABLES?\b", "ActionDropTable"),
    (r"^TRUNCATE\b", "ActionTruncateTable"),
    (r"^CREATE\s+(VECTOR|COLUMNAR)\s+INDEX\b", "ActionAddColumnarIndex"),
    (r"^CREATE\s+(UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX\b", "ActionAddIndex"),
    (r"^DROP\s+INDEX\b", "ActionDropIndex"),
    (r"^CREATE\s+SEQUENCE\b", "ActionCreateSequence"),
    (r"^ALTER\s+SEQUENCE\b", "ActionAlterSequence"),
    (r"^DROP\s+SEQUENCE\b", "ActionDropSequence"),
    (r"^RECOVER\s+TABLE\b|^FLASHBACK\s+TABLE\b", "ActionRecoverTable"),
    (r"^LOCK\s+TABLES?\b", "ActionLockTable"),
    (r"^UNLOCK\s+TABLES?\b", "ActionUnlockTable"),
)

_RENAME = r"^RENAME\s+TABLES?\s+(.*)$"
_ALTER_TABLE = r"^ALTER\s+(ONLINE\s+|OFFLINE\s+|IGNORE\s+)*TABLE\s+(`[^`]*`(\.`[^`]*`)?|\S+)\s*(.*)$"


@functools.cache
def _compiled(texts: tuple[tuple[str, str], ...]) -> list[tuple[re.Pattern[str], str]]:
    """A table of (pattern, action), compiled once."""
    return [(re.compile(text, re.I), action) for text, action in texts]


def action_from_query(query: str) -> str:
    """The TiDB action a DDL statement performs (ActionNone when it is not recognised)."""
    q = _clean(query)
    m = re.match(_RENAME, q, re.I | re.S)
    if m:
        return "ActionRenameTables" if len(split_top_level(m.group(1))) > 1 else "ActionRenameTable"
    m = re.match(_ALTER_TABLE, q, re.I | re.S)
    if m:
        specs = [s for s in split_top_level(m.group(4)) if s]
        if not specs:
            return "ActionNone"
        actions = []
        for spec in specs:
            for pat, action in _compiled(_ALTER_SPEC_TEXTS):
                if pat.match(spec):
                    actions.append(action)
                    break
            else:
                actions.append("ActionNone")
        if len(actions) == 1:
            return actions[0]
        return "ActionMultiSchemaChange"
    for pat, action in _compiled(_STATEMENT_TEXTS):
        if pat.match(q):
            return action
    return "ActionNone"


_CANAL_TO_ACTION = {
    "CREATE": "ActionCreateTable",
    "ERASE": "ActionDropTable",
    "TRUNCATE": "ActionTruncateTable",
    "RENAME": "ActionRenameTable",
    "CINDEX": "ActionAddIndex",
    "DINDEX": "ActionDropIndex",
    "ALTER": "ActionMultiSchemaChange",
    "QUERY": "ActionNone",
}


def action_from_canal(event_type: str, query: str, types: Callable[[str], str] = canal_type) -> str:
    """Recover the TiDB action of a canal-json/simple DDL (`types`: the protocol's table): the query says more
    than the type."""
    derived = action_from_query(query)
    if derived != "ActionNone" and types(derived) == event_type:
        return derived
    fallback = _CANAL_TO_ACTION.get(event_type, "ActionNone")
    return derived if fallback == "ActionNone" else fallback
