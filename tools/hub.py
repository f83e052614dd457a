"""A machine ready for deploy/hub/jupyterhub_config.py: accounts, the course, the exchange, the Python, and the hub.

Run from the checkout's root, as root, with the checkout's own Python (under sudo Debian has no `python`):

    sudo .venv/bin/python -m tools.hub demo                 # `make hub`: a local demo with demo accounts, then the hub
    sudo .venv/bin/python -m tools.hub prepare --roster roster.csv --instructors ana,tom
    sudo .venv/bin/python -m tools.hub serve                # the hub, on 127.0.0.1:8000
    sudo .venv/bin/python -m tools.hub teardown             # undo what prepare did (the course folder is kept)

(`--root` names the hub's folder, /srv/gpt2-block by default.) `prepare` does, once, what the instructors' page
lists for an admin, and says each step:

- the students' and instructors' accounts: from `--roster` (a CSV as an LMS exports it: login, first name, last
  name, email), made if missing (password locked: set one with chpasswd, or log in through single sign-on), or
  from `--students`/`--instructors`, which must exist; with `--demo`, made with the password `demo-<login>`
  (loopback only). Every one of their homes is closed (mode 0700): a home made here is made so, an existing
  open one is closed, and the names go into the gradebook;
- the grader account (`grader-<course id>`), which owns the course and runs the formgrader and the grading;
- the course under `<root>/course`, mode 0700 for the grader account, with the assignments generated;
- nbgrader's exchange, mode 1777: everyone may create their own entries and nobody may rename or remove
  another's (nbgrader's permissions inside it keep one student's hand-in from another), and the course's folder
  in it, owned by the grader account;
- this checkout's masters, git history, reference module and grading folders closed to every account but the
  grader's group (the users' Python reads the checkout's packages, so the checkout itself stays readable);
- a Python every account can run (`<root>/python`: Debian's python3.11 with this checkout's packages, and its
  `nbgrader` and `jupyter` commands: the machine's default Python may live in root's home, which no other account
  may enter), first on every login shell's PATH (/etc/profile.d/<course>-hub-<root>.sh, which also names the
  grader account's control group in its environment);
- each role's Jupyter settings (tools/lab.py's, read-only for everyone), the formgrader's included: the
  formgrader and no shell as the grader account (deploy/hub/formgrader_service.py), MathJax served locally;
- on cgroup v1, a control group delegated to the grader account (COURSE_GRADING_CGROUP_PARENT), so that every
  grading limit holds for the whole submission; `serve` makes it again after a restart, and a systemd unit that
  runs `serve` at boot is written (on cgroup v2 the instructors' page gives the unit's delegation);
- `<root>/hub.env` (mode 0600: it lists the class), the settings `serve` hands to the hub.

What prepare made or changed is recorded in STATE (/var/lib/<course>-hub/state.json, the first mode seen of each
folder it closes), so that `teardown` undoes exactly that, whichever roots were prepared.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from autograder.sandbox import cgroups
from tools.course import COURSE, REPO, tool_env

CONFIG = REPO / "deploy" / "hub" / "jupyterhub_config.py"
DEBIAN_PYTHON = Path("/usr/bin/python3.11")
GRADER = f"grader-{COURSE.course_id}"
DEMO_INSTRUCTORS, DEMO_STUDENTS = ["instructor"], ["ada", "bob", "cy"]
STATE = Path("/var/lib") / f"{COURSE.course_id}-hub" / "state.json"
PROFILE_DIR = Path("/etc/profile.d")
UNIT_DIR = Path("/etc/systemd/system")
# The checkout's commands every account may run, each a script that starts the users' Python.
COMMANDS = ("nbgrader", "jupyter", "alembic")
# A login useradd and nbgrader both take (and that is safe in a shell line and a file name).
LOGIN = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")


def say(text: str) -> None:
    print(f"hub: {text}", flush=True)


# --- what prepare did, for teardown ---------------------------------------------------------------------------

def load_state() -> dict:
    return json.loads(STATE.read_text()) if STATE.exists() else {"checkout_modes": {}, "roots": {}}


def save_state(state: dict) -> None:
    STATE.parent.mkdir(parents=True, exist_ok=True)
    STATE.parent.chmod(0o700)
    STATE.write_text(json.dumps(state, indent=1))
    STATE.chmod(0o600)


def root_record(state: dict, root: Path) -> dict:
    record = state["roots"].setdefault(str(root), {})
    for key, empty in (("accounts_made", []), ("home_modes", {}), ("files", []), ("cgroups", []),
                       ("made_root", False), ("exchange", "")):
        record.setdefault(key, empty)
    return record


def slug(root: Path) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", str(root)).strip("-") or "root"


def profile_file(root: Path) -> Path:
    return PROFILE_DIR / f"{COURSE.course_id}-hub-{slug(root)}.sh"


def unit_name(root: Path) -> str:
    return f"{COURSE.course_id}-hub-{slug(root)}.service"


# --- accounts --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Person:
    login: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""


# The column names LMS exports use for each field (compared lower-cased, without spaces, dashes and underscores).
ROSTER_COLUMNS = {"login": {"login", "username", "user", "userid", "loginid", "sisloginid", "studentid", "netid",
                            "uid"},
                  "first_name": {"firstname", "givenname", "first", "forename"},
                  "last_name": {"lastname", "familyname", "surname", "last"},
                  "email": {"email", "emailaddress", "mail"}}


def read_roster(path: Path) -> list[Person]:
    """The class from a CSV as an LMS exports it (a header row naming login, first name, last name, email; only
    the login is required). Every login is checked before any account is touched."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        raise SystemExit(f"{path}: the roster is empty")
    names = [re.sub(r"[\s_-]", "", name.lower()) for name in rows[0]]
    columns = {field: next((i for i, name in enumerate(names) if name in aliases), None)
               for field, aliases in ROSTER_COLUMNS.items()}
    if columns["login"] is None:
        raise SystemExit(f"{path}: no login column in its header {rows[0]} (one of: login, username, SIS Login ID, "
                         "student_id), then first name, last name, email")
    people, bad, seen = [], [], set()
    for number, row in enumerate(rows[1:], 2):
        if not any(cell.strip() for cell in row):
            continue
        cell = {field: row[i].strip() if i is not None and i < len(row) else "" for field, i in columns.items()}
        if not LOGIN.fullmatch(cell["login"]):
            bad.append(f"line {number}: {cell['login']!r}")
        elif cell["login"] not in seen:
            seen.add(cell["login"])
            people.append(Person(**cell))
    if bad:
        raise SystemExit(f"{path}: not a login (lower-case letters, digits, '_', '.', '-'; at most 32): "
                         + "; ".join(bad))
    return people


