"""JupyterHub for one class of the course, on one server, with real Unix users.

    python -m jupyterhub -f deploy/hub/jupyterhub_config.py      # as root (it starts each user's server as them)

Laid out as nbgrader's own "one class, multiple graders" demo: every person logs in with their Unix account
(PAM) and gets their own JupyterLab, started as that account; the course's formgrader is a hub-managed
service named after the course id, running as the course's grader account in the course's `autograder/`
folder (so grading reads the course's nbgrader_config.py: the sandbox, the limits); instructors reach it
through the hub group `formgrade-<course id>`; students work in their own home folders and hand in through
nbgrader's exchange, whose permissions keep one student's work from another. `tools/hub.py` prepares a
machine for it (`make hub` for a local demo) and the instructors' page walks an admin through a real one.

What an admin changes is read from the environment (`tools/hub.py` writes it into `<root>/hub.env`), each
with the demo's default:

    COURSE_HUB_ROOT         the hub's own folder: its database, cookie secret and each role's Jupyter settings
    COURSE_HUB_COURSE       the course folder, owned by the grader account (mode 0700)
    COURSE_HUB_EXCHANGE     nbgrader's exchange (mode 1777, as nbgrader requires)
    COURSE_HUB_PYTHON       the Python every user's server runs: a virtual environment with the course's packages,
                            readable by all (the machine's own Python may live where users cannot enter)
    COURSE_HUB_INSTRUCTORS  the instructors' logins, separated by commas
    COURSE_HUB_STUDENTS     the students' logins, separated by commas
    COURSE_HUB_GRADER       the grader account the formgrader and grading run as
    COURSE_HUB_PORT         where the hub listens, on 127.0.0.1 (a real deployment puts HTTPS in front)
    COURSE_GRADING_CGROUP_PARENT
                            the control group delegated to the grader account (the instructors' page), so that
                            every grading limit holds for the whole submission
"""

import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821 (provided by traitlets when JupyterHub loads this file)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))                 # the course's tools: its id, the roles' Jupyter settings

from autograder.course import Course  # noqa: E402

ROOT = Path(os.environ.get("COURSE_HUB_ROOT", "/srv/gpt2-block"))
COURSE = Course(Path(os.environ.get("COURSE_HUB_COURSE", str(ROOT / "course"))))
EXCHANGE = Path(os.environ.get("COURSE_HUB_EXCHANGE", "/srv/nbgrader/exchange"))
PYTHON = os.environ.get("COURSE_HUB_PYTHON", str(ROOT / "python" / "bin" / "python"))
INSTRUCTORS = [name for name in os.environ.get("COURSE_HUB_INSTRUCTORS", "instructor").split(",") if name]
STUDENTS = [name for name in os.environ.get("COURSE_HUB_STUDENTS", "").split(",") if name]
COURSE_ID = COURSE.course_id
GRADER = os.environ.get("COURSE_HUB_GRADER", f"grader-{COURSE_ID}")
PORT = int(os.environ.get("COURSE_HUB_PORT", "8000"))
SERVICE_PORT = PORT + 1

# --- the hub ------------------------------------------------------------------------------------------------
c.JupyterHub.bind_url = f"http://127.0.0.1:{PORT}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{PORT + 2}"
c.JupyterHub.db_url = f"sqlite:///{ROOT / 'hub' / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(ROOT / "hub" / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.command = [str(REPO / "node_modules" / ".bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.pid_file = str(ROOT / "hub" / "jupyterhub-proxy.pid")
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PORT + 3}"

# Real Unix accounts, by password (PAM); only the class may log in.
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = set(INSTRUCTORS) | set(STUDENTS)

# The groups nbgrader looks for: instructors reach the formgrader service; students read the course's name.
c.JupyterHub.load_groups = {f"formgrade-{COURSE_ID}": {"users": INSTRUCTORS},
                            f"nbgrader-{COURSE_ID}": {"users": STUDENTS}}
c.JupyterHub.load_roles = [
    {"name": f"formgrade-{COURSE_ID}", "groups": [f"formgrade-{COURSE_ID}"],
     "scopes": [f"access:services!service={COURSE_ID}", "list:services", f"read:services!service={COURSE_ID}"]},
    {"name": f"nbgrader-{COURSE_ID}", "groups": [f"nbgrader-{COURSE_ID}"],
     "scopes": ["list:services", f"read:services!service={COURSE_ID}"]},
    # nbgrader's course list asks the hub which services the instructor may reach, with the server's token.
    {"name": "server", "scopes": ["inherit"]},
]


def role_environment(role: str) -> dict[str, str]:
    """The role's Jupyter settings (tools/hub.py wrote them, read-only for everyone), searched before the Python
    environment's own and after each person's ~/.jupyter (which Jupyter writes to), and the course's Python."""
    return {"JUPYTER_CONFIG_PATH": str(ROOT / "roles" / role / "config"),
            "PATH": f"{Path(PYTHON).parent}:/usr/bin:/bin", "JUPYTERHUB_DEFAULT_URL": "/lab"}


# --- the formgrader: a service of the hub, run as the grader account ----------------------------------------
# Reached in one click from the hub's own menu (Services -> the course id: /services/<course id>/, whose default page
# is the formgrader) and from an instructor's course list (its /lab link is sent to /formgrader): a page of its own,
# since the hub's `frame-ancestors 'none'` forbids framing it (and allowing it would let a student's page on this
# origin frame the grader's). Teaching assistants in the formgrade group get the formgrader, not the grader
# account's shell.
c.JupyterHub.services = [{
    "name": COURSE_ID,
    "url": f"http://127.0.0.1:{SERVICE_PORT}",
    "command": [PYTHON, "-m", "jupyterhub.singleuser", f"--ServerApp.root_dir={COURSE.root}"],
    "user": GRADER,
    # nbgrader reads the course's nbgrader_config.py from the folder its server starts in.
    "cwd": str(COURSE.autograder),
    # The formgrader alone (roles/formgrader: deploy/hub/formgrader_service.py refuses terminals, kernels and
    # writes, and sends JupyterLab's pages to /formgrader), and nbconvert's MathJax macro replaced by one that loads
    # the course's own copy (deploy/hub/share/jupyter, first on JUPYTER_PATH).
    "environment": {**role_environment("formgrader"), "PYTHONPATH": str(HERE),
                    "JUPYTER_PATH": str(HERE / "share" / "jupyter"),
                    **{name: os.environ[name] for name in ("COURSE_GRADING_CGROUP_PARENT",) if name in os.environ}},
    "oauth_no_confirm": True,
}]

# --- each person's own JupyterLab, started as them, in their home folder ------------------------------------
c.Spawner.cmd = [PYTHON, "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.http_timeout = 120
c.Spawner.start_timeout = 120


def choose_role(spawner) -> None:
    """Instructors get the course list and the Assignments tab; students the Assignments tab and Validate."""
    role = "instructor-own" if spawner.user.name in INSTRUCTORS else "student"
    spawner.environment.update(role_environment(role))


c.Spawner.pre_spawn_hook = choose_role
