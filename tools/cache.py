"""The lessons' execution cache: run a lesson again only when something its outputs depend on changed.

Jupyter Book's own cache keys on a notebook's code alone, so it misses a change to the `gptcourse`
module a lesson imports (and clearing it whenever any module changes re-runs every lesson). This cache
keys each lesson on what can change its outputs:

- the sources of its code cells, in order (prose is not part of the key: editing it re-runs nothing);
- the kernel it runs in;
- the contents of every `gptcourse` module it imports, followed through the package's own imports
  (`import gptcourse` runs `gptcourse/__init__.py`, which imports `model.py`; importing
  `gptcourse.gpt2_weights` runs the package's `__init__.py` first, then `gpt2_weights.py`, which
  imports `model.py`). Imports are read with `ast` from the code cells, magics included;
- the data files a code cell names by a string literal (for example a quiz's JSON) that exist next to
  the lesson;
- `requirements.txt`, the pinned environment the lesson runs in.

On a hit, the lesson's current text gets the cached outputs copied onto its code cells: a prose-only
edit rebuilds the site without starting a kernel. Entries live in `_build/.execution-cache/`, a few
per lesson (the most recently used).

    python -m tools.cache            # each lesson: its key, hit or miss, the modules it depends on
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tools.notebooks import REPO, read_notebook

PACKAGE = "gptcourse"
KERNEL = "python3"                    # what tools.notebooks.execute runs every notebook in
CACHE = REPO / "_build" / ".execution-cache"
KEEP_PER_LESSON = 3                   # entries kept per lesson, most recently used first


# --- which gptcourse modules a piece of code imports -------------------------------------------------

def python_source(cell_source: str) -> str:
    """A code cell as plain Python: IPython magics (`%pip ...`, `!ls`) become ordinary calls."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(cell_source)


def imported_modules(tree: ast.AST, package: str | None = None) -> set[str]:
    """Dotted names of every module an AST imports, wherever the import sits (a try, a function...).

    `from a.b import c` yields `a.b` and `a.b.c` (c may be a submodule; callers keep only real files).
    `package` resolves relative imports (`from . import x`) inside a package's own modules.
    """
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if not package:
                    continue
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def module_file(name: str, root: Path = REPO) -> Path | None:
    """The file that defines module `name` under `root` (a package's __init__.py), if there is one."""
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def with_parents(name: str) -> list[str]:
    """Importing `a.b.c` runs `a`, then `a.b`, then `a.b.c`."""
    parts = name.split(".")
    return [".".join(parts[: index + 1]) for index in range(len(parts))]


def package_dependencies(names: set[str], package: str = PACKAGE, root: Path = REPO) -> set[Path]:
    """Every file of `package` that importing `names` executes: the modules themselves, their parent
    packages' __init__.py, and whatever those import in turn (followed with `ast` to a fixed point)."""
    pending = [name for imported in names for name in with_parents(imported)
               if name == package or name.startswith(package + ".")]
    seen: set[str] = set()
    files: set[Path] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        path = module_file(name, root)
        if path is None:
            continue                  # `from gptcourse import GPT`: a name, not a submodule
        files.add(path)
        own_package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        for imported in imported_modules(tree, own_package):
            pending += [dep for dep in with_parents(imported) if dep == package or dep.startswith(package + ".")]
    return files


# --- the key ---------------------------------------------------------------------------------------

