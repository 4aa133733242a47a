from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from changefeed.config import build_config
from changefeed.eventline import EventReader

ROOT = Path(__file__).resolve().parent.parent


def load_events(path: Path) -> list:
    reader = EventReader()
    return [reader.parse(line) for line in path.read_bytes().splitlines() if line.strip()]


def load_json(path: Path):
    return orjson.loads(path.read_bytes())


@pytest.fixture
def cfg():
    def make(protocol: str = "canal-json", **opts):
        return build_config(protocol, {k.replace("_", "-"): v for k, v in opts.items()})

    return make
