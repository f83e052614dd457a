"""The grading configuration fails closed, and the grader page states the limits the code applies."""

from __future__ import annotations

import os
import sys

from tools import grading

sys.path.insert(0, str(grading.REPO / "autograder"))

import grading_limits  # noqa: E402


def test_the_grader_page_shows_the_limits_the_grader_applies():
    page = (grading.REPO / "book" / "grader.md").read_text()
    assert grading_limits.markdown_table() in page


def test_each_limit_can_be_changed_by_its_variable(monkeypatch):
    monkeypatch.setenv("COURSE_GRADING_MEMORY_GB", "1.5")
    assert grading_limits.value("COURSE_GRADING_MEMORY_GB") == 1.5
    monkeypatch.delenv("COURSE_GRADING_MEMORY_GB")
    assert grading_limits.value("COURSE_GRADING_MEMORY_GB") == 4


def test_grading_refuses_with_a_clear_message_where_the_sandbox_cannot_start(tmp_path):
    """In a container that blocks user namespaces bwrap exits at once; nbgrader must stop, not grade
    every student into a dead kernel (and never grade unsandboxed)."""
    course = grading.make_course(tmp_path / "course")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    result = grading.nbgrader(course, "generate_assignment", "01-layernorm", "--force", check=False, env=env)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "cannot start here" in output and "No permissions to creating new namespace" in output
    assert not (course / "exercises" / "01-layernorm").exists()


def test_an_error_in_the_configuration_stops_nbgrader_instead_of_grading_with_defaults(tmp_path):
    course = grading.make_course(tmp_path / "course")
    (course / "autograder" / "course_grading.py").write_text("raise ImportError('broken plugin')\n")
    result = grading.nbgrader(course, "generate_assignment", "01-layernorm", "--force", check=False)
    assert result.returncode != 0
    assert "nbgrader_config.py failed, so nothing is graded" in result.stdout + result.stderr
