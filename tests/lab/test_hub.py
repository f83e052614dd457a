"""A real class on the course's JupyterHub (deploy/hub/): real Unix accounts, each logged in from Chromium.

`tools.hub prepare` readies the machine as an admin would (accounts, the course owned by the grader account, the
exchange, the users' Python, a control group delegated to the grader account), and the hub runs on loopback as
deploy/hub/jupyterhub_config.py configures it. The tests run in order as one class session:

- the formgrader is a hub service running as the grader account, which instructors reach and students do not;
- the instructor releases assignment 1 from it; ada and bob log in, fetch it from the Assignments tab, answer it
  (ada correctly, bob with the sample variance), press Validate (which names bob's misconception) and submit;
  the due date passes; cy submits a correct answer after it, with a memory hog spread over forked processes;
- the instructor collects and autogrades from the formgrader, as the grader account, with every limit in force
  (cy's hog is stopped by her submission's control group and flagged; no "per process only" anywhere), then
  generates and releases feedback; each student fetches their own feedback and reads their score;
- a student cannot read a classmate's home, the exchange's inbound, another's feedback, the course or the
  gradebook, and an entry bob makes in ada's name is not collected as hers;
- the class report and the Canvas import file come out for the class.

The accounts are made and removed by the test; it needs root, Debian's python3.11 and setpriv. Screenshots go to
_build/test-output/hub/.
"""

from __future__ import annotations

import csv
import datetime
import os
import pwd
import random
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from autograder import cells
from autograder.course import Course
from tests import attacks
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.lab.test_roles import (CORRECT, CORRECT_BACKWARD, SAMPLE_VARIANCE, TIMEOUT, Lab, modal, open_notebook,
                                  submit)
from tests.sitecheck import TEST_OUTPUT
from tools import grading
from tools import hub as hub_tools

pytestmark = [pytest.mark.lab, pytest.mark.browser, pytest.mark.grading]

SCREENSHOTS = TEST_OUTPUT / "hub"
A = "01-layernorm"
NOTEBOOK = "layernorm.ipynb"
TAG = str(os.getpid())[-5:]                    # accounts of this run only, whatever an earlier run left
INSTRUCTOR, ADA, BOB, CY, GRADER = (f"{name}{TAG}" for name in ("teach", "ada", "bob", "cy", "grader"))
STUDENTS = [ADA, BOB, CY]
POINTS = sum(grading.points_by_answer(A).values())
BOB_POINTS = grading.points_by_answer(A)["layernorm"] - sum(
    grading.graded_cell_points(A)[cell][1] for cell in ("test_worked_example", "test_population_variance"))
ANSWERS = {ADA: {"layernorm": CORRECT, "layernorm_backward": CORRECT_BACKWARD},
           BOB: {"layernorm": SAMPLE_VARIANCE},
           CY: {"layernorm": CORRECT + "\n" + attacks.FORK_MEMORY, "layernorm_backward": CORRECT_BACKWARD}}
LATE_PERCENT = 10                               # the course's per-day share (autograder/nbgrader_config.py)
_shots = iter(range(1, 100))


def shot(page, name: str) -> None:
    page.screenshot(path=SCREENSHOTS / f"{next(_shots):02d}-{name}.png")


