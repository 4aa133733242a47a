"""The debezium protocol: JSON envelope faithful to real Debezium, as TiCDC writes it."""

from .decoder import DebeziumDecoder
from .encoder import DebeziumEncoder

__all__ = ["DebeziumDecoder", "DebeziumEncoder"]
