"""The Spark side of changefeed: sessions with Delta, Kafka and Avro wired in (the pipeline builds on it)."""

from .session import connector_jars, spark_session

__all__ = ["connector_jars", "spark_session"]