def close_home(account: pwd.struct_passwd, record: dict) -> None:
    """The account's home, mode 0700 (its first mode recorded for teardown); refused unless the account owns it."""
    home = Path(account.pw_dir)
    if not home.exists() and home.is_absolute() and home.parent.is_dir():
        home.mkdir(mode=0o700)                 # an account of the directory service's, never logged in here yet
        os.chown(home, account.pw_uid, account.pw_gid)
        say(f"made the home of {account.pw_name} ({home}, mode 0700)")
    info = home.stat()
    if info.st_uid != account.pw_uid or not stat.S_ISDIR(info.st_mode):
        raise SystemExit(f"the home of {account.pw_name} ({home}) is not a folder of theirs: give them one "
                         "(usermod --home ... --move-home) before preparing the hub")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        record["home_modes"].setdefault(str(home), mode)
        home.chmod(mode & 0o700)
        say(f"closed the home of {account.pw_name} ({home}, mode {mode:o} -> {mode & 0o700:o}): "
            "a classmate could read their notebooks")


def ensure_account(name: str, record: dict, *, password: str | None = None, home_root: Path | None = None,
                   create: bool = True) -> pwd.struct_passwd:
    """The account with a closed home, made if it does not exist (its home 0700 from the start)."""
    try:
        account = pwd.getpwnam(name)
    except KeyError:
        if not create:
            raise
        home = ["--home-dir", str(home_root / name)] if home_root else []
        subprocess.run(["useradd", "--create-home", "-K", "HOME_MODE=0700", *home, "--shell", "/bin/bash", name],
                       check=True)
        account = pwd.getpwnam(name)
        Path(account.pw_dir).chmod(0o700)              # a useradd without HOME_MODE applies its umask
        record["accounts_made"].append(name)
        say(f"made the account {name} (home {account.pw_dir}, mode 0700)")
    if password:
        subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True)
    close_home(account, record)
    return account


