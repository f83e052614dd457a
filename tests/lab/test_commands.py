"""One documented command per role: the Makefile targets run the launcher the browser tests start, and
the landing page and the instructors' page give them."""

from __future__ import annotations

import re

import pytest

from tools.course import REPO

pytestmark = pytest.mark.quick


def recipe(target: str) -> str:
    match = re.search(rf"^{target}:.*\n\t(.+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert match, f"the Makefile has no `{target}` target"
    return match.group(1)


def test_make_targets_run_the_launcher_the_browser_tests_use():
    assert "-m tools.lab student" in recipe("student")
    assert "-m tools.lab instructor" in recipe("instructor")
    assert "-m tools.hub demo" in recipe("hub")                    # tests/lab/test_hub.py prepares with tools.hub


def test_landing_and_instructors_pages_give_each_role_its_command():
    assert "make student" in (REPO / "book" / "index.md").read_text()
    instructors = (REPO / "book" / "instructors.md").read_text()
    assert "make instructor" in instructors and "make student" in instructors and "make hub" in instructors
