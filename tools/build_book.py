"""Build the course site with Jupyter Book 1, warnings as errors.

Two ways to get executed notebooks onto the site:

- `python -m tools.build_book` (what `make book` runs) lets Jupyter Book execute the lessons through its
  cache. The cache keys on a notebook's own code only, so a change to the reference module would leave
  stale outputs: we fingerprint the `gptcourse` package and clear the cache when it changes.
- `build_from_executed(...)` (what the test suite uses) takes notebooks that were already executed
  once by papermill and builds the site from them without running anything again.
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
    stamp = BUILD / ".modules-fingerprint"
    fingerprint = modules_fingerprint()
    if not stamp.exists() or stamp.read_text() != fingerprint:
        shutil.rmtree(BUILD / ".jupyter_cache", ignore_errors=True)
    jupyter_book(REPO, REPO)
    stamp.write_text(fingerprint)
    return BUILD / "html"


def build_from_executed(executions: dict[Path, Execution], stage: Path) -> Path:
    """Build the site from already executed notebooks, staged in `stage`; returns the html folder."""
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(REPO / name, stage / name)
    shutil.copytree(REPO / "book", stage / "book")
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


if __name__ == "__main__":
    html = build_in_place()
    print(f"Site built: {html / 'index.html'}")
