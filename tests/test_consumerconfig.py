"""The `[consumer]` table of a changefeed TOML (consumerconfig.py): every consume option has a key, values are
checked in one line, the command line wins over the file, and the rest of the TOML still loads."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from changefeed.consumerconfig import KEYS, command_line_source, consumer_table, hours, with_toml
from changefeed.errors import ConfigError
from changefeed.sinkconfig import load_changefeed_toml


def test_durations_in_hours() -> None:
    assert hours(168, "x") == 168.0 and hours("36h", "x") == 36.0 and hours("7d", "x") == 168.0
    assert hours("90m", "x") == 1.5 and hours(0.5, "x") == 0.5 and hours("2", "x") == 2.0
    for bad in ("-1", -1, "7 weeks", True, "h"):
        with pytest.raises(ConfigError, match="x "):
            hours(bad, "x")


def test_every_consume_option_has_a_key() -> None:
    import inspect

    from changefeed import cli

    params = set(inspect.signature(cli.consume).parameters)
    # the options a service sets once; what names the stream, the lake or the session stays on the command line
    on_the_command_line = {"ctx", "source", "lake", "protocol", "option", "master", "config", "conf", "debug"}
    in_the_lake_table = {"catalog", "database_prefix", "table_format"}  # [lake] (spark/apply/names.py)
    missing = params - on_the_command_line - in_the_lake_table - {name for name, _ in KEYS.values()}
    assert not missing, f"consume options without a [consumer] TOML key: add them to consumerconfig.KEYS: {missing}"
    assert {name for name, _ in KEYS.values()} <= params


def test_the_table_is_checked(tmp_path: Path) -> None:
    toml = tmp_path / "cf.toml"
    toml.write_text('[sink]\nprotocol = "canal-json"\n[consumer]\nvacuum-retention = "7d"\nscd = 2\n'
                    'trigger = "processing-time=5 seconds"\nwatermarks = false\nmetrics-port = 0\n')
    assert consumer_table(toml) == {"vacuum_retention": 168.0, "scd": 2, "trigger": "processing-time=5 seconds",
                                    "watermarks": False, "metrics_port": 0}
    assert load_changefeed_toml(toml).protocol == "canal-json"  # the sink's reader takes the file too
    for text, words in (('[consumer]\nvacum-retention = 1\n', "unsupported key(s) vacum-retention"),
                        ('[consumer]\nscd = "2"\n', "scd must be an integer >= 1"),
                        ('[consumer]\nwatermarks = "yes"\n', "watermarks must be true or false"),
                        ('[consumer]\nchangelog-retention = "a week"\n', "changelog-retention is a number of hours"),
                        ('consumer = 3\n', "[consumer] must be a table")):
        toml.write_text(text)
        with pytest.raises(ConfigError, match=None) as e:
            consumer_table(toml)
        assert words in str(e.value) and str(toml) in str(e.value)


def test_the_command_line_wins_over_the_file(tmp_path: Path) -> None:
    toml = tmp_path / "cf.toml"
    toml.write_text('[consumer]\nvacuum-retention = 24\ntrigger = "processing-time=5 seconds"\nscd = 2\n')
    app = typer.Typer()
    seen: dict[str, Any] = {}

    @app.command()
    def consume(ctx: typer.Context,
                trigger: Annotated[str, typer.Option()] = "available-now",
                vacuum_retention: Annotated[float | None, typer.Option()] = None,
                scd: Annotated[int, typer.Option("--scd")] = 1,
                config: Annotated[Path | None, typer.Option()] = None) -> None:
        seen.update(with_toml({"trigger": trigger, "vacuum_retention": vacuum_retention, "scd": scd},
                              command_line_source(ctx), config, accepted={"trigger", "vacuum_retention"}))

    r = CliRunner().invoke(app, ["--config", str(toml), "--trigger", "available-now"])
    assert r.exit_code == 0, r.output
    # given: the command line's, even where it equals the default; not given: the file's; not accepted: the default
    assert seen == {"trigger": "available-now", "vacuum_retention": 24.0, "scd": 1}
    r = CliRunner().invoke(app, ["--vacuum-retention", "1"])
    assert r.exit_code == 0 and seen == {"trigger": "available-now", "vacuum_retention": 1.0, "scd": 1}


def test_the_documented_table_is_taken(tmp_path: Path) -> None:
    from .conftest import ROOT

    text = (ROOT / "docs" / "maintenance.md").read_text()
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    toml = tmp_path / "cf.toml"
    toml.write_text(block)
    got = consumer_table(toml)
    assert got["vacuum_retention"] == 168.0 and got["changelog_retention"] == 720.0 and got["metrics_port"] == 9464
