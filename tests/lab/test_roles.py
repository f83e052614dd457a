"""A student and an instructor, clicking through JupyterLab and nbgrader's formgrader in Chromium.

The tests run in order as one class session: the instructor releases assignment 1 from the formgrader,
two students (ada and bob) fetch it from the Assignments tab, type an answer into the answer cell (ada a
correct one, bob one that divides the variance by D-1), run the notebook, press Validate and submit; the
instructor collects, autogrades from the formgrader with the course's configuration, reads the autograded
notebook, and generates and releases feedback; each student fetches their own feedback. Every step is
photographed into _build/test-output/lab/.

bob's hand-in also carries a hostile markdown cell (issue 44: script in the formgrader, a script link, a remote
tracking image): wherever the instructor reads his notebook (the formgrader, his feedback page) and where bob
reads his feedback, it must do nothing. Every request either browser makes to a URL naming "pwned" is
recorded (a context-wide listener: every tab and frame), and none may happen.
"""

from __future__ import annotations

import re
import textwrap
import time

import nbformat
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tools import grading
from tools.course import COURSE
from tests.lab.conftest import ASSIGNMENT, SCREENSHOTS, VALIDATE_TIMEOUT, Server

pytestmark = [pytest.mark.lab, pytest.mark.browser, pytest.mark.grading]

NOTEBOOK = "layernorm.ipynb"
CORRECT = textwrap.dedent("""\
    def layernorm(x, gamma, beta, eps=1e-5):
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return gamma * (x - mean) / torch.sqrt(var + eps) + beta""")
SAMPLE_VARIANCE = textwrap.dedent("""\
    def layernorm(x, gamma, beta, eps=1e-5):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True)
        return gamma * (x - mean) / torch.sqrt(var + eps) + beta""")
# ada also answers the backward pass, with the master's own solution; bob answers only the forward pass.
CORRECT_BACKWARD = grading.master_answer(ASSIGNMENT, "layernorm_backward")
POINTS = sum(grading.points_by_answer(ASSIGNMENT).values())
# bob's bug loses the worked example and the population variance, and he leaves the backward pass unanswered.
BOB = grading.points_by_answer(ASSIGNMENT)["layernorm"] - sum(
    grading.graded_cell_points(ASSIGNMENT)[cell][1] for cell in ("test_worked_example", "test_population_variance"))
BACKWARD_CELL = next(index for index, cell in enumerate(nbformat.read(COURSE.release_notebook(ASSIGNMENT), 4).cells)
                     if cell.metadata.get("nbgrader", {}).get("grade_id") == "layernorm_backward")
ADA_SCORE, BOB_SCORE = f"{POINTS:g} / {POINTS:g}", f"{BOB:g} / {POINTS:g}"
MISCONCEPTION = "divides by D-1"
HIDDEN_MARKER = "BEGIN HIDDEN TESTS"
HIDDEN_SOURCE = "check_example([2.0, 4.0, 6.0, 8.0]"       # a line of the hidden tests of test_worked_example
TIMEOUT = 120_000         # ms: a click that runs a kernel or nbgrader on a busy 2-core machine
# A markdown cell bob adds to his notebook: each part tries to reach a URL naming "pwned" (the instructor's
# contents API among them, to write a file into the course), or to mark the page. None may.
HOSTILE_MARKDOWN = (
    "Hostile markdown (issue 44): "
    """<img src="x" onerror="window.name='PWNED'; document.title='PWNED'; fetch('/api/contents/pwned-onerror.txt', """
    """{method: 'PUT', body: JSON.stringify({type: 'file', format: 'text', content: 'x'})})"> """
    """<svg onload="fetch('/pwned-svg')"></svg> <script>fetch('/pwned-script')</script> """
    """<iframe src="/pwned-iframe"></iframe> <meta http-equiv="refresh" content="0;url=/pwned-refresh"> """
    """<style>body { background: url(/pwned-style.png) }</style> """
    """[a script link](javascript:fetch('/pwned-link')) ![a tracking image](http://tracker.invalid/pwned.png) """
    """<a href="//tracker.invalid/pwned">scheme-relative</a> $\\sigma^2$"""
)
HOSTILE_TEXT = "Hostile markdown (issue 44)"
IN_A_FRAME = " (from a frame)"      # a request the feedback viewer's frame made, not the JupyterLab page
# What in a page could have run the cell: its handlers, frames and refreshes, script and scheme-relative links.
ACTIVE = ("[onerror], [onload], iframe, meta[content*='pwned' i], a[href^='javascript' i], a[href^='//'], "
          "img[src*='pwned' i], [style*='pwned' i]")
