"""The `[consumer]` table of a changefeed TOML: every `consume` option spelled as a TOML key, so that a service
runs from one file (`consume --config cf.toml`). TiCDC has no such table (its consumers are separate programs);
the keys are the command's options without their dashes (`vacuum-retention = 168`, `trigger = "processing-time=5
seconds"`). An option given on the command line wins over the file, the file over the built-in default.

Durations in hours (`vacuum-retention`, `changelog-retention`) take a number of hours or a string with a unit:
"36h", "7d", "90m".
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import ConfigError

SECTION = "consumer"


def hours(value: object, what: str) -> float:
    """A duration as hours: a number (hours), or a string "N", "Nh", "Nd", "Nm" (minutes); >= 0."""
    if isinstance(value, bool):
        raise ConfigError(f"{what} is a number of hours or a duration such as \"36h\" or \"7d\", not {value!r}")
    if isinstance(value, (int, float)):
        h = float(value)
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([hdm]?)\s*", str(value).lower())
        if m is None:
            raise ConfigError(f"{what} is a number of hours or a duration such as \"36h\" or \"7d\", not {value!r}")
        h = float(m.group(1)) * {"": 1.0, "h": 1.0, "d": 24.0, "m": 1 / 60}[m.group(2)]
    if h < 0 or h != h:
        raise ConfigError(f"{what} must be >= 0, not {value!r}")
    return h


def _int(lo: int) -> Callable[[object, str], int]:
    def check(v: object, what: str) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ConfigError(f"{what} must be an integer >= {lo}, not {v!r}")
        return v
    return check


def _number(v: object, what: str) -> float:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
        raise ConfigError(f"{what} must be a number >= 0, not {v!r}")
    return float(v)


def _str(v: object, what: str) -> str:
    if not isinstance(v, str):
        raise ConfigError(f"{what} must be a string, not {v!r}")
    return v


def _bool(v: object, what: str) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(f"{what} must be true or false, not {v!r}")
    return v


# TOML key -> (the command's parameter name, how the value is checked)
KEYS: dict[str, tuple[str, Callable[[object, str], Any]]] = {
    "scd": ("scd", _int(1)),
    "trigger": ("trigger", _str),
    "max-records-per-trigger": ("max_records_per_trigger", _int(1)),
    "on-ddl-error": ("on_ddl_error", _str),
    "table-features": ("table_features", _str),
    "changelog": ("changelog", _str),
    "changelog-retention": ("changelog_retention", hours),
    "watermarks": ("watermarks", _bool),
    "vacuum-retention": ("vacuum_retention", hours),
    "checkpoint": ("checkpoint", _str),
    "connect-timeout": ("connect_timeout", _number),
    "wait-for-topic": ("wait_for_topic", _bool),
    "metrics-port": ("metrics_port", _int(0)),
    "metrics-host": ("metrics_host", _str),
    "health-timeout": ("health_timeout", _number),
    "warm-up": ("warm_up", _bool),
}


def consumer_table(path: str | Path) -> dict[str, Any]:
    """The `[consumer]` table of the TOML at `path`, checked, by parameter name (empty when it has none)."""
    try:
        doc = tomllib.loads(Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not TOML: {e}") from None
    table = doc.get(SECTION, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [{SECTION}] must be a table of consume options (vacuum-retention = 168, ...)")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path}: [{SECTION}] has unsupported key(s) {', '.join(unknown)} (known: "
                          f"{', '.join(KEYS)})")
    out: dict[str, Any] = {}
    for key, value in table.items():
        name, check = KEYS[key]
        out[name] = check(value, f"{path}: [{SECTION}] {key}")
    return out


def with_toml(given: dict[str, Any], from_command_line: Callable[[str], bool], path: str | Path | None,
              accepted: set[str] | None = None) -> dict[str, Any]:
    """The options as a command takes them: `given` (every parameter's value, a default included), with each
    one not set on the command line taken from the TOML's `[consumer]` table when the table sets it. `accepted`:
    the parameters the command has (a key for another command's option is left alone)."""
    if path is None:
        return dict(given)
    out = dict(given)
    for name, value in consumer_table(path).items():
        if (accepted is None or name in accepted) and name in out and not from_command_line(name):
            out[name] = value
    return out


def command_line_source(ctx: Any) -> Callable[[str], bool]:
    """Whether a parameter of a click/typer context was given on the command line (or by its environment)."""
    def given(name: str) -> bool:
        src = ctx.get_parameter_source(name)  # click's ParameterSource (typer carries its own click)
        return src is not None and src.name not in ("DEFAULT", "DEFAULT_MAP")
    return given