def ensure_class(people: list[Person], record: dict, *, create: bool, demo: bool,
                 home_root: Path | None) -> None:
    """Every account of the class, checked (or made) before the first is changed."""
    if not create:
        missing = []
        for person in people:
            try:
                pwd.getpwnam(person.login)
            except KeyError:
                missing.append(person.login)
        if missing:
            raise SystemExit(f"no such account: {', '.join(missing)} (make them, or give the class with --roster, "
                             "which makes them)")
    for person in people:
        ensure_account(person.login, record, password=f"demo-{person.login}" if demo else None,
                       home_root=home_root, create=create)


def import_names(course: Path, people: list[Person]) -> None:
    """Each student's name and email in the gradebook, as the formgrader and the export show them."""
    from nbgrader.api import Gradebook

    from autograder.course import Course

    with Gradebook(Course(course).db_url, COURSE.course_id) as gradebook:
        for person in people:
            first, last = person.first_name, person.last_name
            if not (first or last):                        # an account of the machine's: its full name, if any
                full = pwd.getpwnam(person.login).pw_gecos.split(",")[0].split()
                first, last = " ".join(full[:-1]) or person.login, full[-1] if full else ""
            gradebook.update_or_create_student(person.login, first_name=first or None, last_name=last or None,
                                               email=person.email or None)
    say(f"the gradebook knows the class: {len(people)} students with their names")


def chown_tree(root: Path, account: pwd.struct_passwd) -> None:
    for path in [root, *root.rglob("*")]:
        os.lchown(path, account.pw_uid, account.pw_gid)


# --- the users' Python and every shell's PATH ------------------------------------------------------------------

def make_python(target: Path) -> Path:
    """Debian's Python 3.11 in a virtual environment that reads this checkout's packages, Jupyter's extensions and
    settings included (share/ and etc/ link to this environment's), with the checkout's commands (COMMANDS)."""
    if not (target / "bin" / "python").exists():
        subprocess.run([str(DEBIAN_PYTHON), "-m", "venv", "--without-pip", str(target)], check=True)
    packages = sysconfig.get_paths()["purelib"]
    (target / "lib" / "python3.11" / "site-packages" / "course.pth").write_text(
        f"import site; site.addsitedir({packages!r})\n")
    write_commands(target / "bin", Path(sys.prefix) / "bin")
    for shared in ("share/jupyter", "etc/jupyter"):
        link, real = target / shared, Path(sys.prefix) / shared
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink() and real.exists():
            link.symlink_to(real)
    return target / "bin" / "python"


def write_commands(bin_dir: Path, source_bin: Path) -> list[Path]:
    """COMMANDS in bin_dir: the checkout's scripts, started by bin_dir's Python (the checkout's own start a
    Python the other accounts cannot run; nbgrader runs `alembic` from PATH to make a gradebook)."""
    written = []
    for name in COMMANDS:
        source = source_bin / name
        if not source.exists():
            continue
        body = source.read_text().split("\n", 1)[1]
        script = bin_dir / name
        script.write_text(f"#!{bin_dir / 'python'}\n{body}")
        script.chmod(0o755)
        written.append(script)
    return written


