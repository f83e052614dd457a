"""Where one copy of the course keeps what nbgrader owns, and how the course starts the processes it runs.

    from autograder.course import Course
    Course(root)                               # this checkout (the default), or a scratch copy

Facts nbgrader owns (the course id, the folders of each nbgrader step, the gradebook's URL, the exchange)
are read from nbgrader's own configuration, `autograder/course_directory.py`, which nbgrader_config.py loads
too. The grading package asks this module, never the course's tools: `tools.course.Course` extends it with
the book (the lessons and their reading order), which grading never needs. Nothing here writes to disk
except `prepare()`, which makes the folders nbgrader expects.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
AUTOGRADER = "autograder"                       # nbgrader runs from here, where nbgrader_config.py is
LAYOUT_CONFIG = "course_directory.py"           # nbgrader's CourseDirectory settings
GRADING_CONFIG = "nbgrader_config.py"           # the whole grading configuration (it loads the layout)
# The files that describe one course to nbgrader, in its autograder/ folder (traitlets reads them; they are not
# modules): every copy of the course has its own, and nothing else of this folder is copied with it. Named here,
# not in the package's __init__: run from a copy's root folder, `autograder` is that copy's folder (a namespace
# package), and only the package's modules, never its __init__'s names, are found from there.
CONFIGURATION_FILES = (GRADING_CONFIG, LAYOUT_CONFIG)
# The course's key for the checks' hidden inputs (autograder/checker/): made on first use, this account's alone
# (0600), never committed, carried to the class grader's workers in the kit. Whoever reads it can predict the
# hidden inputs of any hand-in: it lives where the gradebook lives, which the grading sandbox hides.
SECRET_FILE = "grading_secret"
# The known submissions each check is tested against (tools/mutation_report.py), beside the assignment's master: an
# instructor's file, never copied into the release (course_directory.py: CourseDirectory.ignore) or a grading kit.
CATALOG_FILE = "catalog.yml"
SECRET_BYTES = 32


class Course:
    """One copy of the course on disk, as nbgrader lays it out: this checkout, or a scratch course the tests
    build."""

    def __init__(self, root: Path = REPO):
        self.root = Path(root).resolve()

    def __repr__(self) -> str:
        return f"Course({str(self.root)!r})"

    # --- what nbgrader owns -------------------------------------------------------------------------

    @property
    def autograder(self) -> Path:
        return self.root / AUTOGRADER

    @cached_property
    def config(self):
        """The traitlets configuration of autograder/course_directory.py."""
        from traitlets.config.loader import PyFileConfigLoader

        return PyFileConfigLoader(LAYOUT_CONFIG, path=str(self.autograder)).load_config()

    def grading_secret(self) -> bytes:
        """The course's key for hidden inputs, made (atomically, 0600) if this copy has none yet."""
        path = self.autograder / SECRET_FILE
        if not path.exists():
            import secrets
            import tempfile

            descriptor, draft = tempfile.mkstemp(dir=self.autograder, prefix=".grading_secret-")    # 0600
            try:
                os.write(descriptor, secrets.token_bytes(SECRET_BYTES))
                os.close(descriptor)
                try:
                    os.link(draft, path)                   # made once: a second process finds the first one's
                except FileExistsError:
                    pass
            finally:
                os.unlink(draft)
        key = path.read_bytes()
        if len(key) != SECRET_BYTES:
            raise RuntimeError(f"{path} is not the course's grading secret ({len(key)} bytes, not {SECRET_BYTES})")
        return key

    def grading_config(self):
        """The course's whole nbgrader configuration (autograder/nbgrader_config.py, which loads the layout
        above), as `nbgrader autograde` reads it: a fresh copy at each call, read from the file."""
        from traitlets.config.loader import PyFileConfigLoader

        return PyFileConfigLoader(GRADING_CONFIG, path=str(self.autograder)).load_config()

    @cached_property
    def coursedir(self):
        """nbgrader's CourseDirectory for this copy of the course."""
        from nbgrader.coursedir import CourseDirectory

        return CourseDirectory(config=self.config)

    @property
    def course_id(self) -> str:
        return self.coursedir.course_id

    @property
    def db_url(self) -> str:
        return self.coursedir.db_url

    @property
    def gradebook_file(self) -> Path | None:
        """The SQLite file of the gradebook (None when the gradebook lives on a database server)."""
        prefix = "sqlite:///"
        return Path(self.db_url[len(prefix):]) if self.db_url.startswith(prefix) else None

    @property
    def exchange(self) -> Path:
        return Path(self.config.Exchange.root)

    def folder(self, step: str) -> Path:
        """The folder of one nbgrader step: source, release, submitted, autograded or feedback."""
        return self.root / getattr(self.coursedir, f"{step}_directory")

    def path(self, step: str, student: str, assignment: str) -> Path:
        """Where nbgrader keeps `student`'s `assignment` at `step` (for source and release: student '.')."""
        return Path(self.coursedir.format_path(getattr(self.coursedir, f"{step}_directory"), student, assignment))

    def prepare(self) -> None:
        """Make the folders nbgrader expects and does not create itself (the SQLite gradebook's), and the course's
        grading secret, so that every copy made from this one draws the same hidden inputs."""
        if self.gradebook_file is not None:
            self.gradebook_file.parent.mkdir(parents=True, exist_ok=True)
        self.exchange.mkdir(parents=True, exist_ok=True)
        self.grading_secret()

    # --- assignments ----------------------------------------------------------------------------------

    def assignments(self) -> list[str]:
        """Every assignment, in order: the folders of the instructor masters."""
        source = self.folder("source")
        return sorted(path.name for path in source.iterdir() if path.is_dir() and any(path.glob("*.ipynb")))

    def master_notebook(self, assignment: str) -> Path:
        (notebook,) = (self.folder("source") / assignment).glob("*.ipynb")
        return notebook

    def release_notebook(self, assignment: str) -> Path:
        return self.folder("release") / assignment / self.master_notebook(assignment).name

    def master_notebooks(self) -> list[Path]:
        return [self.master_notebook(assignment) for assignment in self.assignments()]


# --- processes the course starts ------------------------------------------------------------------------

def kernel_threads(workers: int) -> int:
    """PyTorch threads for each of `workers` kernels running side by side: the cores shared out, at least one."""
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def tool_env(extra: dict[str, str] | None = None, threads: int | None = None,
             base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a command the course runs (nbgrader, jupyter-book, a kernel): this virtual
    environment's bin first on PATH (nbgrader calls `alembic` from PATH), and the thread count when the
    caller shares the cores out. A new dict; the calling process's environment is left as it is.

    The thread count goes into every variable a numerical library reads, not OMP_NUM_THREADS alone: PyTorch
    lets MKL_NUM_THREADS win over OMP_NUM_THREADS, so a stray MKL_NUM_THREADS=1 in this process's environment
    (Dask's nannies once put one there while a local cluster ran) would make a kernel run on one thread."""
    env = {**(os.environ if base is None else base), **(extra or {})}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if threads:
        for name in THREAD_VARIABLES:
            env[name] = str(threads)
    return env


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@contextmanager
def venv_on_path():
    """This virtual environment's bin first on PATH while the block runs: nbgrader's Gradebook runs
    `alembic` from PATH when it creates a database, in whatever process opens it."""
    saved = os.environ.get("PATH")
    os.environ["PATH"] = tool_env()["PATH"]
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = saved
