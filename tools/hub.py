"""A machine ready for deploy/hub/jupyterhub_config.py: accounts, the course, the exchange, the Python, and the hub.

    sudo python -m tools.hub demo                     # `make hub`: a local demo with demo accounts, then the hub
    sudo python -m tools.hub prepare --root /srv/gpt2-block --instructors ana --students s1,s2,...
    sudo python -m tools.hub serve --root /srv/gpt2-block
    sudo python -m tools.hub reopen --root /srv/gpt2-block    # the checkout's folders as they were before prepare

`prepare` does, once, what the instructors' page lists for an admin, and says each step:

- the grader account (`grader-<course id>`), which owns the course and runs the formgrader and the grading;
  with `--demo`, the demo's instructor and students too, with the password `demo-<login>` (loopback only);
  otherwise the instructors' and students' accounts must exist already (the machine's users, or LDAP);
- the course under `<root>/course`, mode 0700 for the grader account, with the assignments generated;
- nbgrader's exchange, mode 1777: everyone may create their own entries and nobody may rename or remove
  another's (nbgrader's permissions inside it keep one student's hand-in from another), and the course's folder
  in it, owned by the grader account;
- this checkout's masters, git history, reference module and grading folders closed to every account but the
  grader's group (the users' Python reads the checkout's packages, so the checkout itself stays readable);
- a Python every account can run (`<root>/python`: Debian's python3.11 with this checkout's packages: the
  machine's default Python may live in root's home, which no other account may enter);
- each role's Jupyter settings (tools/lab.py's, read-only for everyone);
- on cgroup v1, a control group delegated to the grader account (COURSE_GRADING_CGROUP_PARENT), so that every
  grading limit holds for the whole submission; on cgroup v2 the instructors' page gives the systemd unit;
- `<root>/hub.env`, the settings `serve` hands to the hub.

`serve` starts JupyterHub as root (it starts each user's server as that user) with those settings.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

from autograder import cgroups
from tools.course import COURSE, REPO, tool_env

CONFIG = REPO / "deploy" / "hub" / "jupyterhub_config.py"
DEBIAN_PYTHON = Path("/usr/bin/python3.11")
GRADER = f"grader-{COURSE.course_id}"
DEMO_INSTRUCTORS, DEMO_STUDENTS = ["instructor"], ["ada", "bob", "cy"]


def say(text: str) -> None:
    print(f"hub: {text}", flush=True)


def ensure_account(name: str, password: str | None = None, home_root: Path | None = None) -> pwd.struct_passwd:
    """The account, made (with a home folder) if it does not exist; a password set only when given."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        home = ["--home-dir", str(home_root / name)] if home_root else []
        subprocess.run(["useradd", "--create-home", *home, "--shell", "/bin/bash", name], check=True)
        Path(pwd.getpwnam(name).pw_dir).chmod(0o700)          # a student's work is theirs alone
        say(f"made the account {name}")
    if password:
        subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True)
    return pwd.getpwnam(name)


def chown_tree(root: Path, account: pwd.struct_passwd) -> None:
    for path in [root, *root.rglob("*")]:
        os.lchown(path, account.pw_uid, account.pw_gid)


def make_python(target: Path) -> Path:
    """Debian's Python 3.11 in a virtual environment that reads this checkout's packages, Jupyter's extensions and
    settings included (share/ and etc/ link to this environment's)."""
    if not (target / "bin" / "python").exists():
        subprocess.run([str(DEBIAN_PYTHON), "-m", "venv", "--without-pip", str(target)], check=True)
    packages = sysconfig.get_paths()["purelib"]
    (target / "lib" / "python3.11" / "site-packages" / "course.pth").write_text(
        f"import site; site.addsitedir({packages!r})\n")
    # nbgrader runs `alembic` from PATH to make a gradebook; this environment's script would start a Python the
    # other accounts cannot run.
    alembic = target / "bin" / "alembic"
    alembic.write_text(f"#!{target / 'bin' / 'python'}\nimport sys\nfrom alembic.config import main\nsys.exit(main())\n")
    alembic.chmod(0o755)
    for shared in ("share/jupyter", "etc/jupyter"):
        link, real = target / shared, Path(sys.prefix) / shared
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink() and real.exists():
            link.symlink_to(real)
    return target / "bin" / "python"


