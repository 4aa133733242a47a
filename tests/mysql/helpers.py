from __future__ import annotations

from changefeed.model import Event, Kind
from changefeed.mysql.source import BinlogSource
from changefeed.mysql.uri import parse_mysql_uri


def drain(src: BinlogSource) -> list[tuple[int, list[Event]]]:
    """(commit ts, events) of every transaction up to the binlog's end."""
    return [(tx.commit_ts, tx.events) for tx in src.transactions(follow=False) if tx.events]


def events_of(uri: str, **kw: object) -> tuple[BinlogSource, list[Event]]:
    src = BinlogSource(parse_mysql_uri(uri), **kw)
    return src, []


def rows(events: list[Event], kind: Kind) -> list[dict]:
    return [e.after if kind is not Kind.DELETE else e.before for e in events if e.kind is kind]
