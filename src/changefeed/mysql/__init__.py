"""A MySQL/MariaDB upstream: the row-based binlog read into the event model (TiCDC's view of the changes)."""
