"""TiDB TSO helpers: a commit ts is physical milliseconds << 18 | a logical counter."""

from __future__ import annotations

import datetime as _dt

PHYSICAL_SHIFT = 18
LOGICAL_MASK = (1 << PHYSICAL_SHIFT) - 1
MAX_TSO = (1 << 64) - 1


def physical_ms(ts: int) -> int:
    """Milliseconds since the Unix epoch of a TSO (what canal-json writes as `es`)."""
    return ts >> PHYSICAL_SHIFT


def logical(ts: int) -> int:
    return ts & LOGICAL_MASK


def compose(physical: int, logical_part: int = 0) -> int:
    if not 0 <= logical_part <= LOGICAL_MASK:
        raise ValueError(f"logical part {logical_part} out of range 0..{LOGICAL_MASK}")
    return (physical << PHYSICAL_SHIFT) | logical_part


def to_datetime(ts: int) -> _dt.datetime:
    """The UTC wall-clock time of a TSO."""
    return _dt.datetime.fromtimestamp(physical_ms(ts) / 1000, tz=_dt.UTC)


def from_datetime(when: _dt.datetime, logical_part: int = 0) -> int:
    return compose(int(when.timestamp() * 1000), logical_part)
