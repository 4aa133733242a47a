"""TiDB DDL action names, and deriving one from a DDL statement when an event does not say."""

from __future__ import annotations

import re

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
    "ActionRenameTables": 56,
    "ActionAlterTableAttributes": 58,
    "ActionAlterTablePartitionAttributes": 59,
    "ActionCreateTables": 60,
    "ActionMultiSchemaChange": 61,
    "ActionReorganizePartition": 64,
    "ActionAlterTTLInfo": 65,
    "ActionAlterTTLRemove": 67,
    "ActionAlterTablePartitioning": 71,
    "ActionRemovePartitioning": 72,
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
    """canal-json's (and the simple protocol's) DDL `type` for a TiDB action."""
    return _CANAL_TYPES.get(action, "QUERY")


def check_action(name: str) -> str:
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


_COMMENT_RE = re.compile(r"/\*(?!\!).*?\*/|--[^\n]*|#[^\n]*", re.S)
_VERSIONED_COMMENT_RE = re.compile(r"/\*!\d*\s*(.*?)\*/", re.S)


def _clean(query: str) -> str:
    q = _VERSIONED_COMMENT_RE.sub(r" \1 ", query)
    q = _COMMENT_RE.sub(" ", q)
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


_ALTER_SPECS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^ADD\s+(CONSTRAINT\s+(`[^`]*`|\w+)\s+)?PRIMARY\s+KEY\b", re.I), "ActionAddPrimaryKey"),
    (re.compile(r"^ADD\s+(CONSTRAINT\s+(`[^`]*`|\w+)\s+)?FOREIGN\s+KEY\b", re.I), "ActionAddForeignKey"),
    (re.compile(r"^ADD\s+(CONSTRAINT\s+(`[^`]*`|\w+)\s+)?CHECK\b", re.I), "ActionAddCheckConstraint"),
    (re.compile(r"^ADD\s+(CONSTRAINT\s+(`[^`]*`|\w+)\s+)?(UNIQUE|INDEX|KEY|FULLTEXT|SPATIAL)\b", re.I),
     "ActionAddIndex"),
    (re.compile(r"^ADD\s+PARTITION\b", re.I), "ActionAddTablePartition"),
    (re.compile(r"^ADD\b", re.I), "ActionAddColumn"),
    (re.compile(r"^DROP\s+PRIMARY\s+KEY\b", re.I), "ActionDropPrimaryKey"),
    (re.compile(r"^DROP\s+FOREIGN\s+KEY\b", re.I), "ActionDropForeignKey"),
    (re.compile(r"^DROP\s+(INDEX|KEY)\b", re.I), "ActionDropIndex"),
    (re.compile(r"^DROP\s+(CHECK|CONSTRAINT)\b", re.I), "ActionDropCheckConstraint"),
    (re.compile(r"^DROP\s+PARTITION\b", re.I), "ActionDropTablePartition"),
    (re.compile(r"^DROP\b", re.I), "ActionDropColumn"),
    (re.compile(r"^(MODIFY|CHANGE)\b", re.I), "ActionModifyColumn"),
    (re.compile(r"^RENAME\s+COLUMN\b", re.I), "ActionModifyColumn"),
    (re.compile(r"^RENAME\s+(INDEX|KEY)\b", re.I), "ActionRenameIndex"),
    (re.compile(r"^RENAME\b", re.I), "ActionRenameTable"),
    (re.compile(r"^ALTER\s+(COLUMN\s+)?(`[^`]*`|\w+)\s+(SET|DROP)\s+DEFAULT\b", re.I), "ActionSetDefaultValue"),
    (re.compile(r"^ALTER\s+(INDEX|KEY)\b", re.I), "ActionAlterIndexVisibility"),
    (re.compile(r"^COMMENT\b", re.I), "ActionModifyTableComment"),
    (re.compile(r"^(DEFAULT\s+)?(CHARACTER\s+SET|CHARSET|COLLATE|CONVERT\s+TO)\b", re.I),
     "ActionModifyTableCharsetAndCollate"),
    (re.compile(r"^AUTO_INCREMENT\b", re.I), "ActionRebaseAutoID"),
    (re.compile(r"^AUTO_RANDOM_BASE\b", re.I), "ActionRebaseAutoRandomBase"),
    (re.compile(r"^SHARD_ROW_ID_BITS\b", re.I), "ActionShardRowID"),
    (re.compile(r"^TRUNCATE\s+PARTITION\b", re.I), "ActionTruncateTablePartition"),
    (re.compile(r"^EXCHANGE\s+PARTITION\b", re.I), "ActionExchangeTablePartition"),
    (re.compile(r"^REORGANIZE\s+PARTITION\b", re.I), "ActionReorganizePartition"),
    (re.compile(r"^PARTITION\s+BY\b", re.I), "ActionAlterTablePartitioning"),
    (re.compile(r"^REMOVE\s+PARTITIONING\b", re.I), "ActionRemovePartitioning"),
    (re.compile(r"^SET\s+TIFLASH\s+REPLICA\b", re.I), "ActionSetTiFlashReplica"),
    (re.compile(r"^TTL\b", re.I), "ActionAlterTTLInfo"),
    (re.compile(r"^REMOVE\s+TTL\b", re.I), "ActionAlterTTLRemove"),
]

_STATEMENTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^CREATE\s+(DATABASE|SCHEMA)\b", re.I), "ActionCreateSchema"),
    (re.compile(r"^DROP\s+(DATABASE|SCHEMA)\b", re.I), "ActionDropSchema"),
    (re.compile(r"^ALTER\s+(DATABASE|SCHEMA)\b", re.I), "ActionModifySchemaCharsetAndCollate"),
    (re.compile(r"^CREATE\s+(OR\s+REPLACE\s+)?(ALGORITHM\s*=\s*\w+\s+)?(DEFINER\s*=\s*\S+\s+)?"
                r"(SQL\s+SECURITY\s+\w+\s+)?VIEW\b", re.I), "ActionCreateView"),
    (re.compile(r"^DROP\s+VIEW\b", re.I), "ActionDropView"),
    (re.compile(r"^CREATE\s+(GLOBAL\s+)?(TEMPORARY\s+)?TABLE\b", re.I), "ActionCreateTable"),
    (re.compile(r"^DROP\s+(TEMPORARY\s+)?TABLES?\b", re.I), "ActionDropTable"),
    (re.compile(r"^TRUNCATE\b", re.I), "ActionTruncateTable"),
    (re.compile(r"^CREATE\s+(UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX\b", re.I), "ActionAddIndex"),
    (re.compile(r"^DROP\s+INDEX\b", re.I), "ActionDropIndex"),
    (re.compile(r"^CREATE\s+SEQUENCE\b", re.I), "ActionCreateSequence"),
    (re.compile(r"^ALTER\s+SEQUENCE\b", re.I), "ActionAlterSequence"),
    (re.compile(r"^DROP\s+SEQUENCE\b", re.I), "ActionDropSequence"),
    (re.compile(r"^RECOVER\s+TABLE\b|^FLASHBACK\s+TABLE\b", re.I), "ActionRecoverTable"),
    (re.compile(r"^LOCK\s+TABLES?\b", re.I), "ActionLockTable"),
    (re.compile(r"^UNLOCK\s+TABLES?\b", re.I), "ActionUnlockTable"),
]

_RENAME_RE = re.compile(r"^RENAME\s+TABLES?\s+(.*)$", re.I | re.S)
_ALTER_TABLE_RE = re.compile(r"^ALTER\s+(ONLINE\s+|OFFLINE\s+|IGNORE\s+)*TABLE\s+(`[^`]*`(\.`[^`]*`)?|\S+)\s*(.*)$",
                             re.I | re.S)


def action_from_query(query: str) -> str:
    """The TiDB action a DDL statement performs (ActionNone when it is not recognised)."""
    q = _clean(query)
    m = _RENAME_RE.match(q)
    if m:
        return "ActionRenameTables" if len(split_top_level(m.group(1))) > 1 else "ActionRenameTable"
    m = _ALTER_TABLE_RE.match(q)
    if m:
        specs = [s for s in split_top_level(m.group(4)) if s]
        if not specs:
            return "ActionNone"
        actions = []
        for spec in specs:
            for pat, action in _ALTER_SPECS:
                if pat.match(spec):
                    actions.append(action)
                    break
            else:
                actions.append("ActionNone")
        if len(actions) == 1:
            return actions[0]
        return "ActionMultiSchemaChange"
    for pat, action in _STATEMENTS:
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


def action_from_canal(event_type: str, query: str) -> str:
    """Recover the TiDB action of a canal-json/simple DDL: the query says more than the type."""
    derived = action_from_query(query)
    if derived != "ActionNone" and canal_type(derived) == event_type:
        return derived
    fallback = _CANAL_TO_ACTION.get(event_type, "ActionNone")
    return derived if fallback == "ActionNone" else fallback
