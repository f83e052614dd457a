"""The packages' boundaries hold, as the import-linter contracts in pyproject.toml declare them: nothing in
autograder/ imports the course's tools, benchmarks or tests (a grading machine, a Dask worker or an
instructor's hub needs the package and the pinned environment, not this checkout's tooling), and the reference
module imports nothing else of the course (students install it alone)."""

from pathlib import Path

import pytest

from tools.course import COURSE

pytestmark = pytest.mark.quick


def test_the_import_contracts_hold(capsys):
    from importlinter.cli import lint_imports

    # no_cache: import-linter would otherwise write its cache into the checkout.
    result = lint_imports(config_filename=str(COURSE.root / "pyproject.toml"), no_cache=True, no_logo=True)
    assert result == 0, capsys.readouterr().out


def test_an_install_holds_every_folder_of_the_grading_package():
    """A plain install (`pip install .`, a wheel) has every Python file of the package: each folder of code is a
    package pyproject.toml's find includes, or data it declares (the sandbox's stub of the reference module)."""
    import fnmatch
    import subprocess
    import tomllib

    from setuptools import find_packages

    settings = tomllib.loads((COURSE.root / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = set(find_packages(str(COURSE.root), include=settings["packages"]["find"]["include"]))
    data = settings["package-data"]
    tracked = subprocess.run(["git", "ls-files", "autograder"], cwd=COURSE.root, capture_output=True, text=True,
                             check=True).stdout.split()                # not a course's hand-ins, when graded here
    for path in (COURSE.root / name for name in tracked if name.endswith(".py")):
        folder = path.parent.relative_to(COURSE.root)
        package = ".".join(folder.parts)
        owners = [name for name in data if package.startswith(name + ".") or package == name]
        as_data = any(fnmatch.fnmatch(str(path.relative_to(COURSE.root / Path(*owner.split(".")))), pattern)
                      for owner in owners for pattern in data[owner])
        assert package in packages or as_data, f"{path.relative_to(COURSE.root)} would be left out of an install"
