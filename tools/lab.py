"""JupyterLab for one role of the course: a student (Assignments tab, Validate) or an instructor (formgrader).

    python -m tools.lab student                 # `make student`: fetch, work, validate, submit
    python -m tools.lab instructor              # `make instructor`: JupyterLab with nbgrader's formgrader

Each role gets a folder of its own Jupyter configuration (`--state`, by default `_build/lab/<role>/`),
passed to JupyterLab through Jupyter's environment variables (JUPYTER_CONFIG_DIR, JUPYTER_DATA_DIR,
JUPYTERLAB_SETTINGS_DIR, ...), so nothing is patched and nothing outside that folder changes:

- `jupyter_server_config.json` turns nbgrader's server extensions on or off (a student's server has no
  formgrader and no course list);
- `labconfig/page_config.json` disables lab extensions (a student has no Create Assignment sidebar and no
  formgrader; nobody gets JupyterLab's "news" announcements prompt);
- a student's `nbgrader_config.py` names the course, the exchange, the student's id and the time Validate
  gives each cell (the course's grading timeout, autograder/grading_environment.py);
- a student's server loads tools/lab_student.py, which gives a damaged notebook (not JSON, an answer cell
  deleted) or an endless loop a clear message in Validate and Submit instead of a traceback.

The instructor's server starts in the course's `autograder/` folder, where nbgrader reads the course's
own `nbgrader_config.py`, so grading from the formgrader runs with the sandbox and the limits, exactly
as `nbgrader autograde` on the command line does. The browser tests in tests/lab/ start both roles
with this module.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from pathlib import Path

from tools.course import COURSE, tool_env

# Lab plugins (page_config's disabledExtensions): JupyterLab's news prompt for everyone, nbgrader's
# instructor tools for students.
QUIET = {"@jupyterlab/apputils-extension:announcements": True}
INSTRUCTOR_ONLY_LAB = {"@jupyter/nbgrader:create-assignment": True, "@jupyter/nbgrader:formgrader": True,
                       "@jupyter/nbgrader:course-list": True}
INSTRUCTOR_ONLY_SERVER = {"nbgrader.server_extensions.formgrader": False,
                          "nbgrader.server_extensions.course_list": False}
# No update check either, and no "Jupyter news" notifications (JupyterLab's user settings).
NOTIFICATION_SETTINGS = {"checkForUpdates": False, "fetchNews": "false"}


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def cell_timeout() -> int:
    """The course's per-cell timeout (COURSE_GRADING_CELL_TIMEOUT overrides it), which Validate uses too."""
    from autograder.grading_environment import value

    return int(value("COURSE_GRADING_CELL_TIMEOUT"))


def write_role(role: str, config: Path, settings: Path, *, exchange: Path | None = None,
               student: str | None = None, cache: Path | None = None) -> None:
    """Write the role's Jupyter configuration (`config`) and JupyterLab settings (`settings`). A student's names
    the course, the exchange and, for one person's server, the student id and nbgrader's cache (on a hub,
    tools/hub.py, neither: nbgrader takes the login and each user's own data folder)."""
    disabled = dict(QUIET)
    if role == "student":
        disabled.update(INSTRUCTOR_ONLY_LAB)
        write_json(config / "jupyter_server_config.json", {"ServerApp": {"jpserver_extensions": {
            **INSTRUCTOR_ONLY_SERVER, "tools.lab_student": True}}})
        exchange = exchange.resolve()
        exchange.mkdir(parents=True, exist_ok=True)
        (config / "nbgrader_config.py").write_text(
            "# Written by tools/lab.py for a student's JupyterLab.\n"
            "c = get_config()  # noqa: F821\n"
            f"c.CourseDirectory.course_id = {COURSE.course_id!r}\n"
            + (f"c.CourseDirectory.student_id = {student!r}\n" if student else "")
            + f"c.Exchange.root = {str(exchange)!r}\n"
            + (f"c.Exchange.cache = {str(cache)!r}\n" if cache else "")
            + f"c.Execute.timeout = {cell_timeout()}\n"
            "# Validate stops at the first cell that runs past the timeout (tools/lab_student.py).\n"
            "from tools.lab_student import stop_at_timeout\n"
            "c.Execute.on_cell_error = stop_at_timeout\n")
    else:
        write_json(config / "jupyter_server_config.json", {"ServerApp": {"jpserver_extensions": {}}})
    write_json(config / "labconfig" / "page_config.json", {"disabledExtensions": disabled})
    write_json(settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings",
               NOTIFICATION_SETTINGS)


