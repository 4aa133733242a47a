"""A real MariaDB (Debian's package, row-based binlog) started by scripts/mariadb for the session.

If the server cannot be installed or started the tests fail with the reason; they never skip.
"""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pymysql
import pytest

from tests.conftest import ROOT, _free_port

SCRIPT = str(ROOT / "scripts" / "mariadb")
_ids = itertools.count(1)


@dataclass
class Server:
    port: int
    datadir: Path

    def uri(self, tables: str, user: str = "changefeed", password: str = "changefeed", **params: object) -> str:
        q = "&".join([f"tables={tables}", f"server-id={1000 + next(_ids)}",
                      *(f"{k.replace('_', '-')}={v}" for k, v in params.items())])
        return f"mysql://{user}:{password}@127.0.0.1:{self.port}/?{q}"

    def admin(self, db: str | None = None) -> pymysql.connections.Connection:
        """A connection with every privilege, to write the changes the tests capture."""
        return pymysql.connect(host="127.0.0.1", port=self.port, user="admin", password="admin", database=db,
                               autocommit=True, charset="utf8mb4")

    def run(self, *statements: str, db: str | None = None) -> None:
        conn = self.admin(db)
        try:
            with conn.cursor() as cur:
                for s in statements:
                    cur.execute(s)
        finally:
            conn.close()

    def fresh_db(self, name: str) -> str:
        self.run(f"DROP DATABASE IF EXISTS `{name}`", f"CREATE DATABASE `{name}`")
        return name


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    port = _free_port()
    datadir = tmp_path_factory.mktemp("mariadb")
    r = subprocess.run([SCRIPT, "start", str(port), str(datadir)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.fail(f"scripts/mariadb start failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    try:
        yield Server(port, datadir)
    finally:
        subprocess.run([SCRIPT, "stop", str(datadir)], capture_output=True, timeout=120)
