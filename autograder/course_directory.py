"""Where the course keeps everything nbgrader reads and writes: nbgrader's CourseDirectory settings.

A traitlets configuration file, loaded by nbgrader_config.py (`load_subconfig`) and by the grading
package's `autograder.course.Course`, so the course id, the folders and the gradebook's address are written down
once. Paths are relative to the course root, the folder above this one, so a copy of the course (a scratch
course in the tests, a grading machine) describes itself. Loading this file changes nothing on disk.
"""

from pathlib import Path

c = get_config()  # noqa: F821 (provided by traitlets)

HERE = Path(__file__).resolve().parent

c.CourseDirectory.course_id = "gpt2-block"
c.CourseDirectory.root = str(HERE.parent)
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "autograder/submitted"
c.CourseDirectory.autograded_directory = "autograder/autograded"
c.CourseDirectory.feedback_directory = "autograder/feedback"
# nbgrader's own list of what it never copies from a source folder, and the catalog of known submissions that lies
# beside each master (autograder.course.CATALOG_FILE): the instructors', never the students'.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "catalog.yml"]
# Any SQLAlchemy URL works (a shared PostgreSQL server, say); a course's own SQLite file by default. nbgrader
# does not create the file's folder: the course's tools do (autograder.course.Course.prepare).
c.CourseDirectory.db_url = f"sqlite:///{HERE / 'gradebook' / 'gradebook.db'}"
# A local exchange folder, so release -> fetch -> submit -> collect works on one machine.
c.Exchange.root = str(HERE / "exchange")