# Any attribute, script or style naming the payload's "pwned" (an http(s) link's address aside: a link is a link).
NAMED = """() => [...document.querySelectorAll('*')].filter(e =>
    [...e.attributes].some(a => /pwned/i.test(a.value) && !(e.tagName == 'A' && a.name == 'href' && /^https?:/i.test(a.value)))
    || ['SCRIPT', 'STYLE'].includes(e.tagName) && /pwned/i.test(e.textContent)).map(e => e.outerHTML.slice(0, 300))"""

# The input prompts of the notebook in view (`[ ]:`, `[*]:` or `[n]:`), as a JavaScript expression.
PROMPTS = "[...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-InputPrompt')]"

_shots = iter(range(1, 100))


def shot(page, name: str) -> None:
    page.screenshot(path=SCREENSHOTS / f"{next(_shots):02d}-{name}.png")


class Lab:
    """One person's JupyterLab tab."""

    def __init__(self, browser, server: Server):
        self.server = server
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.console: list[str] = []        # the page's console warnings and errors, for a failure's message
        self.page.on("console", lambda message: message.type in ("warning", "error")
                     and self.console.append(message.text[:300]))
        self.pwned: list[str] = []        # every request to a URL naming "pwned", from any tab or frame
        self.context.on("request", lambda request: "pwned" in request.url.lower() and self.pwned.append(
            f"{request.method} {request.url}" + (IN_A_FRAME if request.frame.parent_frame else "")))
        # On a loaded machine a kernel's start can fail once (jupyter_server's kernel list races the start), and
        # JupyterLab then asks "Select Kernel", the notebook's own preselected (seen once in a full run): a student
        # clicks Select, and so does Playwright whenever that dialog stands in the way of an action.
        self.page.add_locator_handler(self.page.locator(".jp-Dialog", has_text="Select Kernel"),
                                      lambda dialog: dialog.get_by_role("button", name="Select").click())
        self.page.goto(server.lab(), wait_until="commit")

    def ready(self) -> "Lab":
        self.page.locator(".jp-Launcher").wait_for(timeout=TIMEOUT)
        return self

    def menu(self, title: str) -> list[str]:
        """Open a top-level menu; the labels of its items."""
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{title}$")).click()
        menu = self.page.locator(".lm-Menu").last
        menu.wait_for()
        return [label.strip() for label in menu.locator(".lm-Menu-itemLabel").all_inner_texts() if label.strip()]

    def choose(self, title: str, item: str) -> None:
        self.menu(title)
        self.page.locator(".lm-Menu .lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()

    def close_menu(self) -> None:
        self.page.keyboard.press("Escape")

    def sidebar_tabs(self) -> list[str]:
        return [tab.get_attribute("title") or tab.inner_text()
                for tab in self.page.locator(".jp-SideBar .lm-TabBar-tab").all()]

    # --- the Assignments tab ---------------------------------------------------------------------
    def assignments(self):
        tab = self.page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Assignments")
        if tab.count():
            tab.click()
        else:
            self.choose("Nbgrader", "Assignment List")
        panel = self.page.locator(".nbgrader-AssignmentList, #assignments").first
        self.page.locator("#released_assignments_list_loading").wait_for(state="hidden", timeout=TIMEOUT)
        return panel

    def refresh_assignments(self):
        self.page.locator("#refresh_assignments_list").click()
        self.page.locator("#submitted_assignments_list_loading").wait_for(state="hidden", timeout=TIMEOUT)

    def fetch_feedback(self) -> None:
        """Fetch Feedback in the Assignments tab, until the submission offers to view it."""
        self.assignments()
        self.refresh_assignments()
        submitted = self.page.locator("#submitted_assignments_list")
        submitted.get_by_role("button", name="Fetch Feedback").first.click()
        submitted.get_by_text("view feedback").first.wait_for(timeout=TIMEOUT)

    def dialog(self) -> str:
        """The text of the dialog that opened, after closing it."""
        dialog = self.page.locator(".jp-Dialog")
        dialog.wait_for(timeout=TIMEOUT)
        text = dialog.inner_text()
        return text

    def close_dialog(self) -> None:
        self.page.locator(".jp-Dialog .jp-Dialog-button").last.click()
        self.page.locator(".jp-Dialog").wait_for(state="hidden")

    # --- a notebook ------------------------------------------------------------------------------
    def cells(self):
        return self.page.locator(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell")

    def type_into_cell(self, index: int, code: str) -> None:
        """Click into the cell's editor, select what is there and type the answer (inserted as typed text,
        without the editor's auto-indentation doubling the indentation of each line)."""
        editor = self.cells().nth(index).locator(".cm-content")
        editor.click()
        self.page.keyboard.press("Control+A")
        self.page.keyboard.press("Delete")
        self.page.keyboard.insert_text(code)

    def run_all(self) -> None:
        """Run All, until every cell has run. JupyterLab on a loaded machine has twice dropped a Run All, and both
        times it is chosen again (running every cell again changes nothing the tests read), at most three times:
        - it started nothing (every prompt stayed `[ ]`, the kernel idle: two of four runs of the lab session),
          so the run must be seen to start (a cell queued or a new execution count) within 20 s;
        - the cells were queued (`[*]`), then every prompt went back to `[ ]` with nothing run: the page cancelled
          its requests, the server's kernel had had none since it connected (a fresh-clone run beside another)."""
        for attempt in range(3):
            before = self.page.evaluate(f"() => ({PROMPTS}).map(p => p.textContent).join()")
            self.choose("Run", "Run All Cells")
            try:
                self.page.wait_for_function(
                    f"before => {{ const now = ({PROMPTS}).map(p => p.textContent); "
                    "return now.some(t => t.includes('*')) || now.join() != before; }", arg=before, timeout=20_000)
            except PlaywrightTimeoutError:
                continue
            # Done when no cell shows [*] and some show an execution count; dropped when every prompt is blank.
            try:
                done = self.page.wait_for_function(
                    f"""() => {{ const prompts = ({PROMPTS}).map(p => p.textContent);
                                if (!prompts.length || prompts.some(t => t.includes('*'))) return null;
                                return prompts.some(t => /\\[\\d+\\]/.test(t)) ? 'done' : 'dropped'; }}""",
                    timeout=TIMEOUT).json_value()
            except PlaywrightTimeoutError:
                break
            if done == "done":
                return
        prompts = self.page.evaluate(f"() => ({PROMPTS}).map(p => p.textContent).join(' ')")
        raise AssertionError(f"Run All did not run every cell ({attempt + 1} tries): the prompts read {prompts}; "
                             f"the server's kernels: {self.server.kernels()}; the page's last warnings: "
                             f"{self.console[-5:]}")

    def validate(self) -> str:
        self.page.locator(".jp-NotebookPanel:visible .validate-button").click()
        return self.dialog()


@pytest.fixture(scope="module")
def people(chromium, servers):
    labs = {name: Lab(chromium, server) for name, server in servers.items()}    # the three load side by side
    for lab in labs.values():
        lab.ready()
    yield labs
    for lab in labs.values():
        lab.context.close()


@pytest.fixture(scope="module")
def formgrader(people):
    """The instructor's formgrader, opened from the Nbgrader menu, in a tab of its own."""
    instructor = people["instructor"]
    page = instructor.context.new_page()
    page.goto(instructor.server.lab("formgrader"))
    page.locator(f"tr:has-text('{ASSIGNMENT}') .release a").wait_for(timeout=TIMEOUT)
    return page


def test_each_role_sees_only_its_tools_and_no_first_run_prompt(people, servers):
    ada, instructor = people["ada"], people["instructor"]
    assert ada.menu("Nbgrader") == ["Assignment List"]
    shot(ada.page, "student-nbgrader-menu")
    ada.close_menu()
    assert not any("Create Assignment" in tab for tab in ada.sidebar_tabs())

    assert set(instructor.menu("Nbgrader")) >= {"Assignment List", "Formgrader", "Create assignment"}
    shot(instructor.page, "instructor-nbgrader-menu")
    instructor.close_menu()
    assert any("Create Assignment" in tab for tab in instructor.sidebar_tabs())

    # The student's server has no formgrader at all, not merely a hidden menu item.
    response = ada.page.request.get(servers["ada"].lab("formgrader"))
    assert response.status == 404
    for person in (ada, instructor):
        # JupyterLab's "Would you like to get notified about official Jupyter news?" toast never appears.
        assert person.page.locator(".jp-Notification-Toast, .Toastify__toast").count() == 0
        assert person.page.get_by_text("Jupyter news").count() == 0


def test_instructor_opens_the_formgrader_and_releases_assignment_1(people, formgrader):
    instructor = people["instructor"]
    instructor.choose("Nbgrader", "Formgrader")
    instructor.page.locator(".jp-MainAreaWidget iframe").first.wait_for()
    shot(instructor.page, "instructor-formgrader-in-lab")

    row = formgrader.locator("tr", has=formgrader.locator(f"a:text-is('{ASSIGNMENT}')"))
    row.locator(".release a").click()
    formgrader.locator(".modal-dialog", has_text="Successfully released").wait_for(timeout=TIMEOUT)
    shot(formgrader, "instructor-released")
    formgrader.locator(".modal-footer button").last.click()


def test_students_fetch_assignment_1_from_the_assignments_tab(people):
    for name in ("ada", "bob"):
        student = people[name]
        student.assignments()
        released = student.page.locator("#released_assignments_list")
        released.get_by_text(ASSIGNMENT).wait_for(timeout=TIMEOUT)
        shot(student.page, f"{name}-assignments-tab")
        released.get_by_role("button", name="Fetch").click()
        fetched = student.page.locator("#fetched_assignments_list")
        fetched.get_by_text(ASSIGNMENT).wait_for(timeout=TIMEOUT)
        assert (student.server.work / ASSIGNMENT / NOTEBOOK).exists()
        shot(student.page, f"{name}-fetched")


def open_notebook(student: Lab) -> None:
    fetched = student.page.locator("#fetched_assignments_list")
    if not fetched.get_by_text(NOTEBOOK.removesuffix(".ipynb"), exact=True).is_visible():
        fetched.locator("a", has_text=ASSIGNMENT).first.click()         # expands the assignment's notebooks
    fetched.get_by_text(NOTEBOOK.removesuffix(".ipynb"), exact=True).first.click()
    student.cells().first.wait_for(timeout=TIMEOUT)
    # The kernel started and idle (the toolbar's execution indicator), before anything runs: a Run All sent
    # while the kernel was still starting once ran nothing on a busy machine, the server answering the
    # page's poll of its kernels with an error in that window (jupyter_server's kernel list races a start).
    student.page.locator(".jp-NotebookPanel:visible .jp-Notebook-ExecutionIndicator[data-status='idle']"
                         ).first.wait_for(timeout=TIMEOUT)


def submit(student: Lab) -> None:
    student.assignments()
    row = student.page.locator("#fetched_assignments_list .list_item", has_text=ASSIGNMENT).first
    before = student.page.locator("#submitted_assignments_list").inner_text()
    row.get_by_role("button", name="Submit").click()
    student.page.wait_for_function(
        "before => document.querySelector('#submitted_assignments_list').innerText != before", arg=before,
        timeout=TIMEOUT)


TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


def test_ada_hands_in_the_untouched_release_first(people):
    ada = people["ada"]
    submit(ada)
    assert len(TIMESTAMP.findall(ada.page.locator("#submitted_assignments_list").inner_text())) == 1
    shot(ada.page, "ada-first-submission")


def test_a_correct_answer_typed_into_the_notebook_validates(people):
    ada = people["ada"]
    open_notebook(ada)
    ada.type_into_cell(3, CORRECT)
    ada.type_into_cell(BACKWARD_CELL, CORRECT_BACKWARD)
    shot(ada.page, "ada-typed-answer")
    ada.run_all()
    shot(ada.page, "ada-ran-all")
    message = ada.validate()
    shot(ada.page, "ada-validate-success")
    ada.close_dialog()
    assert "Success" in message and "passes all the tests" in message, message


def sandbox_probe(course) -> str:
    """A line bob adds to his answer: whether his code can read the master notebook, with its solutions and
    hidden tests (his own kernel can, in this scratch course; a grading kernel in the sandbox must not)."""
    master = course / "solutions" / ASSIGNMENT / NOTEBOOK
    return f"import os\nprint('master visible:', os.path.exists({str(master)!r}))\n"


def test_a_buggy_answer_fails_validate_naming_the_misconception(people, servers):
    bob = people["bob"]
    open_notebook(bob)
    bob.type_into_cell(3, sandbox_probe(servers["instructor"].work) + SAMPLE_VARIANCE)
    bob.run_all()
    assert bob.cells().nth(3).get_by_text("master visible: True").count() == 1
    shot(bob.page, "bob-ran-all")
    message = bob.validate()
    shot(bob.page, "bob-validate-failed")
    bob.close_dialog()
    # nbgrader shows the first failing test cell, its source and its error, whose message names the bug.
    assert "Validation failed" in message or "failed" in message.lower(), message
    assert MISCONCEPTION in message, message


def test_bob_adds_a_hostile_markdown_cell_to_his_notebook(people):
    """Written into the file he hands in (an editor outside JupyterLab can write anything there)."""
    path = people["bob"].server.work / ASSIGNMENT / NOTEBOOK
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.insert(1, nbformat.v4.new_markdown_cell(HOSTILE_MARKDOWN))
    nbformat.write(notebook, path)


def assert_inert(page, person: Lab, where: str) -> None:
    """bob's hostile cell is on `page` as text and did nothing there."""
    page.wait_for_timeout(500)                 # what an onerror or a refresh would do, it has done by now
    assert person.pwned == [], f"{where}: the hostile cell made requests: {person.pwned}"
    assert [frame.url for frame in page.frames if "pwned" in frame.url] == [], where
    page.get_by_text(HOSTILE_TEXT).first.wait_for(timeout=TIMEOUT)
    active = page.locator(ACTIVE)
    assert active.count() == 0, f"{where}: {[active.nth(i).evaluate('e => e.outerHTML') for i in range(active.count())]}"
    assert page.evaluate(NAMED) == [], where
    assert "PWNED" not in page.evaluate("[window.name, document.title]"), where
    assert person.pwned == [], f"{where}: the hostile cell made requests: {person.pwned}"


def test_both_submit_and_a_second_submission_keeps_both_timestamps(people):
    for name in ("ada", "bob"):
        submit(people[name])
    ada_list = people["ada"].page.locator("#submitted_assignments_list").inner_text()
    shot(people["ada"].page, "ada-second-submission")
    assert len(set(TIMESTAMP.findall(ada_list))) == 2, ada_list
    bob_list = people["bob"].page.locator("#submitted_assignments_list").inner_text()
    assert len(set(TIMESTAMP.findall(bob_list))) == 1, bob_list        # not ada's


def modal(page, text: str) -> str:
    dialog = page.locator(".modal-dialog:visible")
    dialog.wait_for(timeout=TIMEOUT)
    content = dialog.inner_text()
    assert text in content, content
    dialog.locator(".modal-footer button").last.click()
    dialog.wait_for(state="hidden")
    return content


def test_instructor_collects_and_autogrades_from_the_formgrader(people, formgrader):
    row = formgrader.locator("tr", has=formgrader.locator(f"a:text-is('{ASSIGNMENT}')"))
    row.locator(".collect a").click()
    modal(formgrader, "Successfully collected")
    formgrader.goto(people["instructor"].server.lab(f"formgrader/manage_submissions/{ASSIGNMENT}"))
    for student in ("ada", "bob"):
        submission = formgrader.locator("tr", has=formgrader.locator(f"td.student-id:text-is('{student}')"))
        submission.locator(".autograde a").click()
        modal(formgrader, f"Successfully autograded '{ASSIGNMENT}' for student '{student}'")
    formgrader.reload()
    formgrader.locator("td.score", has_text="/").first.wait_for()
    shot(formgrader, "instructor-autograded")
    scores = {student: formgrader.locator("tr", has=formgrader.locator(f"td.student-id:text-is('{student}')"))
              .locator("td.score").inner_text().strip() for student in ("ada", "bob")}
    # ada's later submission (the correct answers) was graded, not her untouched first one; bob's bug
    # loses the worked example and the population variance, and his backward pass is the release's stub.
    assert scores == {"ada": ADA_SCORE, "bob": BOB_SCORE}, scores


def test_instructor_reads_the_autograded_notebook_with_hidden_tests_and_scores(people, formgrader):
    formgrader.goto(people["instructor"].server.lab(f"formgrader/gradebook/{ASSIGNMENT}/layernorm"))
    formgrader.get_by_text("Submission #").first.wait_for()
    rows = formgrader.locator("tr", has=formgrader.get_by_text("Submission #"))
    for index in range(rows.count()):
        if BOB_SCORE in rows.nth(index).inner_text():
            rows.nth(index).get_by_text("Submission #").click()
            break
    formgrader.locator(".nbgrader_cell").first.wait_for(timeout=TIMEOUT)
    # bob's hostile markdown cell is shown as text in the instructor's formgrader, and did nothing: no script,
    # no request (the contents API included: nothing was written into the course), no refresh, no remote image.
    assert_inert(formgrader, people["instructor"], "the formgrader")
    assert not list(people["instructor"].server.work.rglob("pwned*"))
    text = formgrader.locator("body").inner_text()
    formgrader.get_by_text(HIDDEN_MARKER).first.scroll_into_view_if_needed()
    shot(formgrader, "instructor-autograded-notebook")
    assert HIDDEN_MARKER in text                       # the instructor sees the hidden tests
    assert MISCONCEPTION in text
    # Graded from the formgrader with the course's configuration: the kernel ran in the sandbox.
    assert "master visible: False" in text


def test_instructor_generates_and_releases_feedback(people, formgrader):
    formgrader.goto(people["instructor"].server.lab("formgrader/manage_assignments"))
    row = formgrader.locator("tr", has=formgrader.locator(f"a:text-is('{ASSIGNMENT}')"))
    row.locator(".generate-feedback a").click()
    modal(formgrader, "Successfully generated feedback")
    row.locator(".release-feedback a").click()
    modal(formgrader, "Successfully released feedback")
    shot(formgrader, "instructor-released-feedback")
    course = people["instructor"].server.work / "autograder"
    assert all(list((course / "feedback" / name / ASSIGNMENT).glob("*.html")) for name in ("ada", "bob"))
    released = list((course / "exchange" / COURSE.course_id / "feedback").glob("*.html"))
    assert len(released) == 2, released                   # one page a student, named by its hand-in's secret


def test_instructor_opens_bobs_feedback_and_his_hostile_markdown_does_nothing(people):
    """The feedback page as the instructor opens it from the course's files, on the server's own origin."""
    instructor = people["instructor"]
    pages = list((instructor.server.work / "autograder" / "feedback" / "bob" / ASSIGNMENT).glob("*.html"))
    assert len(pages) == 1, pages
    page = instructor.context.new_page()
    try:
        page.goto(instructor.server.lab(f"files/{pages[0].relative_to(instructor.server.work).as_posix()}"))
        assert_inert(page, instructor, "bob's feedback page, opened by the instructor")
        shot(page, "instructor-bob-feedback")
    finally:
        page.close()
    assert not list(instructor.server.work.rglob("pwned*"))


@pytest.mark.parametrize("name, score", [("ada", f"{POINTS:g}"), ("bob", f"{BOB:g}")])
def test_each_student_fetches_only_their_own_feedback(people, name, score):
    student = people[name]
    student.fetch_feedback()
    shot(student.page, f"{name}-fetched-feedback")
    pages = list((student.server.work / ASSIGNMENT / "feedback").glob("*/layernorm.html"))
    assert len(pages) == 1, pages
    html = pages[0].read_text()
    assert HIDDEN_MARKER not in html and HIDDEN_SOURCE not in html
    # The page as the student opens it in JupyterLab.
    relative = pages[0].relative_to(student.server.work).as_posix()
    student.page.goto(student.server.lab(f"lab/tree/{relative}"))
    frame = student.page.frame_locator(".jp-HTMLViewer iframe")
    body = frame.locator("body")
    # The viewer shows an empty body while it loads the page (a few hundred KB): wait for the score line.
    frame.get_by_text("Score:").first.wait_for(timeout=TIMEOUT)
    text = body.inner_text()
    shot(student.page, f"{name}-feedback-page")
    assert (f"Score: {score}" in text or f"{score} / {POINTS:g}" in text
            or f"{score}.0 / {POINTS:.1f}" in text), text[:500]
    if name == "bob":
        # His hostile cell is on his feedback page, inert. (His own JupyterLab, which reopens his notebook as
        # it loads, shows his own remote image to him: the requests from its main frame are his own doing.)
        assert MISCONCEPTION in text and HOSTILE_TEXT in text
        assert frame.locator(ACTIVE).count() == 0
        assert [request for request in student.pwned if request.endswith(IN_A_FRAME)] == [], student.pwned
    assert HIDDEN_MARKER not in text


# --- damaged notebooks and endless loops --------------------------------------------------------

def focus_notebook(student: Lab) -> None:
    tab = student.page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=NOTEBOOK)
    if tab.count():
        tab.first.click()
        student.cells().first.wait_for(timeout=TIMEOUT)
    else:
        student.assignments()
        open_notebook(student)


def test_validate_ends_an_infinite_loop_within_the_timeout_with_a_message(people):
    ada = people["ada"]
    focus_notebook(ada)
    ada.type_into_cell(3, "def layernorm(x, gamma, beta, eps=1e-5):\n    while True:\n        pass")
    started = time.monotonic()
    message = ada.validate()
    elapsed = time.monotonic() - started
    shot(ada.page, "ada-validate-infinite-loop")
    ada.close_dialog()
    message = " ".join(message.split())            # the dialog breaks the message into lines
    assert "Validate stopped" in message and f"more than {VALIDATE_TIMEOUT} s" in message, message
    assert "Traceback" not in message
    # The first timed-out cell ends it, not one timeout per test cell after it (several of them). Validate's
    # own work besides the timeout takes a few seconds, twice that at a load of 4: well inside 3 timeouts.
    assert elapsed < 3 * VALIDATE_TIMEOUT


def test_a_deleted_answer_cell_gets_a_clear_message_in_validate_and_at_submission(people):
    bob = people["bob"]
    focus_notebook(bob)
    # JupyterLab will not delete the answer cell (the release marks it undeletable) ...
    bob.cells().nth(3).locator(".jp-InputPrompt").click()
    bob.menu("Edit")
    delete = bob.page.locator(".lm-Menu .lm-Menu-item", has_text=re.compile(r"^Delete Cells?"))
    assert "lm-mod-disabled" in (delete.first.get_attribute("class") or "")
    shot(bob.page, "bob-cannot-delete-the-answer-cell")
    bob.close_menu()
    # ... but an editor outside it can: the file loses its answer cell.
    path = bob.server.work / ASSIGNMENT / NOTEBOOK
    notebook = nbformat.read(path, as_version=4)
    notebook.cells = [cell for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("grade_id") != "layernorm"]
    nbformat.write(notebook, path)
    message = validate_from_assignments_tab(bob)
    assert "lost its answer cell 'layernorm'" in message and "Traceback" not in message, message
    message = submit_refused(bob)
    assert "Nothing was submitted" in message and "lost its answer cell" in message, message


def validate_from_assignments_tab(student: Lab) -> str:
    """The Validate button of the notebook's row in the Assignments tab (it validates the file on disk)."""
    student.assignments()
    student.refresh_assignments()
    fetched = student.page.locator("#fetched_assignments_list")
    if not fetched.get_by_role("button", name="Validate").first.is_visible():
        fetched.locator("a", has_text=ASSIGNMENT).first.click()
    fetched.get_by_role("button", name="Validate").first.click()
    message = " ".join(student.dialog().split())
    shot(student.page, f"{student.server.name}-validate-damaged-notebook")
    student.close_dialog()
    return message


def submit_refused(student: Lab) -> str:
    student.assignments()
    before = student.page.locator("#submitted_assignments_list").inner_text()
    row = student.page.locator("#fetched_assignments_list .list_item", has_text=ASSIGNMENT).first
    row.get_by_role("button", name="Submit").click()
    message = " ".join(student.dialog().split())
    shot(student.page, f"{student.server.name}-submit-refused")
    student.close_dialog()
    assert "Traceback" not in message
    assert student.page.locator("#submitted_assignments_list").inner_text() == before      # nothing new handed in
    return message


def test_a_notebook_that_is_not_json_gets_a_clear_message_in_validate_and_at_submission(people):
    ada = people["ada"]
    path = ada.server.work / ASSIGNMENT / NOTEBOOK
    path.write_text(path.read_text()[:500])         # cut short, as a failed copy or an editor outside Jupyter leaves it
    message = validate_from_assignments_tab(ada)
    assert "is no longer a valid notebook" in message and "Traceback" not in message, message
    message = submit_refused(ada)
    assert "Nothing was submitted" in message and "no longer a valid notebook" in message, message
