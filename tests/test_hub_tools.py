"""tools/hub.py and deploy/hub/ without a hub running (issue 56): what an admin and each person meet, checked on the
pieces `prepare` writes. tests/lab/test_hub.py runs the whole hub with real accounts and a browser.

- a roster as an LMS exports it becomes the class, a login no account can have is refused before anything changes;
- an open home is closed (its first mode kept for teardown), a home that is not the account's is refused;
- every login shell gets the course's Python and nbgrader first on PATH, and the grader account its control group;
- the users' Python gets the checkout's commands, started by itself;
- the closed folders of the checkout keep the mode a first prepare saw, whichever root a second one names;
- the formgrader service refuses terminals, kernels, sessions and writes, sends JupyterLab's pages to the
  formgrader, and its manual-grading page loads the course's own MathJax, never a CDN;
- the hub's configuration gives the service that role, that module and that MathJax.
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tools import hub
from tools.course import REPO

pytestmark = pytest.mark.quick

sys.path.insert(0, str(REPO / "deploy" / "hub"))
import formgrader_service  # noqa: E402  (deploy/hub/, on the service's PYTHONPATH)


def test_a_roster_as_an_lms_exports_it_is_the_class(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("\ufeffLogin,First Name,Last Name,Email\nada,Ada,Lovelace,ada@example.edu\n"
                      "bob,Bob,,\n\nada,Ada,Lovelace,ada@example.edu\n", encoding="utf-8")
    assert hub.read_roster(roster) == [hub.Person("ada", "Ada", "Lovelace", "ada@example.edu"),
                                       hub.Person("bob", "Bob")]
    roster.write_text("Student,SIS Login ID,Section\nCy Young,cy,A\n")
    assert hub.read_roster(roster) == [hub.Person("cy")]


@pytest.mark.parametrize("text, words", [
    ("Name,Section\nAda,A\n", "no login column"),
    ("login,first name\nada,Ada\nAda Lovelace,Ada\n../etc,x\n", "line 3: 'Ada Lovelace'; line 4: '../etc'"),
])
def test_a_roster_without_logins_is_refused_naming_what(tmp_path, text, words):
    roster = tmp_path / "roster.csv"
    roster.write_text(text)
    with pytest.raises(SystemExit, match=words.replace(".", r"\.")):
        hub.read_roster(roster)


def passwd_for(name: str, uid: int, home: Path) -> pwd.struct_passwd:
    return pwd.struct_passwd((name, "x", uid, os.getgid(), "", str(home), "/bin/bash"))


def test_an_open_home_is_closed_and_its_mode_kept_for_teardown(tmp_path):
    home = tmp_path / "ada"
    home.mkdir()
    home.chmod(0o755)
    record = hub.root_record({"roots": {}}, tmp_path)
    hub.close_home(passwd_for("ada", os.getuid(), home), record)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700 and record["home_modes"] == {str(home): 0o755}
    hub.close_home(passwd_for("ada", os.getuid(), home), record)          # closed already: the first mode stays
    assert record["home_modes"] == {str(home): 0o755}


def test_a_missing_home_is_made_closed(tmp_path):
    home = tmp_path / "ldap-user"
    hub.close_home(passwd_for("ldap-user", os.getuid(), home), hub.root_record({"roots": {}}, tmp_path))
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_a_home_that_is_not_the_accounts_own_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="is not a folder of theirs"):
        hub.close_home(passwd_for("ada", os.getuid() + 1, tmp_path), hub.root_record({"roots": {}}, tmp_path))


def login_shell(script: Path, user_check: str) -> dict[str, str]:
    """What a login shell that reads the profile script has, for an account named `user_check` (`id -un`)."""
    fake = script.parent / "fakebin"
    fake.mkdir(exist_ok=True)
    (fake / "id").write_text(f"#!/bin/sh\necho {user_check}\n")
    (fake / "id").chmod(0o755)
    shown = subprocess.run(["sh", "-c", f'PATH="{fake}:/usr/bin:/bin"; . "{script}"; echo "$PATH"; '
                            'echo "${COURSE_GRADING_CGROUP_PARENT-unset}"; echo "${JUPYTER_CONFIG_PATH-unset}"'],
                           capture_output=True, text=True, check=True, env={}).stdout.splitlines()
    return {"PATH": shown[0], "cgroup": shown[1], "config": shown[2]}


def test_every_login_shell_gets_the_courses_python_and_the_grader_its_group(tmp_path):
    script = tmp_path / "gpt2-block.sh"
    roles = Path("/srv/gpt2-block/roles/student/config")
    script.write_text(hub.profile_script(Path("/srv/gpt2-block/python/bin"), "grader-gpt2-block", "/grader-gpt2-block",
                                         roles))
    student = login_shell(script, "ada")
    assert student["PATH"].startswith("/srv/gpt2-block/python/bin:") and student["cgroup"] == "unset"
    assert student["config"] == str(roles)                   # an ssh shell's nbgrader finds the course and exchange
    grader = login_shell(script, "grader-gpt2-block")
    assert grader["cgroup"] == "/grader-gpt2-block" and grader["config"] == "unset"
    twice = subprocess.run(["sh", "-c", f'. "{script}"; . "{script}"; echo "$PATH"'], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin"}).stdout
    assert twice.count("/srv/gpt2-block/python/bin") == 1


def test_the_users_python_gets_the_checkouts_commands_started_by_itself(tmp_path):
    source, target = tmp_path / "venv-bin", tmp_path / "users-bin"
    source.mkdir()
    target.mkdir()
    (source / "nbgrader").write_text("#!/root/.venv/bin/python\nfrom nbgrader.apps.nbgraderapp import main\nmain()\n")
    written = hub.write_commands(target, source)
    assert written == [target / "nbgrader"]
    assert (target / "nbgrader").read_text().splitlines()[:2] == [f"#!{target / 'python'}",
                                                                  "from nbgrader.apps.nbgraderapp import main"]
    assert os.access(target / "nbgrader", os.X_OK)


def test_a_second_prepare_keeps_the_modes_the_first_saw(tmp_path, monkeypatch):
    """Issue 56, item 9: prepare run twice with different roots saved the closed modes as the originals."""
    if os.geteuid() != 0:
        pytest.skip("closing folders to a group needs root")
    checkout = tmp_path / "checkout"
    (checkout / "solutions").mkdir(parents=True)
    (checkout / "solutions").chmod(0o755)
    monkeypatch.setattr(hub, "REPO", checkout)
    monkeypatch.setattr(hub, "STATE", tmp_path / "state" / "state.json")
    grader = passwd_for("grader", 0, tmp_path)
    for root in ("/srv/one", "/srv/two"):
        state = hub.load_state()
        hub.root_record(state, Path(root))
        hub.close_checkout(grader, state)
        hub.save_state(state)
        assert stat.S_IMODE((checkout / "solutions").stat().st_mode) == 0o750
    hub.reopen_checkout(Path("/srv/one"))                           # another root is still prepared: stays closed
    assert stat.S_IMODE((checkout / "solutions").stat().st_mode) == 0o750
    hub.reopen_checkout(Path("/srv/two"))
    assert stat.S_IMODE((checkout / "solutions").stat().st_mode) == 0o755 and not hub.STATE.exists()


class Handler:
    pass


@pytest.mark.parametrize("resource, action, allowed", [
    ("terminals", "write", False), ("terminals", "read", False), ("kernels", "write", False),
    ("kernels", "execute", False), ("kernels", "read", False), ("sessions", "write", False),
    ("contents", "write", False), ("contents", "read", True), ("nbconvert", "read", True), ("api", "read", True),
])
def test_an_assistant_gets_the_formgrader_and_no_shell_kernel_or_write_as_the_grader(resource, action, allowed):
    authorizer = formgrader_service.FormgraderOnly()
    assert authorizer.is_authorized(Handler(), "assistant", action, resource) is allowed


def test_the_formgrader_service_is_the_formgrader_alone():
    config = hub.formgrader_server_config()["ServerApp"]
    assert config["authorizer_class"] == "formgrader_service.FormgraderOnly" and not config["terminals_enabled"]
    extensions = config["jpserver_extensions"]
    assert extensions["nbgrader.server_extensions.formgrader"] and extensions["formgrader_service"]
    assert not any(extensions[name] for name in ("jupyterlab", "notebook", "jupyter_server_terminals",
                                                 "nbgrader.server_extensions.validate_assignment"))
    assert config["default_url"] == "/formgrader"
    assert (Path(config["extra_static_paths"][0]) / "mathjax" / "es5" / "tex-chtml-full.js").exists(), \
        "node_modules/mathjax (npm ci) is what the formgrader serves"
    import re

    for page in ("/lab", "/lab/tree/x.ipynb", "/tree", "/notebooks/a.ipynb"):
        assert re.fullmatch(formgrader_service.TO_FORMGRADER, page)
    assert not re.fullmatch(formgrader_service.TO_FORMGRADER, "/formgrader")


def test_the_manual_grading_page_loads_the_courses_mathjax_not_a_cdn(monkeypatch):
    """Issue 56, item 7: nbconvert's macro loads MathJax from cdnjs, which a campus server behind a firewall
    cannot reach; the service's JUPYTER_PATH puts the course's macro first."""
    import nbformat
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config

    monkeypatch.setenv("JUPYTER_PATH", str(REPO / "deploy" / "hub" / "share" / "jupyter"))
    config = Config()
    config.HTMLExporter.template_name = "formgrade"                       # as nbgrader's formgrader sets it
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("$\\sigma^2$")])
    resources = {"base_url": "/services/gpt2-block", "assignment_id": "01-layernorm", "notebook_id": "layernorm",
                 "submission_id": "1", "index": 0, "total": 1, "student": "ada", "last_name": "", "first_name": "",
                 "notebook_path": "autograded/ada/01-layernorm/layernorm.ipynb"}
    page, _ = HTMLExporter(config=config).from_notebook_node(notebook, resources=resources)
    assert "cdnjs" not in page and "https://" not in page.split("<body")[0]
    assert "/static/mathjax/es5/tex-chtml-full.js" in page and "MathJax.Hub" in page


def test_the_hubs_configuration_gives_the_service_that_role(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_HUB_ROOT", str(tmp_path))
    monkeypatch.setenv("COURSE_HUB_COURSE", str(REPO))
    monkeypatch.setenv("COURSE_GRADING_CGROUP_PARENT", "/grader-gpt2-block")
    from traitlets.config import Config

    config = Config()
    namespace = {"get_config": lambda: config, "__file__": str(hub.CONFIG)}
    exec(compile(hub.CONFIG.read_text(), str(hub.CONFIG), "exec"), namespace)
    service, = config.JupyterHub.services
    environment = service["environment"]
    assert environment["JUPYTER_CONFIG_PATH"] == str(tmp_path / "roles" / "formgrader" / "config")
    assert environment["PYTHONPATH"] == str(REPO / "deploy" / "hub")
    assert environment["JUPYTER_PATH"] == str(REPO / "deploy" / "hub" / "share" / "jupyter")
    assert environment["COURSE_GRADING_CGROUP_PARENT"] == "/grader-gpt2-block"


def test_a_student_is_told_at_submit_what_is_over_the_hand_in_limits(tmp_path):
    """Issue 56, item 8: what collect would leave out, the student's Submit refuses first, saying why."""
    from tools.lab_student import too_much

    folder = tmp_path / "01-layernorm"
    (folder / "feedback").mkdir(parents=True)
    (folder / "layernorm.ipynb").write_text("{}")
    for number in range(30):
        (folder / "feedback" / f"page{number}.html").write_text("x")       # nbgrader's submit ignores feedback/
    assert too_much(folder, ["feedback", ".ipynb_checkpoints"]) is None
    with (folder / "weights.bin").open("wb") as handle:
        handle.truncate(60 * 2**20)                                         # 60 MB, sparse
    said = too_much(folder, ["feedback", ".ipynb_checkpoints"])
    assert said and "1 file of 60.0 MB beside the notebooks" in said and "20 MB" in said


