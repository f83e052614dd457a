"""nbgrader configuration for the course. Run every nbgrader command from this folder (autograder/).

The instructor master of each assignment lives in ../solutions, the student release that
`nbgrader generate_assignment` produces in ../exercises. Everything nbgrader writes while grading
(submissions, autograded copies, feedback, the gradebook, the local exchange) goes under this folder
and is git-ignored.
"""

from pathlib import Path

HERE = Path(__file__).resolve().parent
COURSE_ROOT = HERE.parent

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

# Torch notebooks need more than nbgrader's default 30 s for a cell on a slow laptop, but a
# hanging cell must not stall a whole class: 120 s per cell.
c.Execute.timeout = 120

# Stock nbgrader scores a test cell 0 if it writes anything to stderr, which PyTorch warnings do.
# Grades depend on exceptions only, so stderr output is dropped before grading.
c.IgnorePattern.pattern = r"[\s\S]*"