@dataclass
class Hub:
    url: str
    root: Path
    settings: dict[str, str]
    process: subprocess.Popen
    log: Path

    @property
    def course(self) -> Course:
        return Course(Path(self.settings["COURSE_HUB_COURSE"]))

    @property
    def exchange(self) -> Path:
        return Path(self.settings["COURSE_HUB_EXCHANGE"])

    def home(self, name: str) -> Path:
        return Path(pwd.getpwnam(name).pw_dir)

    def run_as(self, name: str, argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
        """A command as that account, with its own ids and a clean environment, as its own shell would run it."""
        account = pwd.getpwnam(name)
        env = {"PATH": f"{Path(self.settings['COURSE_HUB_PYTHON']).parent}:/usr/bin:/bin", "HOME": account.pw_dir,
               "LANG": "C.UTF-8", "USER": name}
        env.update({key: value for key, value in self.settings.items() if key.startswith("COURSE_GRADING_")})
        return subprocess.run(["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--init-groups",
                               "env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv],
                              cwd=cwd or account.pw_dir, capture_output=True, text=True, timeout=600)

    def python_as(self, name: str, code: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return self.run_as(name, [self.settings["COURSE_HUB_PYTHON"], "-c", code], cwd)


def free_port_block(size: int = 4) -> int:
    """A port whose next `size - 1` are free too (the hub, the formgrader, the hub's API, the proxy's API)."""
    for _ in range(200):
        base = random.randrange(20000, 60000)
        try:
            for port in range(base, base + size):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no block of free ports")


def wait_for(url: str, process: subprocess.Popen, log: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the hub exited:\n{log.read_text()[-4000:]}")
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"{url} did not answer:\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="module")
def hub():
    if os.geteuid() != 0:
        pytest.skip("a hub with real accounts needs root (it makes them, and starts each user's server as them)")
    if not hub_tools.DEBIAN_PYTHON.exists() or not shutil.which("setpriv"):
        pytest.skip("needs Debian's python3.11 (a Python every account can run) and setpriv")
    root = Path(tempfile.mkdtemp(prefix="hub-", dir="/tmp"))
    accounts = [INSTRUCTOR, *STUDENTS, GRADER]
    process = None
    try:
        settings = hub_tools.prepare(root, [INSTRUCTOR], STUDENTS, demo=True, assignments=[A], port=free_port_block(),
                                     home_root=root / "home", grader=GRADER)
        # The instructor's settings, where the course's file says: late by seconds is late, and 3 GB for a
        # submission, so that bob's 3.8 GB spread over processes is more than his.
        config = Course(Path(settings["COURSE_HUB_COURSE"])).autograder / "nbgrader_config.py"
        text = config.read_text()
        assert text.count("\ntry:\n    configure(c)") == 1
        config.write_text(text.replace("\ntry:\n    configure(c)", "\nc.Limits.memory_gb = 3\ntry:\n    configure(c)")
                          + "\nc.CourseLatePolicy.grace_minutes = 0\n")
        log = root / "hub.log"
        process = subprocess.Popen(hub_tools.hub_command(), cwd=root / "hub", env=hub_tools.hub_environment(settings),
                                   stdout=log.open("w"), stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{settings['COURSE_HUB_PORT']}"
        deadline = time.monotonic() + 120
        wait_for(f"{url}/hub/api", process, log, deadline)
        wait_for(f"http://127.0.0.1:{int(settings['COURSE_HUB_PORT']) + 1}/services/{hub_tools.COURSE.course_id}/api",
                 process, log, deadline)
        yield Hub(url, root, settings, process, log)
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for name in accounts:
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        time.sleep(0.5)
        if (root / "hub.log").exists():
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(root / "hub.log", SCREENSHOTS / "hub.log")        # the hub's and every server's log
        if str(root) in hub_tools.load_state()["roots"]:
            # What prepare made, as an admin removes it: the accounts, /etc's files, the control group, and this
            # checkout's folders reopened for the tests after this one.
            hub_tools.teardown(root, remove_course=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium-headless-shell)")
    from playwright.sync_api import sync_playwright

    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Person(Lab):
    """One person logged in to the hub with their Unix password, in a browser context of their own."""

    def __init__(self, browser, hub: Hub, name: str):
        self.name, self.hub = name, hub
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.errors, self.pwned = [], []
        self.page.goto(f"{hub.url}/hub/login")
        self.page.fill("#username_input", name)
        self.page.fill("#password_input", f"demo-{name}")
        self.page.click("#login_submit")


@pytest.fixture(scope="module")
def people(browser, hub):
    logged_in = {name: Person(browser, hub, name) for name in (INSTRUCTOR, *STUDENTS)}
    for person in logged_in.values():
        person.ready()                      # each one's JupyterLab, started as them
    yield logged_in
    for person in logged_in.values():
        person.context.close()


@pytest.fixture(scope="module")
def formgrader(people, hub):
    page = people[INSTRUCTOR].context.new_page()
    page.goto(f"{hub.url}/services/{hub_tools.COURSE.course_id}/formgrader")
    page.locator(f"tr:has-text('{A}') .release a").wait_for(timeout=TIMEOUT)
    return page


def owner(path: Path) -> str:
    return pwd.getpwuid(path.stat().st_uid).pw_name


def service_users(hub: Hub) -> set[str]:
    listed = subprocess.run(["ps", "-ww", "-eo", "user:32,args"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in listed.splitlines() if f"--ServerApp.root_dir={hub.course.root}" in line}


def test_each_person_has_their_own_server_and_the_formgrader_runs_as_the_grader_account(people, hub, formgrader):
    for name, person in people.items():
        assert person.page.url.startswith(f"{hub.url}/user/{name}/lab")
        shot(person.page, f"{name}-lab")
    assert service_users(hub) == {GRADER}
    shot(formgrader, "formgrader-as-the-instructor")
    # A student who asks for the formgrader is refused by the hub.
    response = people[ADA].page.request.get(f"{hub.url}/services/{hub_tools.COURSE.course_id}/formgrader")
    assert response.status == 403, (response.status, response.url)


def test_the_course_list_opens_the_formgrader_in_one_click(people, hub):
    """Issue 56, item 2: the course list's link opened JupyterLab framing the formgrader, which the hub's
    `frame-ancestors 'none'` left blank; it now opens the formgrader as a page of its own."""
    instructor = people[INSTRUCTOR]
    listed = instructor.page.request.get(f"{hub.url}/user/{INSTRUCTOR}/formgraders")
    courses = listed.json()["value"]
    assert [course["course_id"] for course in courses] == [hub_tools.COURSE.course_id], courses
    tab = instructor.context.new_page()
    tab.goto(courses[0]["url"])                            # the link's target is a new tab
    tab.locator(f"tr:has-text('{A}') .release a").wait_for(timeout=TIMEOUT)     # the formgrader's own page
    assert "/formgrader" in tab.url and "/lab" not in tab.url, tab.url
    shot(tab, "formgrader-from-the-course-list")
    tab.close()


def test_an_assistant_gets_no_terminal_kernel_or_file_write_as_the_grader_account(people, hub):
    """Issue 56, item 3: the formgrade group reached a full JupyterLab as the grader account, terminals and
    kernels included; what the course's formgrader service answers each of them now."""
    service = f"{hub.url}/services/{hub_tools.COURSE.course_id}"
    request = people[INSTRUCTOR].page.request
    request.get(f"{service}/formgrader")                    # the service's own cookies, its _xsrf among them
    xsrf = next((cookie["value"] for cookie in people[INSTRUCTOR].context.cookies(service)
                 if cookie["name"] == "_xsrf"), "")
    headers = {"X-XSRFToken": xsrf}
    answers = {
        "a kernel": request.post(f"{service}/api/kernels", headers=headers, data={}).status,
        "a session": request.post(f"{service}/api/sessions", headers=headers,
                                  data={"path": "x.ipynb", "type": "notebook", "kernel": {"name": "python3"}}).status,
        "a terminal": request.post(f"{service}/api/terminals", headers=headers, data={}).status,
        "the list of kernels": request.get(f"{service}/api/kernels").status,
        "a file written": request.put(f"{service}/api/contents/autograder/nbgrader_config.py", headers=headers,
                                      data={"type": "file", "format": "text", "content": "import os"}).status,
    }
    assert answers["a terminal"] in (403, 404), answers           # refused, or no terminals at all
    answers.pop("a terminal")
    assert answers == {"a kernel": 403, "a session": 403, "the list of kernels": 403, "a file written": 403}, answers
    assert "import os" not in (hub.course.autograder / "nbgrader_config.py").read_text()


def test_every_login_shell_has_the_courses_python_and_nbgrader(hub):
    """Issue 56, item 4: `python` and `nbgrader` were "command not found" in every terminal (a login shell, whose
    /etc/profile resets PATH)."""
    for name in (ADA, GRADER):
        found = subprocess.run(["su", "-", name, "-c", "command -v python nbgrader"], capture_output=True, text=True,
                               env={"PATH": "/usr/bin:/bin"}, cwd="/")
        assert found.stdout.split() == [f"{Path(hub.settings['COURSE_HUB_PYTHON']).parent}/{command}"
                                        for command in ("python", "nbgrader")], (name, found.stdout, found.stderr)


def test_the_preflight_as_the_page_writes_it_sees_the_grader_accounts_control_group(hub):
    """Issue 56, item 5: run as the instructors' page says (the grader account's login shell, from its course
    copy), it found no Python, or reported "per process only" for want of the control group's variable."""
    ran = subprocess.run(["su", "-", GRADER, "-c", f"cd {hub.course.root} && python -m autograder.sandbox.preflight"],
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, cwd="/")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"Grading preflight for {hub.course.root}" in ran.stdout
    if "COURSE_GRADING_CGROUP_PARENT" in hub.settings:
        assert ran.stdout.count("holds for the whole submission") == 2 and "per process only" not in ran.stdout


def test_the_instructor_releases_assignment_1_from_the_formgrader(formgrader, hub):
    row = formgrader.locator("tr", has=formgrader.locator(f"a:text-is('{A}')"))
    row.locator(".release a").click()
    modal(formgrader, "Successfully released")
    outbound = hub.exchange / hub_tools.COURSE.course_id / "outbound" / A
    assert owner(outbound) == GRADER and (outbound / NOTEBOOK).exists()


def fetch_answer_and_submit(student: Person, hub: Hub, validated: str | None = None) -> None:
    """Fetch from the Assignments tab, save the answer, press Validate (expecting `validated` in what it says,
    when given) and Submit."""
    student.assignments()
    released = student.page.locator("#released_assignments_list")
    released.get_by_text(A).wait_for(timeout=TIMEOUT)
    released.get_by_role("button", name="Fetch").click()
    student.page.locator("#fetched_assignments_list").get_by_text(A).wait_for(timeout=TIMEOUT)
    fetched = hub.home(student.name) / A / NOTEBOOK
    assert owner(fetched) == student.name
    # The answer, as the student saves it (typing it in is tests/lab/test_roles.py's part).
    nbformat.write(grading.submission_from_release(A, ANSWERS[student.name]), fetched)
    account = pwd.getpwnam(student.name)
    os.chown(fetched, account.pw_uid, account.pw_gid)
    if validated:
        open_notebook(student)
        message = student.validate()
        shot(student.page, f"{student.name}-validated")
        student.close_dialog()
        assert validated in message, message
    submit(student)
    shot(student.page, f"{student.name}-submitted")


def test_two_students_fetch_answer_and_submit_on_time(people, hub):
    for name, validated in ((ADA, "passes all the tests"), (BOB, "divides by D-1")):
        fetch_answer_and_submit(people[name], hub, validated)
    entries = (hub.exchange / hub_tools.COURSE.course_id / "inbound").iterdir()
    assert {(entry.name.split("+")[0], owner(entry)) for entry in entries} == {(ADA, ADA), (BOB, BOB)}


def test_a_third_submits_after_the_due_date(people, hub):
    # A second after now (the due date has whole seconds; bob's hand-in, just before, has microseconds).
    due = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)).strftime("%Y-%m-%d %H:%M:%S UTC")
    result = hub.run_as(GRADER, [hub.settings["COURSE_HUB_PYTHON"], "-m", "nbgrader", "db", "assignment", "add", A,
                                 f"--duedate={due}"], cwd=hub.course.autograder)
    assert result.returncode == 0, result.stdout + result.stderr
    time.sleep(2.5)
    fetch_answer_and_submit(people[CY], hub)


def gradebook_totals(hub: Hub) -> dict[str, tuple[float, float]]:
    """Each student's score before the late penalty, and the penalty, from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(hub.course.db_url) as gradebook:
        return {student: (gradebook.find_submission(A, student).score,
                          gradebook.find_submission(A, student).late_submission_penalty) for student in STUDENTS}


def test_the_instructor_collects_and_autogrades_as_the_grader_account_with_every_limit(formgrader, hub):
    row = formgrader.locator("tr", has=formgrader.locator(f"a:text-is('{A}')"))
    row.locator(".collect a").click()
    modal(formgrader, "Successfully collected")
    formgrader.goto(f"{hub.url}/services/{hub_tools.COURSE.course_id}/formgrader/manage_submissions/{A}")
    for student in STUDENTS:
        submission = formgrader.locator("tr", has=formgrader.locator(f"td.student-id:text-is('{student}')"))
        submission.locator(".autograde a").click()
        modal(formgrader, f"Successfully autograded '{A}' for student '{student}'")
    formgrader.reload()
    formgrader.locator("td.score", has_text="/").first.wait_for()
    shot(formgrader, "autograded")
    scores = {student: formgrader.locator("tr", has=formgrader.locator(f"td.student-id:text-is('{student}')"))
              .locator("td.score").inner_text().strip() for student in STUDENTS}
    # The formgrader's list shows each score before the late penalty, which the gradebook holds beside it (and
    # the export, the feedback and the class report subtract: the last test).
    assert scores == {ADA: f"{POINTS:g} / {POINTS:g}", BOB: f"{BOB_POINTS:g} / {POINTS:g}",
                      CY: f"{POINTS:g} / {POINTS:g}"}, scores
    assert gradebook_totals(hub) == {ADA: (POINTS, 0), BOB: (BOB_POINTS, 0),
                                     CY: (POINTS, pytest.approx(POINTS * LATE_PERCENT / 100))}
    for student in STUDENTS:
        graded = hub.course.path("autograded", student, A) / NOTEBOOK
        assert owner(graded) == GRADER
        notebook = nbformat.read(graded, as_version=4)
        assert cells.notebook_conditions(notebook) == [], cells.notebook_conditions(notebook)
        assert not any("per process only" in flag for flag in cells.notebook_flags(notebook))
    if "COURSE_GRADING_CGROUP_PARENT" in hub.settings:
        cy = nbformat.read(hub.course.path("autograded", CY, A) / NOTEBOOK, as_version=4)
        assert any("memory limit reached" in flag for flag in cells.notebook_flags(cy)), cells.notebook_flags(cy)


def test_the_instructor_generates_and_releases_feedback(people, formgrader, hub):
    formgrader.goto(f"{hub.url}/services/{hub_tools.COURSE.course_id}/formgrader/manage_assignments")
    row = formgrader.locator("tr", has=formgrader.locator(f"a:text-is('{A}')"))
    row.locator(".generate-feedback a").click()
    modal(formgrader, "Successfully generated feedback")
    row.locator(".release-feedback a").click()
    modal(formgrader, "Successfully released feedback")
    page = NOTEBOOK.replace(".ipynb", ".html")
    assert all((hub.course.path("feedback", student, A) / page).is_file() for student in STUDENTS)
    released = list((hub.exchange / hub_tools.COURSE.course_id / "feedback").glob("*.html"))
    assert len(released) == len(STUDENTS), released          # one page a student, named by its hand-in's secret


def test_manual_grading_typesets_math_with_the_courses_own_mathjax(formgrader, hub):
    """Issue 56, item 7: the manual-grading page loaded MathJax from a CDN, which a server behind a firewall (and
    this machine) cannot reach, and showed raw TeX."""
    elsewhere = []

    def outside(request) -> None:
        if not request.url.startswith(hub.url):
            elsewhere.append(request.url)

    formgrader.on("request", outside)
    try:
        formgrader.goto(f"{hub.url}/services/{hub_tools.COURSE.course_id}/formgrader/gradebook/{A}/"
                        f"{NOTEBOOK.replace('.ipynb', '')}")
        formgrader.locator("td a", has_text="Submission #").first.click()
        formgrader.locator("mjx-container").first.wait_for(timeout=TIMEOUT)
        shot(formgrader, "manual-grading-math")
    finally:
        formgrader.remove_listener("request", outside)
    assert elsewhere == [], elsewhere


@pytest.mark.parametrize("name", STUDENTS)
def test_each_student_fetches_their_own_feedback(people, hub, name):
    student = people[name]
    student.fetch_feedback()
    shot(student.page, f"{name}-feedback")
    pages = list((hub.home(name) / A / "feedback").glob(f"*/{NOTEBOOK.replace('.ipynb', '.html')}"))
    assert len(pages) == 1 and owner(pages[0]) == name, pages
    page = pages[0].read_text()
    # The feedback's total is after the late penalty, which it names on a line of its own.
    earned = {ADA: POINTS, BOB: BOB_POINTS, CY: POINTS * (1 - LATE_PERCENT / 100)}[name]
    assert f"(Score: {round(earned, 2)} / {round(float(POINTS), 2)})" in page
    assert ("Late submission penalty (Score: -" in page) == (name == CY)


PROBE = """
import json, os, sys
results = {}
for label, path in json.loads(sys.argv[1]).items():
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").read(1)
        results[label] = "read"
    except OSError as error:
        results[label] = type(error).__name__
print(json.dumps(results))
"""


def test_a_student_reads_nothing_of_a_classmate_the_exchange_the_course_or_the_gradebook(people, hub):
    import json

    course_exchange = hub.exchange / hub_tools.COURSE.course_id
    targets = {
        "a classmate's home": hub.home(ADA),
        "a classmate's fetched notebook": hub.home(ADA) / A / NOTEBOOK,
        "a classmate's feedback": next((hub.home(ADA) / A / "feedback").glob("*/*.html")),
        "the exchange's inbound (its listing)": course_exchange / "inbound",
        "the exchange's feedback (its listing)": course_exchange / "feedback",
        "the course": hub.course.root,
        "the gradebook": hub.course.gradebook_file,
        "the masters": hub.course.master_notebook(A),
        "this checkout's masters": hub_tools.REPO / "solutions",
        "this checkout's reference module": hub_tools.REPO / "gptcourse" / "__init__.py",
        "this checkout's history": hub_tools.REPO / ".git",
        "the catalog of answers and bugs": hub_tools.REPO / "solutions" / A / "catalog.yml",
        "the mutation report": hub_tools.REPO / "autograder" / "mutation-report.md",
    }
    result = hub.run_as(BOB, [hub.settings["COURSE_HUB_PYTHON"], "-c", PROBE,
                              json.dumps({label: str(path) for label, path in targets.items()})])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {label: "PermissionError" for label in targets}


def test_an_entry_bob_makes_in_adas_name_is_not_collected_as_hers(hub):
    inbound = hub.exchange / hub_tools.COURSE.course_id / "inbound"
    forged = f"{ADA}+{A}+{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S.%f} UTC+forged"
    code = (f"import os, shutil; os.mkdir({str(inbound / forged)!r}); "
            f"shutil.copy({str(hub.home(BOB) / A / NOTEBOOK)!r}, {str(inbound / forged / NOTEBOOK)!r})")
    made = hub.python_as(BOB, code)
    assert made.returncode == 0, made.stderr                    # inbound lets every student make an entry
    submitted = hub.course.path("submitted", ADA, A) / NOTEBOOK
    before = submitted.read_bytes()
    collected = hub.run_as(GRADER, [hub.settings["COURSE_HUB_PYTHON"], "-m", "nbgrader", "collect", A, "--update"],
                           cwd=hub.course.autograder)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert f"claims to be {ADA}'s submission but belongs to {BOB}" in collected.stderr + collected.stdout
    assert submitted.read_bytes() == before


def test_the_class_report_and_the_canvas_file_come_out_for_the_class(hub):
    roster = hub.course.autograder / "roster.csv"
    with roster.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "student_id"])
        for number, student in enumerate(STUDENTS, 1):
            writer.writerow([f"Student {student}", 1000 + number, "", student, "A", student])
    grader = pwd.getpwnam(GRADER)
    os.chown(roster, grader.pw_uid, grader.pw_gid)
    out = hub.course.root / "_build" / "class-report"
    result = hub.run_as(GRADER, [hub.settings["COURSE_HUB_PYTHON"], "-m", "autograder.report", A, "--roster",
                                 str(roster), "--out", str(out)], cwd=hub.course.root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (out / f"{A}-report.html").exists()
    with (out / f"{A}-canvas.csv").open(newline="") as handle:
        rows = {row["SIS Login ID"]: row for row in csv.DictReader(handle) if row["SIS Login ID"]}
    column = next(name for name in next(iter(rows.values())) if A in name)
    late = POINTS * (1 - LATE_PERCENT / 100)
    assert {student: float(rows[student][column]) for student in STUDENTS} == {
        ADA: pytest.approx(POINTS), BOB: pytest.approx(BOB_POINTS), CY: pytest.approx(late)}
