"""A real PostgreSQL for the tests: one server per test session, in a temporary folder, on a
free loopback port, started and stopped by the suite itself (``initdb`` + ``pg_ctl`` from the
machine's PostgreSQL, Debian's ``postgresql`` package). Each test gets a schema of its own.

PostgreSQL refuses to run as root: as root the server runs as the ``postgres`` user
(``runuser``). Without PostgreSQL the tests that need it are skipped, except in CI (``CI``
set), where they fail. Connections over TCP need a password (``PASSWORD``), so a wrong one can
be tested; the superuser is ``postgres``.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

PASSWORD = "cifarlab-test-pw"
_BINS = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))


def bin_dir() -> Path | None:
    """The newest installed PostgreSQL's programs, or None."""
    env = os.environ.get("CIFARLAB_PG_BIN")
    if env:
        return Path(env)
    for folder in reversed(_BINS):
        if Path(folder, "initdb").is_file():
            return Path(folder)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """One PostgreSQL server in ``root`` on ``port``; ``url(schema)`` to connect."""

    def __init__(self, bins: Path, root: Path | None = None):
        self.bins = bins
        self.root = Path(root or tempfile.mkdtemp(prefix="cifarlab-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sock"
        self.log = self.root / "server.log"
        self.port = free_port()
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.sockets.mkdir(parents=True, exist_ok=True)
        if self._as:
            shutil.chown(self.root, "postgres")
            shutil.chown(self.sockets, "postgres")
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self._as:
            shutil.chown(pwfile, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-E", "UTF8", "--no-sync",
                  "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}")

    def _run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([*self._as, str(self.bins / program), *args], check=check,
                              capture_output=True, text=True, timeout=300)

    def start(self) -> None:
        opts = (f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300")
        proc = self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.log), "-w",
                         "-t", "120", "start", check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"PostgreSQL did not start: {proc.stderr}\n{self.log_tail()}")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "120", "stop",
                  check=False)

    def restart(self, down_s: float = 0.0) -> None:
        """Stop (fast: open connections are cut), stay down ``down_s``, start again."""
        self.stop()
        time.sleep(down_s)
        self.start()

    def url(self, schema: str | None = None, password: str = PASSWORD,
            database: str = "postgres") -> str:
        url = f"postgresql://postgres:{password}@127.0.0.1:{self.port}/{database}"
        if schema:
            url += f"?options=-csearch_path%3D{schema}"
        return url

    def psql(self, sql: str) -> str:
        proc = self._run("psql", "-h", str(self.sockets), "-p", str(self.port), "-U", "postgres",
                         "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-Atc", sql)
        return proc.stdout

    def new_schema(self) -> str:
        name = "t_" + uuid.uuid4().hex[:12]
        self.psql(f"CREATE SCHEMA {name}")
        return name

    def drop_schema(self, name: str) -> None:
        self._run("psql", "-h", str(self.sockets), "-p", str(self.port), "-U", "postgres",
                  "-d", "postgres", "-c", f"DROP SCHEMA IF EXISTS {name} CASCADE", check=False)

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text().splitlines()[-n:])
        except OSError:
            return ""

    def cleanup(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
