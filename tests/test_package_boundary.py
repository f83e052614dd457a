"""The packages' boundaries hold, as the import-linter contracts in pyproject.toml declare them: nothing in
autograder/ imports the course's tools, benchmarks or tests (a grading machine, a Dask worker or an
instructor's hub needs the package and the pinned environment, not this checkout's tooling), and the reference
module imports nothing else of the course (students install it alone)."""

import pytest

from tools.course import COURSE

pytestmark = pytest.mark.quick


def test_the_import_contracts_hold(capsys):
    from importlinter.cli import lint_imports

    # no_cache: import-linter would otherwise write its cache into the checkout.
    result = lint_imports(config_filename=str(COURSE.root / "pyproject.toml"), no_cache=True, no_logo=True)
    assert result == 0, capsys.readouterr().out
