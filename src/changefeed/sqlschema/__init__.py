"""A small MySQL/TiDB DDL interpreter: table definitions from DDL text, kept current statement by statement.

Protocols such as canal-json carry DDL only as SQL text. `parse_create_table` turns a CREATE TABLE
(including `SHOW CREATE TABLE` output of MySQL, MariaDB and TiDB) into a `TableInfo`;
`SchemaTracker.apply` follows CREATE/DROP/TRUNCATE/RENAME/ALTER TABLE, CREATE/DROP INDEX and
CREATE/DROP DATABASE so that the full definition of every table it has seen is known.

It is not a full SQL parser: it tokenizes the statement (quotes, comments, TiDB's `/*T![feature] ... */`
and MySQL's `/*!40101 ... */` versioned comments, whose content is read as SQL) and reads what it
needs, skipping what it does not (column and index options, foreign keys, checks, partitions).
Statements it does not understand are ignored by the tracker; an ALTER of a known table that names a
column the table does not have raises `SchemaError`.

One module per step, all re-exported here (import from `changefeed.sqlschema`):

- `tokens`       the tokenizer and the token cursor
- `definitions`  column, key and table-option definitions as written
- `work`         the working model of a table being built or altered
- `create`       CREATE TABLE (`parse_create_table`)
- `alter`        one ALTER TABLE specification
- `tracker`      `SchemaTracker`, which applies statements to the tables it knows
"""

from ..errors import SchemaError
from .create import Key as Key
from .create import parse_create_table
from .tracker import Result as Result
from .tracker import SchemaTracker

__all__ = ["SchemaError", "SchemaTracker", "parse_create_table"]