def profile_script(python_bin: Path, grader: str, cgroup_parent: str | None, student_config: Path | None = None) -> str:
    """/etc/profile.d's lines: the users' Python first on every login shell's PATH (a JupyterLab terminal is one:
    Debian's /etc/profile resets PATH); outside JupyterLab (ssh), the student role's settings, where nbgrader finds
    the course and the exchange; and for the grader account the control group it grades in (its nbgrader reads the
    course's own configuration)."""
    lines = ["# Written by `python -m tools.hub prepare` (tools/hub.py); `python -m tools.hub teardown` removes it.",
             "# The course's Python and its nbgrader first on every login shell's PATH.",
             f'case ":$PATH:" in *":{python_bin}:"*) ;; *) PATH="{python_bin}:$PATH"; export PATH ;; esac']
    if student_config:
        lines += ["# Where nbgrader finds the course and its exchange, in a shell that JupyterLab did not start.",
                  f'if [ -z "$JUPYTER_CONFIG_PATH" ] && [ "$(id -un)" != "{grader}" ]; then '
                  f'export JUPYTER_CONFIG_PATH={student_config}; fi']
    if cgroup_parent:
        lines += ["# The control group delegated to the grader account, where every grading limit holds.",
                  f'if [ "$(id -un)" = "{grader}" ]; then export COURSE_GRADING_CGROUP_PARENT={cgroup_parent}; fi']
    return "\n".join(lines) + "\n"


