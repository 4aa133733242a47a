"""Table definitions kept current from DDL statements (the former sqlschema.py, moved; split up next)."""

from .definitions import SchemaError, SchemaTracker, parse_create_table

__all__ = ["SchemaError", "SchemaTracker", "parse_create_table"]
