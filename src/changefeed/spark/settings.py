"""Which Spark settings a session gets: the user's first, ours only where the user and the cluster set nothing.

Precedence, highest first: `--conf K=V` on the command line, the `[spark]` table of the changefeed TOML,
`spark-defaults.conf` under SPARK_CONF_DIR (else SPARK_HOME/conf), then changefeed's small-machine defaults
(session.SMALL_MACHINE) and only where changefeed starts a local session itself: under spark-submit or with a
cluster master, the cluster's settings stand. Delta's two session settings and the connector jars are always
there (a user's `spark.jars` gets ours added, not replaced). No Spark import here: plain dicts and files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError

# what Delta needs in every session, whoever else configures it
DELTA_REQUIRED = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def parse_conf(pairs: list[str] | None, where: str = "--conf") -> dict[str, str]:
    """`K=V` strings (spark-submit's `--conf` spelling) into a dict; a pair without '=' is an error naming it."""
    out: dict[str, str] = {}
    for p in pairs or []:
        k, sep, v = p.partition("=")
        if not sep or not k.strip():
            raise ConfigError(f"{where} {p!r} is not of the form KEY=VALUE (e.g. spark.sql.shuffle.partitions=8)")
        out[k.strip()] = v.strip()
    return out


def toml_spark(table: Any, path: str | Path) -> dict[str, str]:
    """The `[spark]` table of a changefeed TOML as settings: values of any TOML scalar, spelled as Spark reads
    them (booleans lower-case)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [spark] must be a table of Spark settings (spark.x.y = \"value\")")
    out: dict[str, str] = {}
    for k, v in table.items():
        if isinstance(v, dict | list):
            raise ConfigError(f"{path}: [spark] {k} must be a single value; quote a dotted key: \"spark.a.b\" = ...")
        out[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


def config_spark(path: Path) -> dict[str, str]:
    """The `[spark]` table of a changefeed TOML file (empty when it has none)."""
    import tomllib

    try:
        doc = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not TOML: {e}") from None
    return toml_spark(doc.get("spark", {}), path)


def user_settings(conf: list[str] | None, config: Path | None) -> dict[str, str]:
    """The user's Spark settings of a command: its TOML's `[spark]`, then `--conf` over it."""
    return {**(config_spark(config) if config is not None else {}), **parse_conf(conf)}


def defaults_file(env: Mapping[str, str] | None = None) -> Path | None:
    """spark-defaults.conf where spark-submit looks for it: SPARK_CONF_DIR, else SPARK_HOME/conf."""
    env = os.environ if env is None else env
    folder = env.get("SPARK_CONF_DIR") or (str(Path(env["SPARK_HOME"]) / "conf") if env.get("SPARK_HOME") else "")
    if not folder:
        return None
    f = Path(folder) / "spark-defaults.conf"
    return f if f.is_file() else None


def read_defaults(path: Path | None) -> dict[str, str]:
    """A spark-defaults.conf (Java properties as Spark writes them: `key value` or `key=value`, `#` comments)."""
    out: dict[str, str] = {}
    if path is None:
        return out
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        m = re.match(r"([^\s=:]+)\s*[=:\s]\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
        else:
            out[line] = ""
    return out


def is_local(master: str | None) -> bool:
    """A master whose executors run in the driver's JVM (local, local[N], local[*], local[N,F])."""
    return master is None or master == "local" or master.startswith("local[")


def resolve(ours: Mapping[str, str], user: Mapping[str, str], defaults: Mapping[str, str], *, master: str | None,
            submitted: bool, jars: list[str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings changefeed passes to the session builder.

    `ours`: the small-machine defaults, used only for a local session changefeed starts itself, and only for keys
    neither the user nor spark-defaults.conf sets; `extra`: settings of ours with the same rule that also need the
    JVM this process starts (niofs). Under spark-submit (`submitted`) spark-defaults.conf is already the
    session's, so only the user's and Delta's settings are passed. `jars`: the connector jars, added to any
    `spark.jars` of the user's or the cluster's."""
    mine = not submitted and is_local(master)
    out: dict[str, str] = {}
    if mine:
        out.update({k: v for k, v in ours.items() if k not in user and k not in defaults})
        if extra and not any(k in user or k in defaults for k in extra):  # all of it or none (a class path)
            out.update(extra)
    for k, v in DELTA_REQUIRED.items():
        if k not in user and k not in defaults:
            out[k] = v
    out.update(user)
    theirs = [j for j in (user.get("spark.jars") or defaults.get("spark.jars") or "").split(",") if j.strip()]
    out["spark.jars"] = ",".join([*theirs, *(j for j in jars if j not in theirs)])
    return out