def test_make_hubs_demo_runs_the_pages_whole_class_path():
    """The demo's round (tools.hub.WHOLE_CLASS) is the instructors' page's whole-class block, step for step."""
    import re

    section = (REPO / "book" / "instructors.md").read_text().split("### One class on one server", 1)[1]
    block = next(block for block in re.findall(r"```bash\n(.*?)```", section, re.DOTALL) if "autograder.classgrader" in block)
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]
    steps = [step.format(a=hub.DEMO_ASSIGNMENT, course="/srv/gpt2-block/course") for step in hub.WHOLE_CLASS]
    assert lines[0] == "cd /srv/gpt2-block/course/autograder"
    assert lines[1] == f"nbgrader release_assignment {hub.DEMO_ASSIGNMENT}"
    assert [line[:len(step)] for line, step in zip(lines[2:], steps)] == steps and len(lines) == 2 + len(steps)


def test_nbgrader_submit_in_a_terminal_refuses_what_collect_would_leave_out(tmp_path):
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.abc.exchange import ExchangeError

    from tools.lab_student import BoundedSubmit

    folder = tmp_path / "01-layernorm"
    folder.mkdir()
    (folder / "layernorm.ipynb").write_text("{}")
    for number in range(25):
        (folder / f"data{number}.txt").write_text("x")
    submit = BoundedSubmit(coursedir=CourseDirectory(root=str(tmp_path)), authenticator=Authenticator())
    submit.src_path = str(folder)
    with pytest.raises(ExchangeError, match="Nothing was submitted. The folder holds 25 files"):
        submit.copy_files()
    roles = tmp_path / "roles"
    hub.write_roles(tmp_path, tmp_path / "exchange")
    assert 'c.ExchangeFactory.submit = "tools.lab_student.BoundedSubmit"' in (
        roles / "student" / "config" / "nbgrader_config.py").read_text()