def write_system_file(path: Path, text: str, record: dict, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    if str(path) not in record["files"]:
        record["files"].append(str(path))


def unit_text(root: Path) -> str:
    """A systemd unit that starts the hub at boot (`serve` makes the grader's control group again first)."""
    return ("[Unit]\n"
            f"Description=JupyterHub of the course {COURSE.course_id} ({root}; tools/hub.py)\n"
            "After=network.target\n\n"
            "[Service]\n"
            f"WorkingDirectory={REPO}\n"
            f"ExecStart={sys.executable} -m tools.hub serve --root {root}\n"
            "Restart=on-failure\n\n"
            "[Install]\n"
            "WantedBy=multi-user.target\n")


def systemd_running() -> bool:
    return Path("/run/systemd/system").is_dir() and shutil.which("systemctl") is not None


# --- each role's settings ----------------------------------------------------------------------------------------

def write_roles(root: Path, exchange: Path) -> None:
    """Each role's Jupyter settings: a student's server (Assignments tab, Validate), an instructor's own (the
    Assignments tab and the course list, not the formgrader: that is the course's service), the formgrader's (the
    formgrader alone: deploy/hub/formgrader_service.py)."""
    from tools.lab import write_json, write_role

    for role, lab_role in (("student", "student"), ("instructor", "instructor"), ("instructor-own", "instructor"),
                           ("formgrader", "instructor")):
        folder = root / "roles" / role
        write_role(lab_role, folder / "config", folder / "settings", exchange=exchange)
        if role == "instructor-own":
            page = folder / "config" / "labconfig" / "page_config.json"
            write_json(page, {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True,
                                                     "@jupyter/nbgrader:formgrader": True,
                                                     "@jupyter/nbgrader:create-assignment": True}})
            write_json(folder / "config" / "jupyter_server_config.json", {"ServerApp": {"jpserver_extensions": {
                "nbgrader.server_extensions.formgrader": False}}})
        if role == "formgrader":
            write_json(folder / "config" / "jupyter_server_config.json", formgrader_server_config())
        if role == "student":
            # `nbgrader submit` in a terminal refuses what collect would leave out, and says so, as Submit does.
            with (folder / "config" / "nbgrader_config.py").open("a") as config:
                config.write('c.ExchangeFactory.submit = "tools.lab_student.BoundedSubmit"\n')
        if lab_role == "instructor":
            # The course's nbgrader settings, where every nbgrader command of the role looks for them.
            (folder / "config" / "nbgrader_config.py").write_text(
                "c = get_config()  # noqa: F821\n"
                f"c.CourseDirectory.course_id = {COURSE.course_id!r}\n"
                f"c.Exchange.root = {str(exchange)!r}\n")
    for path in [root / "roles", *(root / "roles").rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def formgrader_server_config() -> dict:
    """The formgrader service's server: the formgrader and the redirect to it, no JupyterLab, no terminal, no
    kernel or file written as the grader account, and the course's own MathJax under its static/ path."""
    return {"ServerApp": {
        "jpserver_extensions": {"jupyterlab": False, "notebook": False, "jupyter_server_terminals": False,
                                "jupyter_lsp": False, "jupyterlab_jupytext": False,
                                "nbgrader.server_extensions.formgrader": True,
                                "nbgrader.server_extensions.validate_assignment": False,
                                "nbgrader.server_extensions.assignment_list": False,
                                "nbgrader.server_extensions.course_list": False,
                                "formgrader_service": True},
        "authorizer_class": "formgrader_service.FormgraderOnly",
        "terminals_enabled": False,
        "default_url": "/formgrader",
        "extra_static_paths": [str(REPO / "node_modules")]}}


# --- the checkout, the exchange, the control group --------------------------------------------------------------

# What of this checkout no student may read: the masters (with each assignment's catalog of correct answers and
# bugs beside them) and their history, the reference module (its functions are the answers), the mutation report
# (every bug), the tests and built pages (which hold answers too), this checkout's own gradebook and hand-ins. The
# grader account keeps reading them through its group (its sandbox mounts a stub over the reference module, which needs the path).
CLOSED = ["solutions", ".git", "gptcourse", "autograder/mutation-report.md", "tests", "_build",
          "autograder/gradebook", "autograder/submitted", "autograder/autograded", "autograder/feedback",
          "autograder/exchange"]


def close_checkout(grader: pwd.struct_passwd, state: dict) -> None:
    """Close CLOSED to every account but root and the grader's group; each one's mode and group the first time
    any prepare saw it go to STATE (a second prepare, with another root, finds them closed already)."""
    for name in CLOSED:
        folder = REPO / name                 # a folder, or a file (the mutation report names every bug's check)
        if folder.exists() and not folder.is_symlink():
            info = folder.stat()
            state["checkout_modes"].setdefault(str(folder), (stat.S_IMODE(info.st_mode), info.st_gid))
            os.chown(folder, -1, grader.pw_gid)
            folder.chmod(0o750 if folder.is_dir() else 0o640)
    say(f"closed {', '.join(CLOSED)} of {REPO} to every account but root and {grader.pw_name}")


def reopen_checkout(root: Path | None = None) -> None:
    """Give the checkout's closed folders their first modes and groups back, once no prepared root is left
    (`root`, when given, is forgotten first)."""
    state = load_state()
    if root is not None:
        state["roots"].pop(str(root), None)
    if state["roots"]:
        say(f"the checkout stays closed: prepared for {', '.join(state['roots'])} too")
    else:
        for folder, (mode, gid) in state["checkout_modes"].items():
            if Path(folder).exists():
                os.chown(folder, -1, gid)
                os.chmod(folder, mode)
        state["checkout_modes"] = {}
    if state["roots"] or state["checkout_modes"]:
        save_state(state)
    elif STATE.exists():
        STATE.unlink()
        if not any(STATE.parent.iterdir()):
            STATE.parent.rmdir()


def make_exchange(exchange: Path, grader: pwd.struct_passwd) -> None:
    """The exchange (mode 1777: everyone makes their own entries, nobody renames or removes another's) and the
    course's folder in it, made now and owned by the grader account: a student who made it first would own it,
    and nbgrader's release refuses a course folder it does not own."""
    exchange.mkdir(parents=True, exist_ok=True)
    exchange.chmod(0o1777)
    course = exchange / COURSE.course_id
    course.mkdir(exist_ok=True)
    os.chown(course, grader.pw_uid, grader.pw_gid)
    course.chmod(0o755)


def delegate_cgroup(account: pwd.struct_passwd) -> str | None:
    """On cgroup v1, a group in the memory and pids hierarchies given to the account; its path, or None."""
    hierarchies = [cgroups.ROOT / name for name in ("memory", "pids") if (cgroups.ROOT / name / "cgroup.procs").exists()]
    if len(hierarchies) != 2:
        say("cgroup v2: delegate a group to the grader account with systemd (the instructors' page), then set "
            "COURSE_GRADING_CGROUP_PARENT in hub.env")
        return None
    for hierarchy in hierarchies:
        group = hierarchy / account.pw_name
        group.mkdir(exist_ok=True)
        os.chown(group, account.pw_uid, account.pw_gid)
    say(f"delegated the control group /{account.pw_name} to {account.pw_name}")
    return f"/{account.pw_name}"


# --- prepare, serve, teardown -------------------------------------------------------------------------------------

def prepare(root: Path, instructors: list[str] | list[Person], students: list[str] | list[Person], *,
            demo: bool = False, create: bool | None = None, assignments: list[str] | None = None,
            exchange: Path | None = None, home_root: Path | None = None, port: int = 8000,
            grader: str = GRADER) -> dict[str, str]:
    """Everything the hub needs on this machine; returns the hub's settings (also written to <root>/hub.env).
    Accounts that do not exist are made when `create` (a roster, the demo), else refused by name."""
    from tools import grading

    if os.geteuid() != 0:
        raise SystemExit("tools.hub prepare: run as root (it makes accounts, folders owned by them and a cgroup)")
    instructors = [person if isinstance(person, Person) else Person(person) for person in instructors]
    students = [person if isinstance(person, Person) else Person(person) for person in students]
    create = demo if create is None else create
    exchange = exchange or root / "exchange"
    state = load_state()
    record = root_record(state, root)
    record["made_root"] = record["made_root"] or not root.exists()
    record["exchange"] = record["exchange"] or ("" if exchange.exists() else str(exchange))
    try:
        grader_account = ensure_account(grader, record, home_root=home_root)
        ensure_class([*instructors, *students], record, create=create, demo=demo, home_root=home_root)
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o755)
        (root / "hub").mkdir(exist_ok=True)
        (root / "hub").chmod(0o700)
        python = make_python(root / "python")
        say(f"the users' Python: {python}, with {', '.join(COMMANDS)}")
        course = root / "course"
        if not course.exists():
            grading.make_course(course)
            grading.generate_assignments(course, assignments or COURSE.assignments())
            say(f"the course in {course}, assignments generated: {', '.join(assignments or COURSE.assignments())}")
        # The course's exchange is the hub's (the last setting of a configuration file wins).
        directory = course / "autograder" / "course_directory.py"
        line = f"c.Exchange.root = {str(exchange)!r}  # the hub's exchange (tools/hub.py)\n"
        if line not in directory.read_text():
            directory.write_text(directory.read_text() + line)
        import_names(course, students)
        chown_tree(course, grader_account)
        course.chmod(0o700)
        make_exchange(exchange, grader_account)
        close_checkout(grader_account, state)
        write_roles(root, exchange)
        settings = {"COURSE_HUB_ROOT": str(root), "COURSE_HUB_COURSE": str(course),
                    "COURSE_HUB_EXCHANGE": str(exchange), "COURSE_HUB_PYTHON": str(python),
                    "COURSE_HUB_INSTRUCTORS": ",".join(person.login for person in instructors),
                    "COURSE_HUB_STUDENTS": ",".join(person.login for person in students),
                    "COURSE_HUB_GRADER": grader, "COURSE_HUB_PORT": str(port)}
        delegated = delegate_cgroup(grader_account)
        if delegated:
            settings["COURSE_GRADING_CGROUP_PARENT"] = delegated
            if delegated not in record["cgroups"]:
                record["cgroups"].append(delegated)
        write_system_file(profile_file(root), profile_script(python.parent, grader, delegated,
                                                             root / "roles" / "student" / "config"), record)
        say(f"every login shell: {python.parent} first on PATH ({profile_file(root)})"
            + (f", and COURSE_GRADING_CGROUP_PARENT={delegated} for {grader}" if delegated else ""))
        unit = UNIT_DIR / unit_name(root)
        if UNIT_DIR.parent.is_dir():
            write_system_file(unit, unit_text(root), record)
            say(f"the hub's systemd unit: {unit} (`systemctl enable --now {unit.name}` starts it at every boot, "
                "its control group made again first)")
        hub_env = root / "hub.env"
        hub_env.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        hub_env.chmod(0o600)                   # the class's logins
    finally:
        save_state(state)
    return settings


