"""The one writer of a graded submission into the course: nbgrader's own gradebook writers, run by the client.

`nbgrader autograde` writes the gradebook from inside its pipeline: its last preprocessors, SaveAutoGrades and
AssignLatePenalties, read each autograded notebook and write its scores, "No response." comments and late
penalty. The class grader's workers run the same pipeline without those two (grading_worker.py takes them
out, and checks nothing comes after them), and return the autograded folder. Here the client, the only
process that writes the course's gradebook and its `autograded/` folder, does what `nbgrader autograde` does
around them (the student, the submission and its timestamp, a notebook not handed in scored zero, as
nbgrader's Autograde.init_assignment does) and then runs the configured writers, with the course's own
configuration, on each notebook exactly as the worker returned it. So both front doors write every row with
the same code, and what a grader set in the formgrader (a flag, a manual score or comment) is never touched:
nbgrader's writers do not touch it.
"""

from __future__ import annotations

import warnings

GRADEBOOK_WRITERS = ("SaveAutoGrades", "AssignLatePenalties")     # nbgrader's preprocessors that write rows


def step_class(step) -> type:
    """A pipeline entry as nbgrader accepts it (a class, or its import string) -> the class."""
    from traitlets.utils.importstring import import_item

    return import_item(step) if isinstance(step, str) else step


def writes_gradebook(preprocessor) -> bool:
    """Whether an entry of `c.Autograde.autograde_preprocessors` is one of nbgrader's gradebook writers, or a
    course's subclass of one."""
    from nbgrader import preprocessors

    return issubclass(step_class(preprocessor), tuple(getattr(preprocessors, name) for name in GRADEBOOK_WRITERS))


def checks_only(preprocessor) -> bool:
    """nbgrader's CheckCellMetadata, which raises on broken metadata and changes nothing (nbgrader's default
    pipeline runs it after the writers)."""
    from nbgrader.preprocessors import CheckCellMetadata

    return issubclass(step_class(preprocessor), CheckCellMetadata)


def without_writers(pipeline: list) -> list:
    """The autograde pipeline a worker runs: the configured one without its gradebook writers, which must be
    its last steps but for a check (the client runs them afterwards, so a step after them that changed the
    notebook would change it after they read it under `nbgrader autograde` and before under the class
    grader)."""
    kept = [step for step in pipeline if not writes_gradebook(step)]
    after = pipeline[next((i for i, step in enumerate(pipeline) if writes_gradebook(step)), len(pipeline)):]
    if any(not writes_gradebook(step) and not checks_only(step) for step in after):
        raise ValueError("c.Autograde.autograde_preprocessors: SaveAutoGrades and AssignLatePenalties must come "
                         "last (the class grader runs them after the rest, on the client)")
    return kept


def prepare_gradebook(course, students: list[str]) -> None:
    """Create the course's gradebook if needed, and the rows nbgrader creates on first use (every student,
    and the course nbgrader's preprocessors open the gradebook as, "default_course"), so the gradebook
    ends up as `nbgrader autograde` leaves it."""
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url):
        pass
    with Gradebook(course.db_url, course.course_id) as gradebook:
        for student in students:
            gradebook.update_or_create_student(student)


def record(course, outcome, config) -> None:
    """Write a worker's outcome into the course with the course's `config`: the old autograded folder
    removed, the gradebook written, then the new folder (which is what marks the submission graded, so an
    interruption, or writers that refuse the result, leave it to be graded again). A failed submission gets
    its submission row and no autograded folder, as a failed `nbgrader autograde` leaves it."""
    from nbgrader.api import Gradebook
    from nbgrader.utils import rmtree

    from autograder.classgrader.grading_kit import write_folder

    assignment, student = outcome.assignment, outcome.student
    graded = course.path("autograded", student, assignment)
    if graded.exists():          # first: until the new folder is written, the submission counts as ungraded
        rmtree(str(graded))
    notebooks: list[str] = []
    with Gradebook(course.db_url, course.course_id) as gradebook, warnings.catch_warnings():
        # nbgrader's add_submission trips SQLAlchemy's "not in session" autoflush warning while it builds a
        # submission's rows (stock autograde too); the rows are written all the same.
        warnings.filterwarnings("ignore", message=r".*not in session, add operation along")
        gradebook.update_or_create_student(student)
        stamp = {"timestamp": outcome.timestamp} if outcome.timestamp is not None else {}
        gradebook.update_or_create_submission(assignment, student, **stamp)
        if outcome.success:
            notebooks = [notebook.name for notebook in gradebook.find_assignment(assignment).notebooks]
            for name in notebooks:
                if f"{name}.ipynb" not in outcome.autograded:    # not handed in: zero, as nbgrader scores it
                    for grade in gradebook.find_submission_notebook(name, assignment, student).grades:
                        grade.auto_score, grade.needs_manual_grade = 0, False
            gradebook.db.commit()
    for name in notebooks:
        if f"{name}.ipynb" in outcome.autograded:
            write_grades(course, config, assignment, student, name, outcome.autograded[f"{name}.ipynb"][0])
    if outcome.success:
        write_folder(graded, outcome.autograded)


def write_grades(course, config, assignment: str, student: str, notebook: str, data: bytes) -> None:
    """Run the course's configured gradebook writers on one autograded notebook, as nbgrader's Autograde
    converter runs them (the same resources), with the notebook's bytes as the worker wrote them."""
    import nbformat

    from autograder import bounded

    if len(data) > bounded.autograded_limit():
        raise bounded.Refused(f"{assignment}/{student}/{notebook}.ipynb came back larger than any grader writes")
    nb = nbformat.reads(data.decode("utf-8"), as_version=nbformat.NO_CONVERT)
    resources = {"nbgrader": {"notebook": notebook, "assignment": assignment, "student": student,
                              "db_url": course.db_url}}
    for step in grading_pipeline(config):
        if writes_gradebook(step):
            nb, resources = step_class(step)(config=config).preprocess(nb, resources)


def grading_pipeline(config, passes: str = "autograde_preprocessors") -> list:
    """The course's configured Autograde `passes` (its autograde or its sanitize preprocessors; nbgrader's
    default when the course sets none)."""
    from nbgrader.converters import Autograde

    if passes in config.Autograde:
        return list(config.Autograde[passes])
    return list(Autograde.class_traits()[passes].default())
