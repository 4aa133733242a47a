"""TiDB's table-filter syntax (`db.*`, `!db.secret`, `*.t?`, `db[0-9].tbl`, quoted names), as TiCDC's
dispatchers and filters use it. Matching is case-insensitive; rules are read in order and the last rule
that matches a table decides (a `!` rule excludes it); a table no rule matches is excluded.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from dataclasses import dataclass

from .config import ConfigError


@dataclass(frozen=True, slots=True)
class _Rule:
    negate: bool
    schema: re.Pattern[str]
    table: re.Pattern[str]


def _unquote_part(part: str, rule: str) -> str:
    if len(part) >= 2 and part[0] == part[-1] and part[0] in "`\"":
        return part[1:-1].replace(part[0] * 2, part[0])
    return part


def _split(rule: str) -> tuple[str, str]:
    """`schema.table`, where either side may be quoted (and then may contain dots)."""
    i, n = 0, len(rule)
    while i < n:
        c = rule[i]
        if c in "`\"":
            j = rule.find(c, i + 1)
            while j != -1 and j + 1 < n and rule[j + 1] == c:
                j = rule.find(c, j + 2)
            if j == -1:
                raise ConfigError(f"table filter {rule!r}: unterminated quote")
            i = j + 1
            continue
        if c == ".":
            return rule[:i], rule[i + 1:]
        if c == "\\" and i + 1 < n:
            i += 2
            continue
        i += 1
    raise ConfigError(f"table filter {rule!r}: expected schema.table (e.g. 'db.*')")


def _pattern(part: str, rule: str) -> re.Pattern[str]:
    if len(part) >= 2 and part[0] == part[-1] and part[0] in "`\"":
        return re.compile(re.escape(_unquote_part(part, rule)) + r"\Z", re.I)
    if not part:
        raise ConfigError(f"table filter {rule!r}: empty schema or table name")
    part = re.sub(r"\\(.)", lambda m: "[" + m.group(1) + "]" if m.group(1) not in "]^" else "\\" + m.group(1), part)
    return re.compile(fnmatch.translate(part), re.I)


def _parsed(rules: list[str]) -> Iterator[tuple[bool, str, str]]:
    """(negate, body, raw) of each rule; blank lines and `#` comments skipped."""
    for raw in rules:
        r = raw.strip()
        if not r or r.startswith("#"):
            continue
        negate = r.startswith("!")
        yield negate, (r[1:].strip() if negate else r), raw


class TableFilter:
    def __init__(self, rules: list[str]) -> None:
        self.rules: list[_Rule] = []
        for negate, r, raw in _parsed(rules):
            schema, table = _split(r)
            self.rules.append(_Rule(negate, _pattern(schema, raw), _pattern(table, raw)))

    def match(self, schema: str, table: str) -> bool:
        decision = False
        for rule in self.rules:
            if rule.schema.match(schema) and rule.table.match(table):
                decision = not rule.negate
        return decision


class ColumnFilter:
    """TiDB's column filter (`*`, `!secret`, `c?_*`): case-insensitive, the last matching rule decides,
    a column no rule matches is not selected."""

    def __init__(self, rules: list[str]) -> None:
        self.rules = [(negate, _pattern(r, raw)) for negate, r, raw in _parsed(rules)]

    def match(self, column: str) -> bool:
        decision = False
        for negate, pattern in self.rules:
            if pattern.match(column):
                decision = not negate
        return decision