def prepare(role: str, state: Path, *, exchange: Path | None = None, student: str | None = None) -> dict[str, str]:
    """Write the role's Jupyter configuration under `state`; return the environment that selects it."""
    config, settings = state / "config", state / "settings"
    write_role(role, config, settings, exchange=exchange, student=student, cache=state / "nbgrader_cache")
    if role == "instructor":
        # On one account every student's hand-in belongs to that account: the course's collector must not
        # refuse them as a hub's does (autograder/plugins/exchange_collect.py; ExchangeCollect.check_owner).
        (config / "nbgrader_config.py").write_text(
            "# Written by tools/lab.py for an instructor's JupyterLab on one account.\n"
            "c = get_config()  # noqa: F821\n"
            "c.ExchangeCollect.check_owner = False\n")
    for folder in ("data", "runtime", "workspaces", "ipython"):
        (state / folder).mkdir(parents=True, exist_ok=True)
    return {
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_DATA_DIR": str(state / "data"),
        "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(state / "workspaces"),
        "IPYTHONDIR": str(state / "ipython"),
    }


def command(role: str, root: Path, port: int | None, browser: bool) -> list[str]:
    argv = [str(Path(sys.executable).with_name("jupyter")), "lab", f"--ServerApp.root_dir={root}",
            "--ServerApp.ip=127.0.0.1"]
    if port:
        argv += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if not browser:
        argv.append("--no-browser")
    if os.getuid() == 0:                  # containers and CI often run as root, which Jupyter refuses by default
        argv.append("--allow-root")
    return argv


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.lab", description=__doc__.split("\n\n")[0])
    parser.add_argument("role", choices=["student", "instructor"])
    parser.add_argument("--state", type=Path, help="the role's Jupyter configuration (default _build/lab/ROLE)")
    parser.add_argument("--exchange", type=Path, default=COURSE.exchange,
                        help="student: nbgrader's exchange folder (default: the course's, autograder/exchange)")
    parser.add_argument("--student", default=getpass.getuser(), help="student: your student id (default: your login)")
    parser.add_argument("--work", type=Path, default=Path.home() / COURSE.course_id,
                        help="student: where assignments are fetched to (default ~/<course id>)")
    parser.add_argument("--course", type=Path, default=COURSE.root,
                        help="instructor: the course folder (default: this repository)")
    parser.add_argument("--port", type=int, help="port to serve on (default: JupyterLab's, 8888 or the next free)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    args = parser.parse_args(argv)

    state = (args.state or COURSE.root / "_build" / "lab" / args.role).resolve()
    # nbgrader calls `alembic` and `jupyter` from PATH: the course's environment comes first.
    env = tool_env(prepare(args.role, state, exchange=args.exchange, student=args.student))
    # The student's server loads tools.lab_student (clear messages for damaged notebooks).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(COURSE.root), env.get("PYTHONPATH")]))
    if args.role == "student":
        root, cwd = args.work.resolve(), args.work.resolve()
        root.mkdir(parents=True, exist_ok=True)
        print(f"Student {args.student!r}, course {COURSE.course_id}, exchange {args.exchange.resolve()}; "
              f"assignments are fetched into {root}", flush=True)
    else:
        # The formgrader reads nbgrader_config.py from the folder the server starts in, and needs the
        # course's root inside the server's root.
        root, cwd = args.course.resolve(), args.course.resolve() / "autograder"
        print(f"Instructor, course {root}: open the formgrader from the Nbgrader menu", flush=True)
    os.chdir(cwd)
    argv = command(args.role, root, args.port, not args.no_browser)
    os.execve(argv[0], argv, env)


if __name__ == "__main__":
    main()
