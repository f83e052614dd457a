"""nbgrader configuration for the course. Run every nbgrader command from this folder (autograder/).

The instructor master of each assignment lives in ../solutions, the student release that
`nbgrader generate_assignment` produces in ../exercises. Everything nbgrader writes while grading
(submissions, autograded copies, feedback, the gradebook, the local exchange) goes under this folder
and is git-ignored. The grading limits below are documented on the instructors' page.
"""

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties, CheckCellMetadata, ClearOutput, DeduplicateIds, GetGrades, IgnorePattern, LimitOutput,
    OverwriteCells, OverwriteKernelspec, SaveAutoGrades,
)

HERE = Path(__file__).resolve().parent
COURSE_ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from course_grading import (  # noqa: E402
    GuardedExecute, HideHiddenTests, PerCheckExport, RecordFlags, RestoreFromRelease,
)

# --- limits for one grading kernel (override with environment variables of the same name) ---------
CELL_TIMEOUT_SECONDS = int(os.environ.get("COURSE_GRADING_CELL_TIMEOUT", "60"))
os.environ.setdefault("COURSE_GRADING_MEMORY_GB", "4")        # address space per kernel
os.environ.setdefault("COURSE_GRADING_CPU_SECONDS", "300")    # CPU time per kernel

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.course_id = "gpt2-block"
c.CourseDirectory.root = str(COURSE_ROOT)
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "autograder/submitted"
c.CourseDirectory.autograded_directory = "autograder/autograded"
c.CourseDirectory.feedback_directory = "autograder/feedback"

# nbgrader does not create the gradebook's folder itself.
(HERE / "gradebook").mkdir(exist_ok=True)
c.CourseDirectory.db_url = f"sqlite:///{HERE / 'gradebook' / 'gradebook.db'}"

# A local exchange folder, so release -> fetch -> submit -> collect works on one machine.
(HERE / "exchange").mkdir(exist_ok=True)
c.Exchange.root = str(HERE / "exchange")

# A hanging cell must not stall a whole class; every solution cell runs in well under a second.
c.Execute.timeout = CELL_TIMEOUT_SECONDS
# Grading kernels run in a bubblewrap sandbox (see sandboxed_kernel.py): read-only file system with the
# gradebook, the submissions and the masters hidden, no network. COURSE_GRADING_SANDBOX=0 turns it off
# (for a machine without bwrap; then a kernel can read and write whatever the grader's user can).
if os.environ.get("COURSE_GRADING_SANDBOX", "1") == "1":
    if not shutil.which("bwrap"):
        raise SystemExit("nbgrader_config.py: grading kernels need bubblewrap (apt-get install bubblewrap), "
                         "or set COURSE_GRADING_SANDBOX=0 to grade without the sandbox")
    spec = HERE / "kernels" / "course-sandbox"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, str(HERE / "sandboxed_kernel.py"), "{connection_file}"],
        "display_name": "Python 3 (grading sandbox)", "language": "python",
        # bwrap does not pass SIGINT on to the kernel, so a timed-out cell is interrupted by a message.
        "interrupt_mode": "message",
    }))
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("JUPYTER_PATH")]))
    os.environ["COURSE_GRADING_HIDDEN"] = os.pathsep.join([str(HERE), str(COURSE_ROOT / "solutions")])
    os.environ["COURSE_GRADING_READABLE"] = str(HERE / "kernel_startup.py")
    c.GuardedExecute.sandbox_kernel = "course-sandbox"
    # The sandbox has no network: nbgrader and the kernel talk over Unix sockets.
    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = str(Path(tempfile.mkdtemp(prefix="course-grading-")) / "kernel")

# Limits and seeds applied in the kernel before the student's first cell (see kernel_startup.py).
c.Execute.extra_arguments = [
    "--HistoryManager.hist_file=:memory:",
    f"--IPKernelApp.exec_files={[str(HERE / 'kernel_startup.py')]}",
]

# Before grading, every cell the release marks gets its metadata back, and deleted test cells are put
# back (then nbgrader's OverwriteCells restores their source, hidden tests included, from the master).
c.RestoreFromRelease.release_root = str(COURSE_ROOT / "exercises")
c.Autograde.sanitize_preprocessors = [
    ClearOutput, DeduplicateIds, OverwriteKernelspec, RestoreFromRelease, OverwriteCells, CheckCellMetadata,
]

# Stock nbgrader scores a test cell 0 if it writes anything to stderr, which PyTorch warnings do.
# Grades depend on exceptions only, so stderr output is dropped before grading.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"[\s\S]*"

c.Autograde.autograde_preprocessors = [
    GuardedExecute, IgnorePattern, ClearMetadataPreprocessor, RecordFlags, LimitOutput, SaveAutoGrades,
    AssignLatePenalties, CheckCellMetadata,
]

# Feedback shows each failed check's message, never the hidden test code (set enabled = False to
# release the tests with the feedback after the due date).
c.GenerateFeedback.preprocessors = [HideHiddenTests, GetGrades, CSSHTMLHeaderPreprocessor]
c.HideHiddenTests.enabled = True

# `nbgrader export --exporter=course_grading.PerCheckExport --to checks.csv`: one column per check.
c.PerCheckExport.autograded = str(HERE / "autograded")
c.PerCheckExport.submitted = str(HERE / "submitted")
