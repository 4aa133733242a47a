"""The Spark side of changefeed: sessions with Delta, Kafka and Avro wired in (the pipeline builds on it).

Its names are loaded when first used, so that importing a light module of the package (`spark.layout`, as the
work-folder code does) does not load the session code: the codec commands start without it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .session import connector_jars, spark_session

__all__ = ["connector_jars", "spark_session"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import session

        return getattr(session, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