def read_settings(root: Path) -> dict[str, str]:
    lines = (root / "hub.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def hub_command() -> list[str]:
    return [sys.executable, "-m", "jupyterhub", "-f", str(CONFIG)]


def hub_environment(settings: dict[str, str]) -> dict[str, str]:
    env = tool_env(settings)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def stop_proxy(root: Path) -> None:
    """The hub's proxy, which outlives a hub that was killed (its pid file names it)."""
    pid_file = root / "hub" / "jupyterhub-proxy.pid"
    try:
        pid = int(pid_file.read_text().strip())
        if "configurable-http-proxy" in Path(f"/proc/{pid}/cmdline").read_text():
            os.kill(pid, 15)
            say(f"stopped the hub's proxy (process {pid})")
    except (OSError, ValueError):
        pass


def teardown(root: Path, *, remove_course: bool = False) -> None:
    """Undo what `prepare` did for `root` and nothing else: the accounts it made (with their homes) and the homes it
    closed (their modes back), its files in /etc, the control groups it delegated, the exchange and root folder it
    made, and the checkout's folders once no other root is prepared. The course folder (gradebook, hand-ins,
    feedback) is kept, handed to root (mode 0700), unless `remove_course`."""
    if os.geteuid() != 0:
        raise SystemExit("tools.hub teardown: run as root")
    state = load_state()
    record = state["roots"].get(str(root))
    if record is None:
        raise SystemExit(f"tools.hub teardown: {root} was not prepared on this machine ({STATE} has no record)")
    record = root_record(state, root)
    stop_proxy(root)
    for path in record["files"]:
        if path.endswith(".service") and systemd_running():
            subprocess.run(["systemctl", "disable", "--now", Path(path).name], capture_output=True)
        Path(path).unlink(missing_ok=True)
        say(f"removed {path}")
    for name in record["accounts_made"]:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
    for home, mode in record["home_modes"].items():
        if Path(home).is_dir():
            os.chmod(home, mode)
            say(f"gave {home} its mode {mode:o} back")
    course = root / "course"
    if course.exists():
        if remove_course:
            shutil.rmtree(course)
        else:
            chown_tree(course, pwd.getpwuid(0))
            course.chmod(0o700)
            say(f"kept the course (gradebook, hand-ins, feedback) in {course}, now root's")
    for name in record["accounts_made"]:
        made = subprocess.run(["userdel", "--remove", name], capture_output=True, text=True)
        say(f"removed the account {name} and its home" if made.returncode == 0 else
            f"could not remove the account {name}: {made.stderr.strip()}")
    for group in record["cgroups"]:
        for hierarchy in ("memory", "pids"):
            folder = cgroups.ROOT / hierarchy / group.lstrip("/")
            for inner in sorted(folder.glob("**/"), key=lambda path: -len(path.parts)) if folder.is_dir() else []:
                try:
                    inner.rmdir()
                except OSError:
                    say(f"the control group {inner} is still in use: left")
    if record["exchange"]:
        shutil.rmtree(record["exchange"], ignore_errors=True)
    for name in ("hub", "python", "roles", "hub.env", "exchange"):
        path = root / name
        if name == "exchange" and str(path) != record["exchange"]:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if record["made_root"] and root.exists() and not any(root.iterdir()):
        root.rmdir()
    state["roots"].pop(str(root))
    save_state(state)
    reopen_checkout()
    say(f"tore down the hub of {root}")


# The demo's round of the whole-class path (the instructors' page), once, so that `make hub` opens on a graded class.
DEMO_ASSIGNMENT = "01-layernorm"
WHOLE_CLASS = ["nbgrader collect {a}", "python -m autograder.classgrader {a} --course {course}",
               "nbgrader generate_feedback {a}", "nbgrader release_feedback {a}", "python -m autograder.report {a}"]


def login_shell(name: str, commands: str) -> subprocess.CompletedProcess:
    """Commands in the account's login shell, as its terminal or ssh runs them."""
    return subprocess.run(["su", "-", name, "-c", commands], capture_output=True, text=True, cwd="/",
                          env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})


