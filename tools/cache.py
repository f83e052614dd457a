"""Jupyter Book's execution cache, and the one thing it is missing: a lesson's imported modules.

Jupyter Book executes the lessons through jupyter-cache (`execute_notebooks: cache` in _config.yml; the
cache is `_build/.jupyter_cache`). jupyter-cache matches a notebook on its code cells and kernelspec, so
a prose-only edit re-executes nothing; but it cannot see what the code reads from outside the notebook.
This module adds that, on top of jupyter-cache rather than beside it:

- a lesson's *dependencies*: the `gptcourse` modules its code imports, followed through the package's
  own imports (`import gptcourse` runs `gptcourse/__init__.py`, which imports `model.py`), read with
  `ast` from the code cells, magics included; the data files its code names in a string literal
  (`"quizzes/01-layernorm.json"`); and the pinned environment, `requirements.txt`;
- every cache record written here carries the digest of those files (`data["dependencies"]`);
- before a build, `invalidate_stale` removes the record of each lesson whose dependencies changed since
  it ran, so that lesson, and only it, executes again;
- `execute_lessons` executes the lessons that have no record, in parallel (tools.notebooks.execute_all,
  with _config.yml's timeout), and caches each one that ran cleanly. Jupyter Book then finds every
  lesson in the cache and starts no kernel.

    python -m tools.cache            # each lesson: cached or not, the files it depends on
"""

from __future__ import annotations

import ast
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml

from tools.course import COURSE
from tools.notebooks import Execution, execute_all, read_notebook

PACKAGE = "gptcourse"
DEPENDENCIES = "dependencies"          # the key of the digest in a cache record's data
MYST_READER = {"type": "plugin", "name": "myst_nb_md"}    # myst-nb's reader, as Jupyter Book registers it


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


def module_file(name: str, root: Path = COURSE.root) -> Path | None:
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


def package_dependencies(names: set[str], package: str = PACKAGE, root: Path = COURSE.root) -> set[Path]:
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


# --- the dependencies -------------------------------------------------------------------------------

