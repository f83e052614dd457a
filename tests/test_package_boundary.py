"""The grading package stands on its own: nothing in autograder/ imports the course's tools (tools/), which
hold the site, the lab and test support. A grading machine, a Dask worker or an instructor's hub needs the
package and the pinned environment, not this checkout's tooling."""

import ast

import pytest

from tools.course import COURSE

pytestmark = pytest.mark.quick


def imported_modules(path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return modules


def test_the_grading_package_imports_nothing_from_tools():
    offenders = {path.relative_to(COURSE.root).as_posix(): sorted(name for name in imported_modules(path)
                                                                  if name == "tools" or name.startswith("tools."))
                 for path in sorted(COURSE.autograder.rglob("*.py"))}
    assert not {path: names for path, names in offenders.items() if names}
