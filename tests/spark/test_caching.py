"""caching.cache_in_session: which settings it sets on a session's conf, and only when they differ (no Spark)."""

from __future__ import annotations

from changefeed.spark.caching import CACHE_IN_SESSION, cache_in_session


class Conf:
    """A session's `conf` as `cache_in_session` uses it: get with a default, set."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)
        self.sets: list[str] = []

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.sets.append(key)
        self.values[key] = value


class Session:
    def __init__(self, values: dict[str, str]) -> None:
        self.conf = Conf(values)


def test_both_settings_are_set_where_the_session_has_neither():
    s = Session({})
    assert cache_in_session(s) == list(CACHE_IN_SESSION)
    assert s.conf.values == CACHE_IN_SESSION


def test_a_session_set_already_is_left_alone_whatever_the_spelling():
    s = Session({"spark.sql.sources.bucketing.autoBucketedScan.enabled": "FALSE",
                 "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true"})
    assert cache_in_session(s) == []
    assert s.conf.sets == []


def test_a_users_opposite_setting_is_turned():
    """A user's `autoBucketedScan.enabled=true` would clone a session for every cache of the consumer's."""
    s = Session({"spark.sql.sources.bucketing.autoBucketedScan.enabled": "true"})
    assert cache_in_session(s) == list(CACHE_IN_SESSION)
    assert s.conf.values["spark.sql.sources.bucketing.autoBucketedScan.enabled"] == "false"
