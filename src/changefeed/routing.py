"""Topic names from TiCDC topic expressions (REFERENCE-NOTES §8)."""

from __future__ import annotations

import re

from .config import ConfigError

_TOPIC_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_EXPR = re.compile(r"^[A-Za-z0-9._-]*(\{schema\})?[A-Za-z0-9._-]*(\{table\})?[A-Za-z0-9._-]*$")
MAX_TOPIC_LEN = 249


class TopicExpression:
    """`[prefix]{schema}[middle][{table}][suffix]`; substituted names have every character outside
    [A-Za-z0-9._-] replaced by `_`."""

    def __init__(self, expr: str) -> None:
        if not _EXPR.match(expr) or not expr:
            raise ConfigError(f"topic expression {expr!r} is not of the form "
                              "[prefix]{schema}[middle][{table}][suffix] (characters A-Z a-z 0-9 . _ -)")
        self.expr = expr
        self.has_schema = "{schema}" in expr
        self.has_table = "{table}" in expr

    def require_table_per_topic(self, protocol: str) -> None:
        """The Avro protocols register one schema per topic: the expression must name schema and table."""
        if not (self.has_schema and self.has_table):
            raise ConfigError(f"protocol {protocol} needs one table per topic, so the topic expression must "
                              f"contain {{schema}} and {{table}}; {self.expr!r} does not "
                              "(e.g. use 'tidb_{schema}_{table}')")

    def topic(self, schema: str, table: str) -> str:
        t = self.expr.replace("{schema}", _TOPIC_CHARS.sub("_", schema)).replace(
            "{table}", _TOPIC_CHARS.sub("_", table))
        if len(t) > MAX_TOPIC_LEN:
            raise ConfigError(f"topic {t[:40]}... is longer than {MAX_TOPIC_LEN} characters")
        return t
