"""JupyterLab and nbgrader's formgrader as students and instructors use them, driven in headless Chromium.

Each role's server is started once per run with the documented command (`python -m tools.lab ROLE`,
which `make student` and `make instructor` run), in temporary folders: a scratch copy of the course for
the instructor (its exchange is the one the students use), and a home, a Jupyter state folder and a
working folder for each student. Nothing is written into the repository except the screenshots, in
_build/test-output/lab/.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS        # the same browser, launched the same way
from tests.sitecheck import TEST_OUTPUT
from tools import grading
from tools.course import REPO

SCREENSHOTS = TEST_OUTPUT / "lab"
ASSIGNMENT = "01-layernorm"
TOKEN = "course-lab-tests"
# Validate gives each cell the course's grading timeout; the tests shorten it so the infinite loop ends soon
# (assignment 1's cells take under a second: 10 s holds at a load of 4, as 8 s does for the hostile class).
VALIDATE_TIMEOUT = 10


@dataclass
class Server:
    role: str
    name: str
    url: str
    work: Path            # the server's root folder: the student's assignments, or the course
    process: subprocess.Popen
    log: Path

    def lab(self, path: str = "lab") -> str:
        return f"{self.url}{path}?token={TOKEN}"

    def kernels(self) -> list[dict]:
        """The server's own account of its kernels (id, execution_state, last_activity, connections)."""
        with urllib.request.urlopen(f"{self.url}api/kernels?token={TOKEN}", timeout=10) as response:
            return json.load(response)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(role: str, name: str, root: Path, *options: str) -> Server:
    home = root / "home"
    home.mkdir(parents=True)
    port = free_port()
    env = {**os.environ, "HOME": str(home), "JUPYTER_TOKEN": TOKEN,
           "COURSE_GRADING_CELL_TIMEOUT": str(VALIDATE_TIMEOUT) if role == "student" else
           os.environ.get("COURSE_GRADING_CELL_TIMEOUT", "60")}
    env.pop("JUPYTER_CONFIG_DIR", None)
    log = root / "server.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.lab", role, "--state", str(root / "state"), "--port", str(port),
         "--no-browser", *options],
        cwd=REPO, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    work = Path(options[options.index("--work") + 1]) if "--work" in options else Path(options[options.index("--course") + 1])
    return Server(role, name, f"http://127.0.0.1:{port}/", work, process, log)


def wait_until_up(server: Server, deadline: float) -> None:
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"{server.name}'s JupyterLab exited:\n{server.log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(f"{server.url}api/status?token={TOKEN}", timeout=2).read()
            return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"{server.name}'s JupyterLab did not start:\n{server.log.read_text()[-3000:]}")


def stop(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture(scope="module")
def lab_course(tmp_path_factory) -> Path:
    """A scratch course (masters, configuration) with assignment 1 generated, as an instructor has it."""
    course = grading.make_course(tmp_path_factory.mktemp("lab-course") / "course")
    grading.nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    return course


@pytest.fixture(scope="module")
def servers(lab_course, tmp_path_factory) -> dict[str, Server]:
    """The instructor's JupyterLab on the scratch course and two students' on its exchange, each started
    once (all three at the same time) and shared by every test of the module."""
    exchange = lab_course / "autograder" / "exchange"
    exchange.mkdir(exist_ok=True)
    started = {"instructor": start("instructor", "instructor", tmp_path_factory.mktemp("instructor"),
                                   "--course", str(lab_course))}
    for student in ("ada", "bob"):
        root = tmp_path_factory.mktemp(student)
        started[student] = start("student", student, root, "--student", student, "--exchange", str(exchange),
                                 "--work", str(root / "work"))
    try:
        deadline = time.monotonic() + 120
        for server in started.values():
            wait_until_up(server, deadline)
        yield started
    finally:
        for server in started.values():
            server.process.terminate()
        for server in started.values():
            stop(server)


@pytest.fixture(scope="module")
def chromium():
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium-headless-shell)")
    from playwright.sync_api import sync_playwright

    shutil.rmtree(SCREENSHOTS, ignore_errors=True)        # only this run's pictures
    SCREENSHOTS.mkdir(parents=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(autouse=True)
def photograph_failures(request):
    """When a step fails, every tab of each person (a module's `people` fixture) goes to the module's SCREENSHOTS
    folder as FAILED-<test>-<person>-<tab>."""
    yield
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed and "people" in request.fixturenames:
        folder = getattr(request.module, "SCREENSHOTS", SCREENSHOTS)
        for name, person in request.getfixturevalue("people").items():
            for index, page in enumerate(person.context.pages):
                page.screenshot(path=folder / f"FAILED-{request.node.name}-{name}-{index}.png")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Record each phase's outcome on the test, so a failed step can photograph what each person saw."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


def pytest_collection_modifyitems(session, config, items):
    """Run these tests before every other test of the run.

    Playwright's sync API cannot run twice at once in one thread, and the site's browser tests
    (tests/browser/) keep theirs open for the whole session. This module's Chromium is closed when its
    module ends, so running it first lets both suites share the process. (A stable sort: every other test
    keeps its order.)"""
    here = Path(__file__).parent
    items.sort(key=lambda item: here not in Path(item.path).parents)
