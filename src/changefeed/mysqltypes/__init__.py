"""The MySQL/TiDB column type system (the former mysqltypes.py, moved to `types`; split up next)."""

from .types import *  # noqa: F403
from .types import _as_text as _as_text
