"""The grading kernel as nbclient asks for it (autograder/plugins/sandbox_kernels.py), without starting one: the
kernelspec declared, not installed, with the courses its sandbox hides, the limits and the grader's process handed
to the launcher, and the courses a preprocessor hides inside and outside nbgrader."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from nbconvert.preprocessors import Preprocessor
from nbgrader.coursedir import CourseDirectory
from traitlets.config import LoggingConfigurable

from autograder import grading_environment
from autograder.plugins.sandbox_kernels import SandboxKernelSpecs, hidden_courses

pytestmark = pytest.mark.quick


def test_the_grading_kernel_is_declared_with_the_courses_it_hides_and_the_limits_it_applies():
    courses = ["/srv/course", "/home/instructor/course"]
    spec = SandboxKernelSpecs(courses=courses, warm=False).get_kernel_spec(grading_environment.KERNEL_NAME)
    launcher = grading_environment.PACKAGE / "sandbox"
    assert Path(spec.resource_dir) == launcher and (launcher / "sandboxed_kernel.py").is_file()
    assert spec.argv == [*grading_environment.KERNELSPEC["argv"], os.pathsep.join(courses)]
    assert spec.interrupt_mode == "message"               # bwrap passes no SIGINT on
    assert spec.env == {**grading_environment.limit_variables(),
                        grading_environment.GRADER_PID_VARIABLE: str(os.getpid())}
    assert grading_environment.WARM_PARENT_VARIABLE not in spec.env      # a cold kernel: no warm parent asked


def test_any_other_kernel_is_jupyters(tmp_path, monkeypatch):
    folder = tmp_path / "kernels" / "other"
    folder.mkdir(parents=True)
    (folder / "kernel.json").write_text('{"argv": ["python", "-m", "other"], "display_name": "Other", '
                                        '"language": "python"}')
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    spec = SandboxKernelSpecs(warm=False).get_kernel_spec("other")
    assert spec.argv == ["python", "-m", "other"] and not spec.env


class Converter(LoggingConfigurable):
    """Stands for an nbgrader converter: what holds the CourseDirectory a preprocessor's parents lead to."""

    def __init__(self, root: str):
        super().__init__()
        self.coursedir = CourseDirectory(root=root)


def test_a_preprocessor_hides_the_course_it_grades_and_the_instructors_original(monkeypatch):
    monkeypatch.delenv(grading_environment.ORIGINAL_COURSE_VARIABLE, raising=False)
    alone = Preprocessor()
    assert hidden_courses(alone) == []                     # outside nbgrader (the executor on its own)
    inside = Preprocessor(parent=Converter("/srv/copy-of-the-course"))
    assert hidden_courses(inside) == ["/srv/copy-of-the-course"]
    # On a class grader's worker, which grades a copy, the instructor's own course is hidden too.
    monkeypatch.setenv(grading_environment.ORIGINAL_COURSE_VARIABLE, "/home/instructor/course")
    assert hidden_courses(inside) == ["/srv/copy-of-the-course", "/home/instructor/course"]
    assert hidden_courses(alone) == ["/home/instructor/course"]