def code_cells(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def named_data_files(trees: list[ast.AST], folder: Path, root: Path = COURSE.root) -> set[Path]:
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
    """What a lesson's outputs depend on: jupyter-cache's hash of its code (`notebook`), and the digest
    of the files outside the notebook that it reads (`dependencies`)."""

    source: Path
    notebook: str
    dependencies: str
    modules: list[Path] = field(default_factory=list)     # the gptcourse files the lesson imports
    data: list[Path] = field(default_factory=list)        # data files its code names

    @property
    def digest(self) -> str:
        return hashlib.sha256(f"{self.notebook}\0{self.dependencies}".encode()).hexdigest()


def notebook_hash(notebook: nbformat.NotebookNode) -> str:
    """jupyter-cache's hash of a notebook: its code cells and kernelspec, never its prose or outputs."""
    from jupyter_cache.cache.main import JupyterCacheBase

    # The method reads nothing of a cache instance: called on the class, with the defaults
    # match_cache_notebook uses (notebook metadata: kernelspec; every cell's metadata).
    return JupyterCacheBase.create_hashed_notebook(None, notebook)[1]


def notebook_key(source: Path, notebook: nbformat.NotebookNode | None = None, root: Path = COURSE.root) -> Key:
    """The lesson's key; `root` is the repository holding the `gptcourse` package (tests use a scratch one)."""
    notebook = notebook if notebook is not None else read_notebook(source)
    sources = [cell.source for cell in code_cells(notebook)]
    trees = []
    for text in sources:
        try:
            trees.append(ast.parse(python_source(text)))
        except SyntaxError:
            continue             # the cell fails when run; jupyter-cache's hash still covers its source
    imported = set().union(*(imported_modules(tree) for tree in trees)) if trees else set()
    modules = sorted(package_dependencies(imported, PACKAGE, root))
    data = sorted(named_data_files(trees, source.parent, root))
    digest = hashlib.sha256()

    def add(label: str, payload: bytes) -> None:
        digest.update(f"{label}\0{len(payload)}\0".encode())
        digest.update(payload)

    for path in modules + data:
        add(path.relative_to(root).as_posix(), path.read_bytes())
    requirements = root / "requirements.txt"
    if requirements.exists():
        add("requirements.txt", requirements.read_bytes())
    return Key(source, notebook_hash(notebook), digest.hexdigest(), modules, data)


# --- the cache -------------------------------------------------------------------------------------

@dataclass
class Settings:
    """_config.yml's `execute:` section, the one Jupyter Book builds with."""

    mode: str
    cache: Path
    timeout: int | None
    allow_errors: bool


def settings(root: Path = COURSE.root) -> Settings:
    execute = yaml.safe_load((root / "_config.yml").read_text()).get("execute", {})
    return Settings(str(execute.get("execute_notebooks")), root / execute.get("cache", "_build/.jupyter_cache"),
                    execute.get("timeout"), bool(execute.get("allow_errors", False)))


def open_cache(path: Path | None = None):
    """The jupyter-cache that Jupyter Book reads (created if missing)."""
    from jupyter_cache import get_cache

    path = Path(path or settings().cache)
    path.parent.mkdir(parents=True, exist_ok=True)
    return get_cache(str(path))


def cached_record(cache, notebook: nbformat.NotebookNode):
    """The cache record matching `notebook`'s code, or None."""
    try:
        return cache.match_cache_notebook(notebook)
    except KeyError:
        return None


def invalidate_stale(cache, keys: dict[Path, Key]) -> list[Path]:
    """Remove the record of every notebook whose dependencies changed since it ran (or that a run
    outside this module cached, with no digest); returns those notebooks."""
    from jupyter_cache.cache.db import NbCacheRecord

    stale = []
    for source, key in keys.items():
        try:
            record = NbCacheRecord.record_from_hashkey(key.notebook, cache.db)
        except KeyError:
            continue
        if record.data.get(DEPENDENCIES) != key.dependencies:
            cache.remove_cache(record.pk)
            stale.append(source)
    return stale


def forget_older_runs(cache, source: Path, keep: str) -> None:
    """Remove the records of earlier versions of `source` (one record per lesson: the current one)."""
    for record in cache.list_cache_records():
        if record.uri == str(source) and record.hashkey != keep:
            cache.remove_cache(record.pk)


def store(cache, key: Key, executed: nbformat.NotebookNode, seconds: float = 0.0) -> None:
    """Cache an executed notebook, with the digest of its dependencies; its project entry (what
    `jcache project list` shows) too."""
    from jupyter_cache.base import CacheBundleIn

    if key.source.suffix == ".md":
        cache.add_nb_to_project(str(key.source), read_data=MYST_READER)
    else:
        cache.add_nb_to_project(str(key.source))
    record = cache.cache_notebook_bundle(
        CacheBundleIn(executed, str(key.source), data={"execution_seconds": seconds, DEPENDENCIES: key.dependencies}),
        check_validity=False, overwrite=True)
    if record.hashkey != key.notebook:
        raise ValueError(f"{key.source}: executing it changed what jupyter-cache hashes")
    forget_older_runs(cache, key.source, keep=record.hashkey)


def executed_notebook(cache, source: Path) -> nbformat.NotebookNode:
    """The lesson as it is now, with the outputs of its cached run (what Jupyter Book renders)."""
    _, merged = cache.merge_match_into_notebook(read_notebook(source))
    return merged


@dataclass
class Report:
    executed: list[Path] = field(default_factory=list)
    from_cache: list[Path] = field(default_factory=list)
    invalidated: list[Path] = field(default_factory=list)
    executions: dict[Path, Execution] = field(default_factory=dict)
    seconds_keys: float = 0.0
    seconds_execute: float = 0.0

    @property
    def failed(self) -> dict[Path, str]:
        return {path: run.error for path, run in self.executions.items() if run.error}

    def as_json(self, root: Path = COURSE.root) -> dict:
        names = lambda paths: [path.relative_to(root).as_posix() for path in paths]  # noqa: E731
        return {"executed": names(self.executed), "from_cache": names(self.from_cache),
                "invalidated": names(self.invalidated),
                "failed": {path.relative_to(root).as_posix(): error for path, error in self.failed.items()},
                "seconds_keys": self.seconds_keys, "seconds_execute": self.seconds_execute}


def execute_lessons(lessons: list[Path], out_dir: Path, workers: int | None = None, force: bool = False,
                    cache_path: Path | None = None, root: Path = COURSE.root, extra: list[Path] = (),
                    threads: int | None = None) -> Report:
    """Bring the execution cache up to date for `lessons`: drop the records whose dependencies changed,
    execute (in one parallel batch) every lesson without a record, or all of them with `force`, and
    cache each that ran cleanly. `extra` notebooks (the tests' assignment masters) run in the same batch
    and are not cached. The executed copies of what ran are in `out_dir`."""
    started = time.perf_counter()
    config = settings(root)
    cache = open_cache(cache_path or config.cache)
    notebooks = {lesson: read_notebook(lesson) for lesson in lessons}
    keys = {lesson: notebook_key(lesson, notebooks[lesson], root) for lesson in lessons}
    report = Report(invalidated=invalidate_stale(cache, keys))
    report.executed = [lesson for lesson in lessons if force or cached_record(cache, notebooks[lesson]) is None]
    report.from_cache = [lesson for lesson in lessons if lesson not in report.executed]
    keyed = time.perf_counter()
    report.executions = execute_all(report.executed + list(extra), out_dir, workers, config.timeout, root, threads)
    for lesson, run in report.executions.items():
        if lesson in keys and (run.error is None or config.allow_errors):
            store(cache, keys[lesson], nbformat.read(run.output, as_version=4), run.seconds)
    report.seconds_keys = round(keyed - started, 3)
    report.seconds_execute = round(time.perf_counter() - keyed, 3)
    return report


def describe() -> list[dict]:
    cache = open_cache()
    rows = []
    for lesson in COURSE.lessons():
        key = notebook_key(lesson)
        record = cached_record(cache, read_notebook(lesson))
        rows.append({
            "lesson": lesson.relative_to(COURSE.root).as_posix(), "notebook": key.notebook[:20],
            "dependencies": key.dependencies[:20],
            "cached": record is not None and record.data.get(DEPENDENCIES) == key.dependencies,
            "modules": [path.relative_to(COURSE.root).as_posix() for path in key.modules],
            "data": [path.relative_to(COURSE.root).as_posix() for path in key.data],
        })
    return rows


if __name__ == "__main__":
    print(json.dumps(describe(), indent=2))
