"""The user's Spark settings over ours: --conf, the TOML's [spark], spark-defaults.conf, small-machine defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from changefeed.errors import ConfigError
from changefeed.spark.session import SMALL_MACHINE
from changefeed.spark.settings import (
    DELTA_REQUIRED,
    config_spark,
    defaults_file,
    parse_conf,
    read_defaults,
    resolve,
    user_settings,
)

JARS = ["/cache/delta.jar", "/cache/hadoop-aws.jar"]


def test_local_session_gets_small_machine_defaults_only_where_the_user_set_nothing() -> None:
    user = {"spark.sql.shuffle.partitions": "16"}
    defaults = {"spark.driver.memory": "8g"}
    out = resolve(SMALL_MACHINE, user, defaults, master="local[2]", submitted=False, jars=JARS)
    assert out["spark.sql.shuffle.partitions"] == "16"  # the user's
    assert "spark.driver.memory" not in out  # spark-defaults.conf's stands (Spark reads it itself)
    assert out["spark.driver.extraJavaOptions"] == SMALL_MACHINE["spark.driver.extraJavaOptions"]
    assert out["spark.jars"] == ",".join(JARS)


@pytest.mark.parametrize(("master", "submitted"), [("spark://10.0.0.1:7077", False), ("yarn", False),
                                                   (None, True)])
def test_cluster_or_spark_submit_gets_nothing_of_ours_but_delta_and_the_jars(master, submitted) -> None:
    out = resolve(SMALL_MACHINE, {"spark.executor.memory": "4g"}, {"spark.jars": "/theirs.jar"}, master=master,
                  submitted=submitted, jars=JARS, extra={"spark.hadoop.fs.file.impl": "x"})
    assert out == {**DELTA_REQUIRED, "spark.executor.memory": "4g", "spark.jars": ",".join(["/theirs.jar", *JARS])}


def test_a_users_class_path_drops_all_of_niofs_not_half() -> None:
    extra = {"spark.hadoop.fs.file.impl": "changefeed.niofs.NioLocalFileSystem", "spark.driver.extraClassPath": "n"}
    out = resolve({}, {"spark.driver.extraClassPath": "/mine"}, {}, master=None, submitted=False, jars=[],
                  extra=extra)
    assert out["spark.driver.extraClassPath"] == "/mine" and "spark.hadoop.fs.file.impl" not in out


def test_conf_pairs_toml_and_defaults_file(tmp_path: Path) -> None:
    toml = tmp_path / "cf.toml"
    toml.write_text('[spark]\n"spark.sql.shuffle.partitions" = 8\n"spark.ui.enabled" = true\n'
                    '"spark.hadoop.fs.s3a.endpoint" = "http://x:1"\n')
    got = user_settings(["spark.sql.shuffle.partitions=12", "spark.a=b=c"], toml)
    assert got == {"spark.sql.shuffle.partitions": "12", "spark.ui.enabled": "true",
                   "spark.hadoop.fs.s3a.endpoint": "http://x:1", "spark.a": "b=c"}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_conf(["spark.sql.shuffle.partitions"])
    toml.write_text("[spark.sql]\nshuffle = 1\n")  # an undotted key: a table, not a setting
    with pytest.raises(ConfigError, match="quote a dotted key"):
        config_spark(toml)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("# comment\nspark.master   spark://h:7077\n"
                                              "spark.driver.memory=2g\nspark.eventLog.enabled true\n")
    f = defaults_file({"SPARK_CONF_DIR": str(conf)})
    assert f is not None and read_defaults(f) == {"spark.master": "spark://h:7077", "spark.driver.memory": "2g",
                                                  "spark.eventLog.enabled": "true"}
    assert defaults_file({"SPARK_CONF_DIR": str(tmp_path / "none")}) is None


def test_a_conf_value_reaches_the_session(spark) -> None:
    """What `--conf` gives `spark_session` is in the session it returns (read back from Spark itself)."""
    from changefeed.spark import spark_session

    key = "spark.sql.shuffle.partitions"
    was = spark.conf.get(key)
    try:
        s = spark_session("local[2]", conf=parse_conf([f"{key}=7"]))
        assert s.conf.get(key) == "7"
    finally:
        spark.conf.set(key, was)


def test_every_spelling_of_a_lake_path_is_one_path() -> None:
    from changefeed.spark.layout import lake_path

    assert lake_path("file:///data/lake/") == lake_path("file:/data/lake") == lake_path("/data/lake/") == "/data/lake"
    assert lake_path("file://localhost/data/my%20lake") == "/data/my lake"
    assert lake_path("s3a://bucket/lake/") == "s3a://bucket/lake"
    import os

    # a relative path is a local folder, made absolute (Delta reads a relative location as a table name)
    assert lake_path("rel/lake/") == os.path.join(os.getcwd(), "rel", "lake")
