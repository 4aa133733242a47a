"""Moved to changefeed.upstream (the expected upstream state); this name stays for old imports."""

from .upstream import *  # noqa: F403
from .upstream import TableState, UpstreamState, column_renames, final_state, row_key, state_events

__all__ = ["TableState", "UpstreamState", "column_renames", "final_state", "row_key", "state_events"]
