"""What an nbgrader command is to the plugins it runs, for the plugins' unit tests: the holder of the course's
folders (its CourseDirectory), which a plugin finds by walking up its parents (autograder.cells.course_directory)."""

from __future__ import annotations

from nbgrader.coursedir import CourseDirectory
from traitlets.config import Configurable


class NbgraderCommand(Configurable):
    """A stand-in for nbgrader's converter or export app, with the course at `root` and its folders as given."""

    def __init__(self, root, **folders):
        super().__init__()
        self.coursedir = CourseDirectory(root=str(root), **folders)
