"""The lake's naming settings (spark/apply/names.py, spark/logs.py) without Spark: the `[lake]` table and the
options over it, which paths are upstream tables, and where a session keeps its warehouse and metastore."""

from __future__ import annotations

from pathlib import Path

import pytest

from changefeed.errors import ApplyError, ConfigError
from changefeed.sinkconfig import load_changefeed_toml
from changefeed.spark.apply.names import Naming, TableNames, _same_place, lake_settings, table_names
from changefeed.spark.apply.options import ApplyOptions
from changefeed.spark.logs import METASTORE_URL, metastore_defaults


def test_lake_settings_options_over_the_toml(tmp_path: Path) -> None:
    toml = tmp_path / "cf.toml"
    toml.write_text('[lake]\ncatalog = "spark_catalog"\ndatabase-prefix = "cdc_"\ntable-format = "delta+iceberg"\n')
    assert lake_settings(str(toml), None, None, None) == ("spark_catalog", "cdc_", "delta+iceberg")
    assert lake_settings(str(toml), "other", "x_", "delta") == ("other", "x_", "delta")
    assert lake_settings(None, None, None, None) == (None, "", "delta")
    load_changefeed_toml(toml)  # [lake] is a key the changefeed TOML may hold
    bad = tmp_path / "bad.toml"
    bad.write_text('[lake]\ncatalogue = "x"\n')
    with pytest.raises(ConfigError, match=r"\[lake\] has unsupported key\(s\) catalogue"):
        lake_settings(str(bad), None, None, None)
    with pytest.raises(ConfigError, match="table-format"):
        lake_settings(None, None, None, "iceberg")


def test_only_upstream_tables_get_names() -> None:
    n = TableNames("/l/lake/", Naming("spark_catalog", "cdc_"), None)
    assert n.split("/l/lake/app/users") == ("app", "users")
    assert n.split("/l/lake/_changefeed/changelog") is None
    assert n.split("/l/lake/app") is None and n.split("/elsewhere/app/t") is None
    assert n.iceberg_name("/l/lake/app/users") == ("cdc_app", "users")
    assert Naming("spark_catalog", "cdc_").sql("app", "my`t") == "`spark_catalog`.`cdc_app`.`my``t`"
    assert _same_place("file:/l/lake/app/t", "/l/lake/app/t/") and not _same_place("file:/l/x", "/l/lake/app/t")


def test_iceberg_needs_a_local_lake_and_minimal_table_features() -> None:
    with pytest.raises(ApplyError, match="local lake"):
        table_names("s3a://bucket/lake", ApplyOptions(table_format="delta+iceberg", table_features="minimal"),
                    "s3a://bucket/lake/_changefeed")
    with pytest.raises(ApplyError, match="minimal"):
        ApplyOptions(table_format="delta+iceberg").check()
    assert not table_names("/l", ApplyOptions(), "/l/_changefeed").active


def test_the_metastore_and_warehouse_never_go_to_the_current_folder(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    folder = tmp_path / "spark"
    assert metastore_defaults({}, folder) == {"spark.sql.warehouse.dir": str(folder / "warehouse")}
    hive = {"spark.sql.catalogImplementation": "hive"}
    got = metastore_defaults(hive, folder)
    assert got[METASTORE_URL] == f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true"
    assert METASTORE_URL not in metastore_defaults({**hive, "spark.hadoop.hive.metastore.uris": "thrift://h:9083"},
                                                   folder)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "hive-site.xml").write_text("<configuration/>")
    assert METASTORE_URL not in metastore_defaults(hive, folder)  # the user's hive-site.xml names it
    assert metastore_defaults(hive, None) == {}