def write_roles(root: Path, exchange: Path) -> None:
    """Each role's Jupyter settings: a student's server (Assignments tab, Validate), an instructor's own (the
    Assignments tab and the course list, not the formgrader: that is the course's service), the formgrader's."""
    from tools.lab import write_json, write_role

    for role, lab_role in (("student", "student"), ("instructor", "instructor"), ("instructor-own", "instructor")):
        folder = root / "roles" / role
        write_role(lab_role, folder / "config", folder / "settings", exchange=exchange)
        if role == "instructor-own":
            page = folder / "config" / "labconfig" / "page_config.json"
            write_json(page, {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True,
                                                     "@jupyter/nbgrader:formgrader": True,
                                                     "@jupyter/nbgrader:create-assignment": True}})
            write_json(folder / "config" / "jupyter_server_config.json", {"ServerApp": {"jpserver_extensions": {
                "nbgrader.server_extensions.formgrader": False}}})
        if lab_role == "instructor":
            # The course's nbgrader settings, where every nbgrader command of the role looks for them.
            (folder / "config" / "nbgrader_config.py").write_text(
                "c = get_config()  # noqa: F821\n"
                f"c.CourseDirectory.course_id = {COURSE.course_id!r}\n"
                f"c.Exchange.root = {str(exchange)!r}\n")
    for path in [root / "roles", *(root / "roles").rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


# What of this checkout no student may read: the masters and their history, the reference module (its
# functions are the answers), the catalog and the mutation report (correct answers and every bug), the tests and
# built pages (which hold answers too), this checkout's own gradebook and hand-ins. The grader account keeps reading them
# through its group (its sandbox mounts a stub over the reference module, which needs the path).
CLOSED = ["solutions", ".git", "gptcourse", "autograder/catalog", "autograder/mutation-report.md", "tests", "_build",
          "autograder/gradebook", "autograder/submitted", "autograder/autograded", "autograder/feedback",
          "autograder/exchange"]


def close_checkout(grader: pwd.struct_passwd, root: Path) -> None:
    """Close CLOSED to every account but root and the grader's group; each folder's mode and group as they were
    go to <root>/checkout-modes.json, for `reopen_checkout`."""
    before = {}
    for name in CLOSED:
        folder = REPO / name                 # a folder, or a file (the mutation report names every bug's check)
        if folder.exists() and not folder.is_symlink():
            info = folder.stat()
            before.setdefault(str(folder), (stat.S_IMODE(info.st_mode), info.st_gid))
            os.chown(folder, -1, grader.pw_gid)
            folder.chmod(0o750 if folder.is_dir() else 0o640)
    saved = root / "checkout-modes.json"
    if not saved.exists():
        saved.write_text(json.dumps(before))
    say(f"closed {', '.join(CLOSED)} of {REPO} to every account but root and {grader.pw_name}")


def reopen_checkout(root: Path) -> None:
    """Give the checkout's closed folders their modes and groups back (`python -m tools.hub reopen`)."""
    saved = root / "checkout-modes.json"
    for folder, (mode, gid) in json.loads(saved.read_text()).items() if saved.exists() else []:
        os.chown(folder, -1, gid)
        os.chmod(folder, mode)


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


def prepare(root: Path, instructors: list[str], students: list[str], *, demo: bool = False,
            assignments: list[str] | None = None, exchange: Path | None = None,
            home_root: Path | None = None, port: int = 8000, grader: str = GRADER) -> dict[str, str]:
    """Everything the hub needs on this machine; returns the hub's settings (also written to <root>/hub.env)."""
    from tools import grading

    if os.geteuid() != 0:
        raise SystemExit("tools.hub prepare: run as root (it makes accounts, folders owned by them and a cgroup)")
    exchange = exchange or root / "exchange"
    grader_account = ensure_account(grader, home_root=home_root)
    for name in [*instructors, *students]:
        if demo:
            ensure_account(name, f"demo-{name}", home_root)
        else:
            pwd.getpwnam(name)                  # a real class's accounts exist already: a KeyError names who does not
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    (root / "hub").mkdir(exist_ok=True)
    (root / "hub").chmod(0o700)
    python = make_python(root / "python")
    say(f"the users' Python: {python}")
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
    chown_tree(course, grader_account)
    course.chmod(0o700)
    make_exchange(exchange, grader_account)
    close_checkout(grader_account, root)
    write_roles(root, exchange)
    settings = {"COURSE_HUB_ROOT": str(root), "COURSE_HUB_COURSE": str(course), "COURSE_HUB_EXCHANGE": str(exchange),
                "COURSE_HUB_PYTHON": str(python), "COURSE_HUB_INSTRUCTORS": ",".join(instructors),
                "COURSE_HUB_STUDENTS": ",".join(students), "COURSE_HUB_GRADER": grader,
                "COURSE_HUB_PORT": str(port)}
    delegated = delegate_cgroup(grader_account)
    if delegated:
        settings["COURSE_GRADING_CGROUP_PARENT"] = delegated
    (root / "hub.env").write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.hub", description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["demo", "prepare", "serve", "reopen"])
    parser.add_argument("--root", type=Path, default=Path("/srv") / COURSE.course_id)
    parser.add_argument("--instructors", default=",".join(DEMO_INSTRUCTORS))
    parser.add_argument("--students", default=",".join(DEMO_STUDENTS))
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    if args.step == "reopen":
        reopen_checkout(args.root)
        return
    if args.step in ("demo", "prepare"):
        prepare(args.root, args.instructors.split(","), args.students.split(","), demo=args.step == "demo",
                port=args.port)
    if args.step in ("demo", "serve"):
        settings = read_settings(args.root)
        say(f"JupyterHub on http://127.0.0.1:{settings['COURSE_HUB_PORT']}/"
            + (" (demo logins: each name above, password demo-<name>)" if args.step == "demo" else ""))
        os.chdir(args.root / "hub")
        argv = hub_command()
        os.execve(argv[0], argv, hub_environment(settings))


if __name__ == "__main__":
    main()