def code_cells(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def named_data_files(trees: list[ast.AST], folder: Path, root: Path = REPO) -> set[Path]:
    """Files next to the notebook that a code cell names in a string literal, e.g. "quizzes/01.json"."""
    files = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and 0 < len(node.value) < 200 \
                    and "\n" not in node.value:
                try:
                    candidate = (folder / node.value).resolve()
                    if candidate.is_file() and candidate.is_relative_to(root) and candidate.suffix != ".py":
                        files.add(candidate)
                except (OSError, ValueError):
                    continue
    return files


@dataclass
class Key:
    source: Path
    digest: str
    modules: list[Path]          # the gptcourse files the lesson's outputs depend on
    data: list[Path]             # data files its code names

    @property
    def entry(self) -> Path:
        return CACHE / f"{self.source.stem}-{self.digest[:20]}.ipynb"


def notebook_key(source: Path, notebook: nbformat.NotebookNode | None = None, root: Path = REPO) -> Key:
    """The lesson's key; `root` is the repository holding the `gptcourse` package (tests use a scratch one)."""
    notebook = notebook if notebook is not None else read_notebook(source)
    sources = [cell.source for cell in code_cells(notebook)]
    trees = []
    for text in sources:
        try:
            trees.append(ast.parse(python_source(text)))
        except SyntaxError:
            continue             # the cell fails when run; its source is still part of the key
    imported = set().union(*(imported_modules(tree) for tree in trees)) if trees else set()
    modules = sorted(package_dependencies(imported, PACKAGE, root))
    data = sorted(named_data_files(trees, source.parent, root))
    digest = hashlib.sha256()

    def add(label: str, payload: bytes) -> None:
        digest.update(f"{label}\0{len(payload)}\0".encode())
        digest.update(payload)

    add("kernel", KERNEL.encode())
    for text in sources:
        add("cell", text.encode())
    for path in modules + data:
        add(path.relative_to(root).as_posix(), path.read_bytes())
    requirements = root / "requirements.txt"
    if requirements.exists():
        add("requirements.txt", requirements.read_bytes())
    return Key(source, digest.hexdigest(), modules, data)


# --- storing and applying outputs ------------------------------------------------------------------

def lookup(key: Key) -> nbformat.NotebookNode | None:
    if not key.entry.exists():
        return None
    try:
        cached = nbformat.read(key.entry, as_version=4)
    except Exception:                          # a damaged entry is a miss
        return None
    os.utime(key.entry)                        # most recently used
    return cached


def store(key: Key, executed: Path) -> None:
    """Keep an executed notebook under its key (written atomically), and prune old entries."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("wb", dir=CACHE, suffix=".tmp", delete=False) as handle:
        handle.write(executed.read_bytes())
    os.replace(handle.name, key.entry)
    entries = sorted(CACHE.glob(f"{key.source.stem}-*.ipynb"), key=lambda path: path.stat().st_mtime, reverse=True)
    for old in entries[KEEP_PER_LESSON:]:
        old.unlink(missing_ok=True)


def with_outputs(fresh: nbformat.NotebookNode, executed: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The fresh notebook (current prose and cell metadata) with the executed one's outputs."""
    fresh_code, executed_code = code_cells(fresh), code_cells(executed)
    if [cell.source for cell in fresh_code] != [cell.source for cell in executed_code]:
        raise ValueError("the cached notebook's code differs from the lesson's")
    for cell, done in zip(fresh_code, executed_code):
        cell.outputs = done.get("outputs", [])
        cell.execution_count = done.get("execution_count")
    for name in ("kernelspec", "language_info"):
        if name in executed.metadata:
            fresh.metadata[name] = executed.metadata[name]
    for index, cell in enumerate(fresh.cells):
        cell["id"] = f"cell-{index}"      # jupytext makes random ids: the same lesson must give the same file
    return fresh


def describe() -> list[dict]:
    from tools.notebooks import lesson_notebooks

    rows = []
    for lesson in lesson_notebooks():
        key = notebook_key(lesson)
        rows.append({
            "lesson": lesson.relative_to(REPO).as_posix(), "key": key.digest[:20],
            "cached": key.entry.exists(),
            "modules": [path.relative_to(REPO).as_posix() for path in key.modules],
            "data": [path.relative_to(REPO).as_posix() for path in key.data],
        })
    return rows


# --- executing the lessons through the cache ---------------------------------------------------------

def execute_lessons(lessons: list[Path], out_dir: Path, workers: int | None = None) -> tuple[dict, dict]:
    """Executed copies of `lessons` in `out_dir`, each from the cache or from a fresh run (the misses
    run in parallel with tools.notebooks.execute_all). Returns ({lesson: Execution}, a report)."""
    import shutil
    import time

    from tools.notebooks import Execution, execute_all, executed_name

    started = time.perf_counter()
    keys = {lesson: notebook_key(lesson) for lesson in lessons}
    fresh = {lesson: read_notebook(lesson) for lesson in lessons}
    cached = {lesson: lookup(key) for lesson, key in keys.items()}
    misses = [lesson for lesson in lessons if cached[lesson] is None]
    keyed = time.perf_counter()

    runs = execute_all(misses, out_dir / ".runs", workers) if misses else {}
    failed = {lesson: run.error for lesson, run in runs.items() if run.error}
    if failed:
        raise SystemExit("lessons failed to execute (nothing was cached for them):\n" + "\n".join(
            f"  {lesson.relative_to(REPO)}: {error}" for lesson, error in failed.items()))
    for lesson, run in runs.items():
        store(keys[lesson], run.output)
        cached[lesson] = nbformat.read(run.output, as_version=4)
    executed = time.perf_counter()

    executions = {}
    for lesson in lessons:
        output = out_dir / executed_name(lesson)
        output.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(with_outputs(fresh[lesson], cached[lesson]), output)
        executions[lesson] = Execution(lesson, output)
    shutil.rmtree(out_dir / ".runs", ignore_errors=True)
    report = {
        "executed": [lesson.relative_to(REPO).as_posix() for lesson in misses],
        "from_cache": [lesson.relative_to(REPO).as_posix() for lesson in lessons if lesson not in misses],
        "seconds_keys": round(keyed - started, 3),
        "seconds_execute": round(executed - keyed, 3),
        "seconds_total": round(time.perf_counter() - started, 3),
    }
    return executions, report


if __name__ == "__main__":
    print(json.dumps(describe(), indent=2))