def demo_round(settings: dict[str, str], students: list[str]) -> None:
    """The demo's class through the whole-class path once, as its people would run it: the grader account releases
    assignment 1; every student but the last fetches it and submits (the first the master's answers, the others
    the first part only); the grader account collects, grades with the class grader, generates and releases the
    feedback, and writes the class report. Skipped once assignment 1 is released; a failure is said, not raised."""
    import tempfile

    import nbformat

    from tools import grading

    course, grader, a = Path(settings["COURSE_HUB_COURSE"]), settings["COURSE_HUB_GRADER"], DEMO_ASSIGNMENT
    if (Path(settings["COURSE_HUB_EXCHANGE"]) / COURSE.course_id / "outbound" / a).exists():
        return
    say(f"the whole-class path once, for {a} (the instructors' page): release, hand-ins, collect, grade, feedback, "
        "report")
    answers = Path(tempfile.mkdtemp(prefix="hub-demo-", dir="/tmp"))
    try:
        answers.chmod(0o755)
        steps = [(grader, f"cd {course / 'autograder'} && nbgrader release_assignment {a}")]
        for number, student in enumerate(students[:-1]):
            cells = grading.points_by_answer(a) if number == 0 else list(grading.points_by_answer(a))[:1]
            notebook = answers / student / COURSE.release_notebook(a).name
            notebook.parent.mkdir(mode=0o755)
            nbformat.write(grading.submission_from_release(
                a, {cell: grading.master_answer(a, cell) for cell in cells}), notebook)
            notebook.chmod(0o644)
            steps.append((student, f"nbgrader fetch_assignment {a} && cp {notebook} {a}/ && nbgrader submit {a}"))
        steps.append((grader, f"cd {course / 'autograder'} && "
                      + " && ".join(step.format(a=a, course=course) for step in WHOLE_CLASS)))
        for name, commands in steps:
            ran = login_shell(name, commands)
            if ran.returncode != 0:
                say(f"the demo's round stopped: as {name}, `{commands}` failed:\n"
                    f"{ran.stdout[-2000:]}{ran.stderr[-2000:]}")
                return
        say(f"graded: {', '.join(students[:-1])} handed in {a}; feedback released; the class report in "
            f"{course / '_build' / 'class-report'}")
    finally:
        shutil.rmtree(answers, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.hub", description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["demo", "prepare", "serve", "reopen", "teardown"])
    parser.add_argument("--root", type=Path, default=Path("/srv") / COURSE.course_id)
    parser.add_argument("--roster", type=Path, help="the class: a CSV with login, first name, last name, email")
    parser.add_argument("--instructors", default=None, help="logins, separated by commas (instructors and "
                        "teaching assistants: the formgrader, no shell as the grader account)")
    parser.add_argument("--students", default=None, help="logins that exist already, separated by commas")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--remove-course", action="store_true", help="teardown: remove the course folder too")
    args = parser.parse_args(argv)
    if args.step == "reopen":
        reopen_checkout()
        return
    if args.step == "teardown":
        teardown(args.root.resolve(), remove_course=args.remove_course)
        return
    if args.step in ("demo", "prepare"):
        demo = args.step == "demo"
        instructors = (args.instructors or ",".join(DEMO_INSTRUCTORS if demo else [])).split(",")
        if args.roster:
            students = read_roster(args.roster)
        elif args.students or demo:
            students = (args.students or ",".join(DEMO_STUDENTS)).split(",")
            students = [Person(login, login.capitalize(), "Demo") if demo else Person(login) for login in students]
        else:
            parser.error("prepare: give the class with --roster roster.csv "
                         "(or --students s1,s2 for accounts that exist)")
        settings = prepare(args.root.resolve(), [name for name in instructors if name], students, demo=demo,
                           create=demo or args.roster is not None, port=args.port)
        if demo:
            demo_round(settings, [person.login for person in students])
    if args.step in ("demo", "serve"):
        root = args.root.resolve()
        settings = read_settings(root)
        if "COURSE_GRADING_CGROUP_PARENT" in settings:          # control groups do not survive a restart
            delegate_cgroup(pwd.getpwnam(settings["COURSE_HUB_GRADER"]))
        say(f"JupyterHub on http://127.0.0.1:{settings['COURSE_HUB_PORT']}/"
            + (" (demo logins: each name above, password demo-<name>)" if args.step == "demo" else ""))
        os.chdir(root / "hub")
        argv = hub_command()
        os.execve(argv[0], argv, hub_environment(settings))


if __name__ == "__main__":
    main()
