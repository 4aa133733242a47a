"""Transports: the local file transport (files.py) and Kafka (kafka.py), behind the `Transport` protocol."""

from .base import Transport

__all__ = ["Transport"]
