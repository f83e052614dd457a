"""Build the course site with Jupyter Book 1, warnings as errors.

Two ways to get executed notebooks onto the site:

- `python -m tools.build_book` (what `make book` runs) executes the lessons through our own cache
  (tools/cache.py: keyed on each lesson's code, the `gptcourse` modules it imports and the data files
  it reads; never on its prose), then builds the site from them like the test suite does. A
  prose-only edit starts no kernel; a changed module re-runs only the lessons that import it.
- `build_from_executed(...)` (what the test suite uses) takes notebooks that were already executed
  once by papermill and builds the site from them without running anything again.

Both need the npm packages (`npm ci`, which the Makefile runs): MathJax is served from the site itself.
The staged build copies what the site is built from: the configuration, `book/` (lessons, the site's
static files and its Sphinx extension), the student releases in `exercises/` (the assignment pages
link to them), never `solutions/`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tools.notebooks import REPO, Execution, executed_name

BUILD = REPO / "_build"
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


def site_inputs_fingerprint(executions: dict[Path, Execution]) -> str | None:
    """A digest of the working tree as git sees it (every file the site could be built from, and the
    build tools themselves) and of the executed lessons: equal digests build equal sites, so a second
    build with nothing changed can be skipped. None (never skip) without git."""
    try:
        listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                 cwd=REPO, capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return None
    digest = hashlib.sha256()
    for name in sorted(filter(None, listing.split("\0"))):
        path = REPO / name
        if path.is_file():
            digest.update(f"{name}\0".encode() + path.read_bytes())
    for source, execution in sorted(executions.items()):
        digest.update(f"{source.relative_to(REPO)}\0".encode() + execution.output.read_bytes())
    return digest.hexdigest()


def build_in_place(workers: int | None = None, force: bool = False) -> Path:
    """Execute the lessons through the execution cache and build the site into _build/html.

    Jupyter Book never executes anything here: the lessons that missed the cache run in parallel
    (tools.notebooks.execute_all), the rest get their cached outputs, and `build_from_executed` builds
    the site in `_build/site` (all of it, warnings as errors), which then replaces `_build/html`. When
    nothing the site is built from changed since the last successful build, Sphinx is skipped.
    What ran and what came from the cache is written to `_build/build-report.json`.
    """
    from tools.cache import execute_lessons
    from tools.notebooks import lesson_notebooks

    require_npm_packages()
    started = time.perf_counter()
    executions, report = execute_lessons(lesson_notebooks(), BUILD / "executed", workers)
    sphinx_started = time.perf_counter()
    html = BUILD / "html"
    stamp = BUILD / ".site-fingerprint"
    fingerprint = site_inputs_fingerprint(executions)
    if not force and fingerprint and html.is_dir() and stamp.exists() and stamp.read_text() == fingerprint:
        report["sphinx"] = "skipped: nothing changed since the last build"
    else:
        stamp.unlink(missing_ok=True)
        built = build_from_executed(executions, BUILD / "site")
        shutil.rmtree(html, ignore_errors=True)     # no stale page of a removed lesson survives
        built.rename(html)
        if fingerprint:
            stamp.write_text(fingerprint)
        report["sphinx"] = "built"
    report["seconds_sphinx"] = round(time.perf_counter() - sphinx_started, 3)
    report["seconds_total"] = round(time.perf_counter() - started, 3)
    (BUILD / "build-report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"Lessons executed: {len(report['executed'])}, from the cache: {len(report['from_cache'])}; "
          f"site {report['sphinx']}")
    return html


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
    parser.add_argument("--force", action="store_true", help="run Sphinx even if nothing changed")
    arguments = parser.parse_args()
    if arguments.notebooks:
        print(f"Lessons exported: {export_notebooks(arguments.notebooks.resolve())}")
    else:
        html = build_in_place(force=arguments.force)
        print(f"Site built: {html / 'index.html'}")
