"""A throwaway PostgreSQL server for the tests: started in a temporary folder, stopped and removed after.

    with PostgresServer() as server:
        url = server.create_database("gradebook")     # a SQLAlchemy URL nbgrader accepts as db_url

The server listens only on a Unix socket in its own folder (no TCP port, so nothing clashes with another
server or another test run), trusts local connections, and skips fsync (its data is thrown away). PostgreSQL
refuses to run as root, so when the tests run as root the server runs as the unprivileged user `nobody`
(setpriv drops the privileges) and its folder is handed to that user; as any other user it runs as that user.
Debian's `postgresql` package provides `initdb`, `postgres` and `pg_isready` in /usr/lib/postgresql/<version>/bin, off
PATH; `make test` installs it where missing.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

SUPERUSER = "grader"                 # the role initdb creates; local connections are trusted
UNPRIVILEGED = "nobody"              # who runs the server when the tests run as root
START_TIMEOUT = 60                   # seconds


def postgres_bin() -> Path | None:
    """The folder of PostgreSQL's server programs (initdb, postgres, pg_isready): PATH's, else Debian's newest."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                      key=lambda path: int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0)
    return Path(versions[-1]).parent if versions else None


class PostgresServer:
    """One PostgreSQL server in a temporary folder, for the length of a `with` block."""

    def __init__(self):
        self.bin = postgres_bin()
        if self.bin is None:
            raise FileNotFoundError("PostgreSQL's initdb is not installed (Debian: apt-get install postgresql; "
                                    "`make test` installs it)")
        self.folder: Path | None = None
        self.process: subprocess.Popen | None = None

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def socket_dir(self) -> Path:
        return self.folder

    def _as_server_user(self) -> list[str]:
        """The command prefix that runs a program as the server's user (nothing when not root)."""
        if os.geteuid() != 0:
            return []
        user = pwd.getpwnam(UNPRIVILEGED)
        return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--"]

    @staticmethod
    def _env() -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run([*self._as_server_user(), str(self.bin / args[0]), *args[1:]], cwd=self.folder,
                                env=self._env(), capture_output=True, text=True, timeout=START_TIMEOUT)
        if check and result.returncode:
            log = self.folder / "server.log"
            raise RuntimeError(f"{' '.join(args[:2])} failed ({result.returncode}):\n{result.stdout}\n"
                               f"{result.stderr}\n{log.read_text() if log.exists() else ''}")
        return result

    def start(self) -> "PostgresServer":
        # Its own folder straight under a temporary folder, so the socket's path stays short (the limit is
        # about 100 characters). As root, under /tmp itself: pytest's folders, and TMPDIR where a CI sets
        # it to a private one, are closed to other users, and `nobody` could not enter them.
        self.folder = Path(tempfile.mkdtemp(prefix="pg-", dir="/tmp" if os.geteuid() == 0 else None))
        if os.geteuid() == 0:
            user = pwd.getpwnam(UNPRIVILEGED)
            os.chown(self.folder, user.pw_uid, user.pw_gid)
        self._run("initdb", "--pgdata", str(self.data), "--username", SUPERUSER, "--auth", "trust",
                  "--encoding", "UTF8", "--locale", "C", "--no-sync")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(f"\n# a throwaway test server\nlisten_addresses = ''\n"
                       f"unix_socket_directories = '{self.socket_dir}'\n"
                       "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
        # The server runs as this process's child (not daemonized by pg_ctl), so stopping it reaps it.
        with open(self.folder / "server.log", "ab") as log:
            self.process = subprocess.Popen([*self._as_server_user(), str(self.bin / "postgres"), "-D", str(self.data)],
                                            cwd=self.folder, env=self._env(), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while self._run("pg_isready", "--host", str(self.socket_dir), "--username", SUPERUSER,
                        "--dbname", "postgres", check=False).returncode:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start:\n{(self.folder / 'server.log').read_text()}")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self.folder is None:
            return
        if self.process is not None:
            self.process.send_signal(signal.SIGINT)          # PostgreSQL's fast shutdown
            try:
                self.process.wait(timeout=START_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None

    def __enter__(self) -> "PostgresServer":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of one database on this server (psycopg2, over the Unix socket)."""
        return f"postgresql+psycopg2://{SUPERUSER}@/{database}?host={self.socket_dir}"

    def create_database(self, name: str) -> str:
        """Create an empty database; returns its SQLAlchemy URL."""
        import psycopg2

        connection = psycopg2.connect(host=str(self.socket_dir), user=SUPERUSER, dbname="postgres")
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()
        return self.url(name)


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server for the session (skipped only where PostgreSQL is not installed at all)."""
    if postgres_bin() is None:
        pytest.skip("PostgreSQL's initdb is not installed (`make test` installs Debian's postgresql)")
    with PostgresServer() as server:
        yield server
