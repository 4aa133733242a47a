"""The TiCDC simple protocol, JSON and Avro, with the BOOTSTRAP cadence and the consumer's schema cache."""

from .bootstrap import Bootstrapper, BootstrappingEncoder
from .decoder import SimpleDecoder
from .encoder import SimpleEncoder

__all__ = ["Bootstrapper", "BootstrappingEncoder", "SimpleDecoder", "SimpleEncoder"]
