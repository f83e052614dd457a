"""Build the course site with Jupyter Book 1, warnings as errors.

Two ways to get executed notebooks onto the site:

- `python -m tools.build_book` (what `make book` runs) lets Jupyter Book execute the lessons through its
  cache. The cache keys on a notebook's own code only, so a change to the reference module would leave
  stale outputs: we fingerprint the `gptcourse` package and clear the cache when it changes.
- `build_from_executed(...)` (what the test suite uses) takes notebooks that were already executed
  once by papermill and builds the site from them without running anything again.

Both need the npm packages (`npm ci`, which the Makefile runs): MathJax is served from the site itself.
The staged build copies what the site is built from: the configuration, `book/` (lessons, the site's
static files and its Sphinx extension), the student releases in `exercises/` (the assignment pages
link to them), never `solutions/`.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tools.notebooks import REPO, Execution, executed_name

BUILD = REPO / "_build"
MODULES = REPO / "gptcourse"
MATHJAX = REPO / "node_modules" / "mathjax"


def require_npm_packages() -> None:
    if not (MATHJAX / "es5" / "tex-mml-chtml.js").exists():
        raise SystemExit("node_modules/mathjax is missing: run `npm ci` (or `make book`, which runs it)")


def jupyter_book(source: Path, output: Path) -> None:
    """`jupyter-book build` with warnings as errors, nitpicky references and the full traceback."""
    command = [
        str(Path(sys.executable).with_name("jupyter-book")), "build", str(source),
        "--path-output", str(output), "--warningiserror", "--nitpick", "--keep-going", "--all",
    ]
    subprocess.run(command, check=True)


def modules_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted(MODULES.rglob("*.py")):
        digest.update(path.relative_to(REPO).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def build_in_place() -> Path:
    """Execute (through the cache) and build the site into _build/html."""
    require_npm_packages()
    stamp = BUILD / ".modules-fingerprint"
    fingerprint = modules_fingerprint()
    if not stamp.exists() or stamp.read_text() != fingerprint:
        shutil.rmtree(BUILD / ".jupyter_cache", ignore_errors=True)
    shutil.rmtree(BUILD / "html", ignore_errors=True)     # no stale page of a removed lesson survives
    jupyter_book(REPO, REPO)
    stamp.write_text(fingerprint)
    return BUILD / "html"


def build_from_executed(executions: dict[Path, Execution], stage: Path) -> Path:
    """Build the site from already executed notebooks, staged in `stage`; returns the html folder."""
    require_npm_packages()
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(REPO / name, stage / name)
    shutil.copytree(REPO / "book", stage / "book", ignore=shutil.ignore_patterns("__pycache__"))
    # Files outside book/ that pages include or offer for download.
    for extra in [*sorted((REPO / "exercises").glob("*/*.ipynb")), REPO / "autograder" / "mutation-report.md"]:
        (stage / extra.relative_to(REPO)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(extra, stage / extra.relative_to(REPO))
    (stage / "node_modules").mkdir()
    (stage / "node_modules" / "mathjax").symlink_to(MATHJAX, target_is_directory=True)
    for source, execution in executions.items():
        staged = stage / executed_name(source)
        if source.parent == REPO / "book":
            (stage / source.relative_to(REPO)).unlink(missing_ok=True)   # the .md the .ipynb replaces
            shutil.copy(execution.output, staged)
    config = yaml.safe_load((stage / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    (stage / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    jupyter_book(stage, stage)
    return stage / "_build" / "html"


def export_notebooks(dest: Path) -> Path:
    """The lessons as unexecuted .ipynb files (what Colab can open), with what they need beside them:
    the quizzes they load and the reference package they import. The deploy workflow publishes this
    folder as the `notebooks` branch."""
    import jupytext

    from tools.notebooks import lesson_notebooks

    shutil.rmtree(dest, ignore_errors=True)
    for lesson in lesson_notebooks():
        target = dest / lesson.relative_to(REPO).with_suffix(".ipynb")
        target.parent.mkdir(parents=True, exist_ok=True)
        jupytext.write(jupytext.read(lesson), target, fmt="ipynb")
    for folder in ("book/quizzes", "gptcourse"):
        if (REPO / folder).exists():
            shutil.copytree(REPO / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "requirements.txt"):
        shutil.copy(REPO / name, dest / name)
    return dest


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notebooks", type=Path, help="export the lessons as .ipynb into this folder instead")
    arguments = parser.parse_args()
    if arguments.notebooks:
        print(f"Lessons exported: {export_notebooks(arguments.notebooks.resolve())}")
    else:
        html = build_in_place()
        print(f"Site built: {html / 'index.html'}")
