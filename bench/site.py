"""Benchmark 2: `make book` (python -m tools.build_book) cold, warm, after a prose edit, after a module edit.

Runs in a scratch copy of the working tree, so the edits never touch the real lessons: the copy's
`gptcourse` comes first on PYTHONPATH, so its kernels import the copy's (edited) modules. Steps:

1. cold: no `_build` at all, every lesson executes;
2. warm: nothing changed (3 runs, the median reported);
3. prose: a sentence appended to the first lesson's text (expected: nothing executes; 3 runs);
4. `gptcourse/gpt2_weights.py` changed (expected: exactly the lessons that import it execute);
5. `gptcourse/model.py` changed (expected: every lesson that imports `gptcourse` executes).

Each step reports its wall time, which lessons executed and how long Sphinx took
(`_build/build-report.json`, written by `tools.build_book.build`).

    python -m bench.site
"""

from __future__ import annotations

import json
import re
import shutil
import sys

from bench.common import SCRATCH, copy_repository, machine, run, save, table, timed
from tools.course import Course

EDIT_NOTE = "\n\n<!-- changed by bench/site.py -->\nThis sentence was added by the build benchmark.\n"

# What a lesson's code says to import the loader, or anything of the package (read with a regex, not
# with the cache's own code: an independent check of which lessons must re-execute).
WEIGHTS_IMPORT = r"^\s*(from|import)\s+gptcourse(\.gpt2_weights|\s+import\s+.*gpt2_weights)"
PACKAGE_IMPORT = r"^\s*(from|import)\s+gptcourse"


def lessons_importing(repo, pattern: str) -> list[str]:
    """Lessons whose text imports what `pattern` matches (an independent check of the cache's answer)."""
    return [lesson.relative_to(repo).as_posix() for lesson in Course(repo).lessons()
            if re.search(pattern, lesson.read_text(), re.M)]


def main(repeat: int = 3) -> dict:
    repo = copy_repository(SCRATCH / "site" / "repo")
    env = {"PYTHONPATH": str(repo)}
    steps: dict = {}
    rows = []

    def build(step: str, expected: list[str] | None, edit=None, runs: int = 1) -> None:
        """Build `runs` times, each after `edit(run)`, and keep every run and the median wall time."""
        results = []
        for index in range(runs):
            if edit:
                edit(index)
            timing: dict = {}
            with timed(timing, step):
                run([sys.executable, "-m", "tools.build_book"], cwd=repo, env=env)
            report = json.loads((repo / "_build" / "build-report.json").read_text())
            result = {**timing[step], "executed": report["executed"], "sphinx": report["sphinx"],
                      "sphinx_s": report["seconds_sphinx"], "execute_s": report["seconds_execute"]}
            if expected is not None:
                result["as_expected"] = sorted(report["executed"]) == sorted(expected)
            results.append(result)
            print(f"{step}: {result['wall_s']} s, executed {report['executed'] or 'nothing'}", flush=True)
        walls = sorted(result["wall_s"] for result in results)
        steps[step] = {"wall_s": walls[len(walls) // 2], "runs": results, "expected_executed": expected,
                       "as_expected": all(result.get("as_expected", True) for result in results)}
        rows.append([step, len(results), steps[step]["wall_s"], walls[0], walls[-1],
                     len(results[-1]["executed"]), results[-1]["sphinx_s"], steps[step]["as_expected"]])

    shutil.rmtree(repo / "_build", ignore_errors=True)
    all_lessons = lessons_importing(repo, r".")
    build("cold", all_lessons)
    build("warm", [], runs=repeat)

    first = repo / all_lessons[0]

    def edit_prose(index: int) -> None:
        first.write_text(first.read_text() + EDIT_NOTE.replace("added", f"added (run {index})"))

    build("prose_edit", [], edit_prose, runs=repeat)

    def edit_module(path):
        return lambda index: path.write_text(path.read_text() + "\n# changed by bench/site.py\n")

    weights = repo / "gptcourse" / "gpt2_weights.py"
    build("gpt2_weights_edit", lessons_importing(repo, WEIGHTS_IMPORT), edit_module(weights))
    model = repo / "gptcourse" / "model.py"
    build("model_edit", lessons_importing(repo, PACKAGE_IMPORT), edit_module(model))

    summary = {
        "steps": steps,
        "budget_prose_edit_s": 15,
        "prose_edit_within_budget": steps["prose_edit"]["wall_s"] < 15,
        "module_edits_exact": steps["gpt2_weights_edit"]["as_expected"] and steps["model_edit"]["as_expected"],
    }
    print(table(rows, ["step", "runs", "median s", "min s", "max s", "lessons executed", "sphinx s", "as expected"]))
    print(f"load average {machine()['load_average']}")
    save("site", summary)
    return summary


if __name__ == "__main__":
    main()
