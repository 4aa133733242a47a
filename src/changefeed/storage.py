"""Moved to changefeed.claimcheck (claim-check storage); this name stays for old imports."""

from .claimcheck import *  # noqa: F403
from .claimcheck import FileClaimCheck

__all__ = ["FileClaimCheck"]
