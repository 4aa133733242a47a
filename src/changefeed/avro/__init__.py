"""The avro protocol: Confluent wire format, key and value schemas in a schema registry."""

from .decoder import AvroDecoder
from .encoder import AvroEncoder
from .registry import SchemaRegistry, SchemaRegistryError

__all__ = ["AvroDecoder", "AvroEncoder", "SchemaRegistry", "SchemaRegistryError"]
