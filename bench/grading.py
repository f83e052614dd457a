"""Benchmarks 3 and 4: autograding one full submission, and a class, stock nbgrader against ours.

Both run in scratch copies of the course made like the test suite's (`tools.grading.make_course`,
then `nbgrader generate_assignment` for every assignment), never in the real gradebook.

3. One full submission (every assignment, one student, the master solutions): stock
   `nbgrader autograde A` for each assignment in turn, against `python -m autograder.classgrader all`.
4. A synthetic class (`--class N`, 20 by default): each student hands in every assignment, each
   answer drawn in turn from the master solution, the catalog's alternative correct answers, its buggy
   ones and the untouched release, so the class mixes full marks, partial marks and zeros. The class
   is graded twice from the same starting gradebook: stock sequential `nbgrader autograde A` for each
   assignment, and `python -m autograder.classgrader all --workers N`. Then `nbgrader generate_feedback`
   runs in both, and the two are compared: every grade and comment in the gradebooks, every autograded
   notebook and every feedback file (memory addresses such as `0x7f...` and execution timestamps
   masked, as they differ between any two runs).

5. Scaling on a local Dask cluster (`--skip-scaling` to leave it out): the same class graded with 1 and
   with 2 workers (`autograder.classgrader.grade_class --workers W`); the efficiency is the speed-up per worker added.

    python -m bench.grading --class 20 [--workers 2] [--skip-stock] [--skip-single] [--skip-scaling]
    python -m bench.grading --class 0       # the single full submission only
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import shutil
import sys
from pathlib import Path

import nbformat

from bench.common import REPO, SCRATCH, machine, run, save, table, timed
from tools import grading, stock_nbgrader
from tools.course import COURSE, Course

ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


# --- scratch courses -------------------------------------------------------------------------------

_TEMPLATE: Path | None = None


def template() -> Path:
    """A course after `generate_assignment` of everything; rebuilt when the masters or config change,
    made once per benchmark run (so that every course of a run grades the same assignments)."""
    global _TEMPLATE
    if _TEMPLATE is not None:
        return _TEMPLATE
    digest = hashlib.sha256()
    for path in sorted([*(REPO / "solutions").rglob("*"), *(REPO / "autograder").glob("*.py")]):
        if path.is_file():
            digest.update(str(path.relative_to(REPO)).encode() + path.read_bytes())
    course = SCRATCH / "grading" / f"template-{digest.hexdigest()[:12]}"
    if not (course / "autograder").is_dir() or not Course(course).gradebook_file.exists():
        shutil.rmtree(course, ignore_errors=True)
        grading.make_course(course)
        for assignment in COURSE.assignments():
            grading.nbgrader(course, "generate_assignment", assignment, "--force")
    _TEMPLATE = course
    return course


def clone(name: str) -> Path:
    course = SCRATCH / "grading" / name
    shutil.rmtree(course, ignore_errors=True)
    shutil.copytree(template(), course, ignore=shutil.ignore_patterns("submitted", "autograded", "feedback"))
    return course


@functools.cache
def answer_pool(assignment: str) -> list[tuple[str, nbformat.NotebookNode]]:
    """Correct and buggy submissions of one assignment, interleaved; built from the template course's
    own master and release, so that they match the assignments the run grades."""
    course = template()
    name = COURSE.master_notebook(assignment).name
    release = course / "exercises" / assignment / name

    def filled(cells: dict[str, str]) -> nbformat.NotebookNode:
        return grading.submission_from_release(assignment, cells, release)

    correct = [("solution", nbformat.read(course / "solutions" / assignment / name, as_version=4))]
    buggy = [("release", filled({}))]
    for variant in grading.load_catalog(assignment):
        (correct if variant.correct else buggy).append((variant.name, filled(variant.cells)))
    pool = []
    for index in range(max(len(correct), len(buggy))):
        pool += [entry[index] for entry in (correct, buggy) if index < len(entry)]
    return pool


def synthetic_class(course: Path, size: int) -> dict[str, dict[str, str]]:
    """Submit `size` students, each with every assignment; returns student -> assignment -> answer."""
    roster: dict[str, dict[str, str]] = {}
    for number, assignment in enumerate(COURSE.assignments()):
        pool = answer_pool(assignment)
        for index in range(size):
            student = f"student-{index:04d}"
            name, notebook = pool[(index * 3 + number) % len(pool)]
            grading.submit(course, student, assignment, notebook)
            roster.setdefault(student, {})[assignment] = name
    return roster


# --- the two ways of grading -----------------------------------------------------------------------

def stock(course: Path) -> None:
    """What the instructors' page says: `nbgrader autograde A` per assignment, students in turn."""
    for assignment in COURSE.assignments():
        stock_nbgrader.autograde(course, assignment)


def ours(course: Path, workers: int | None, record: Path) -> dict:
    command = [sys.executable, "-m", "autograder.classgrader.grade_class", "all", "--course", str(course), "--json", str(record)]
    if workers:
        command += ["--workers", str(workers)]
    run(command, check=False, quiet=False)
    return json.loads(record.read_text())


def feedback(course: Path) -> None:
    for assignment in COURSE.assignments():
        grading.nbgrader(course, "generate_feedback", assignment, check=False)


# --- comparing results -----------------------------------------------------------------------------

def gradebook_rows(course: Path) -> dict:
    from nbgrader.api import Gradebook

    rows = {}
    with Gradebook(Course(course).db_url, COURSE.course_id) as gradebook:
        for assignment in COURSE.assignments():
            for submission in gradebook.assignment_submissions(assignment):
                key = f"{assignment}/{submission.student.id}"
                rows[key] = {
                    "score": submission.score, "late_penalty": submission.late_submission_penalty,
                    "timestamp": str(submission.timestamp),
                    "notebooks": {
                        notebook.name: {
                            "flagged": notebook.flagged,
                            "grades": sorted((g.name, g.auto_score, g.manual_score, g.max_score, g.needs_manual_grade)
                                             for g in notebook.grades),
                            "comments": sorted((c.name, c.auto_comment, c.manual_comment) for c in notebook.comments),
                        } for notebook in submission.notebooks},
                }
    return rows


def normalized_notebook(path: Path, coalesce: bool = True) -> str:
    """An autograded notebook as JSON with what differs between any two runs masked: execution
    timestamps, memory addresses and (with `coalesce`) where the kernel happened to cut its printed
    output into stream messages (`print` sends its text and its newline separately, and whether
    they arrive as one message or two depends on timing; a notebook shows both the same way)."""
    notebook = json.loads(path.read_text())
    for cell in notebook.get("cells", []):
        cell.get("metadata", {}).pop("execution", None)
        if coalesce and cell.get("outputs"):
            merged = []
            for output in cell["outputs"]:
                if (output.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream"
                        and merged[-1].get("name") == output.get("name")):
                    merged[-1] = {**merged[-1], "text": "".join(merged[-1]["text"]) + "".join(output["text"])}
                else:
                    merged.append(output)
            for output in merged:
                if output.get("output_type") == "stream":
                    output["text"] = "".join(output["text"])
            cell["outputs"] = merged
    return ADDRESS.sub("0x…", json.dumps(notebook, sort_keys=True))


def feedback_text(path: Path) -> str:
    """What a student reads in a feedback page: the text, without markup and with whitespace collapsed
    (a stream cut in two becomes two <pre> blocks of the same text)."""
    from html.parser import HTMLParser

    class Text(HTMLParser):
        def __init__(self):
            super().__init__()
            self.parts, self.skip = [], 0

        def handle_starttag(self, tag, attrs):
            self.skip += tag in ("style", "script")

        def handle_endtag(self, tag):
            self.skip -= tag in ("style", "script") and self.skip > 0

        def handle_data(self, data):
            if not self.skip:
                self.parts.append(data)

    parser = Text()
    parser.feed(path.read_text())
    return ADDRESS.sub("0x…", " ".join(" ".join(parser.parts).split()))


def files(course: Path, folder: str) -> dict[str, Path]:
    root = course / "autograder" / folder
    return {path.relative_to(root).as_posix(): path for path in sorted(root.rglob("*")) if path.is_file()}


def compare(first: Path, second: Path) -> dict:
    """Gradebooks must agree exactly; autograded notebooks up to stream chunking, feedback up to markup.
    The counts of byte-level differences (after masking addresses and timestamps) are reported too."""
    differences: list[str] = []
    grades_a, grades_b = gradebook_rows(first), gradebook_rows(second)
    for key in sorted(set(grades_a) | set(grades_b)):
        if grades_a.get(key) != grades_b.get(key):
            differences.append(f"gradebook {key}: {grades_a.get(key)} != {grades_b.get(key)}")
    counts, chunking_only = {}, {}
    checks = {
        "autograded": (lambda path: normalized_notebook(path, coalesce=False), normalized_notebook),
        "feedback": (lambda path: ADDRESS.sub("0x…", path.read_text()), feedback_text),
    }
    for folder, (exact, loose) in checks.items():
        files_a, files_b = files(first, folder), files(second, folder)
        counts[folder] = len(files_a)
        chunking_only[folder] = 0
        for name in sorted(set(files_a) | set(files_b)):
            if name not in files_a or name not in files_b:
                differences.append(f"{folder}/{name}: only in one")
            elif name.endswith((".ipynb", ".html")) and exact(files_a[name]) != exact(files_b[name]):
                if loose(files_a[name]) == loose(files_b[name]):
                    chunking_only[folder] += 1
                else:
                    differences.append(f"{folder}/{name}: content differs")
    return {"identical": not differences, "submissions_compared": len(grades_a), "files_compared": counts,
            "differing_only_in_stream_chunking": chunking_only, "differences": differences[:50]}


def score_mix(course: Path) -> dict:
    rows = gradebook_rows(course)
    full = sum(1 for row in rows.values() if row["notebooks"] and all(
        all(g[1] == g[3] for g in nb["grades"] if g[3]) for nb in row["notebooks"].values()))
    zero = sum(1 for row in rows.values() if row["score"] == 0)
    return {"submissions": len(rows), "full_marks": full, "zero": zero, "partial": len(rows) - full - zero}


def per_assignment(summary: dict) -> dict:
    """Per assignment, the mean over its notebooks of where a worker's time went, as the class grader's summary
    gives it for each notebook (guarded_execute.LAST_TIMES): the whole notebook, its kernel's start, its cells (the
    checks in the checker included: the checks run there, not as cells in the kernel) and the grader's own share,
    everything but the cells (the kernel's start, nbgrader's passes, the sanitizer, writing)."""
    rows = {}
    for assignment in COURSE.assignments():
        units = [r for r in summary["results"] if r["assignment"] == assignment and r.get("stages", {}).get("execute_s")]
        if units:
            def mean(values) -> float:
                return round(sum(values) / len(values), 3)

            own = [r["seconds"] - r["stages"]["cells_s"] for r in units]
            rows[assignment] = {"mean_grade_s": mean([r["seconds"] for r in units]),
                                "mean_cells_s": mean([r["stages"]["cells_s"] for r in units]),
                                "mean_kernel_start_s": mean([r["stages"]["kernel_start_s"] for r in units]),
                                "mean_checker_start_s": mean([r["stages"].get("checker_start_s", 0.0) for r in units]),
                                "mean_own_s": mean(own),
                                # A notebook whose worker had its parents running already: the share every
                                # notebook pays, without the parents' start, which a worker pays once.
                                "least_own_s": round(min(own), 3)}
    return rows


# --- the benchmarks --------------------------------------------------------------------------------

def single(workers: int | None, skip_stock: bool, repeat: int = 3) -> dict:
    """One student handing in every assignment (the masters): ours `repeat` times, each in a fresh
    course (the median is the figure), and stock once, to check both give the same results."""
    student = "student-single"
    runs = []
    for index in range(repeat):
        course = clone(f"single-ours-{index}")
        for assignment in COURSE.assignments():
            grading.submit(course, student, assignment, answer_pool(assignment)[0][1])   # the master
        timing: dict = {}
        with timed(timing, "ours"):
            summary = ours(course, workers, course / "grade_class.json")
        runs.append({**timing["ours"], "workers": summary["workers"],
                     "per_notebook_s": {r["assignment"]: r["seconds"] for r in summary["results"]}})
    walls = sorted(run["wall_s"] for run in runs)
    result: dict = {"ours": {"wall_s": walls[len(walls) // 2], "min_s": walls[0], "max_s": walls[-1],
                             "runs": runs}}
    if not skip_stock:
        course = clone("single-stock")
        for assignment in COURSE.assignments():
            grading.submit(course, student, assignment, answer_pool(assignment)[0][1])
        with timed(result, "stock"):
            stock(course)
        comparison = compare(course, SCRATCH / "grading" / "single-ours-0")
        result["identical"] = comparison["identical"]
        result["differences"] = comparison["differences"]
    result["budget_s"] = 15
    result["within_budget"] = result["ours"]["wall_s"] < 15
    return result


def klass(size: int, workers: int | None, skip_stock: bool) -> dict:
    result: dict = {"class_size": size, "notebooks": size * len(COURSE.assignments())}
    courses = {"ours": clone("class-ours")}
    if not skip_stock:
        courses["stock"] = clone("class-stock")
    for course in courses.values():
        roster = synthetic_class(course, size)
    result["roster_sample"] = dict(list(roster.items())[:5])
    if not skip_stock:
        with timed(result, "stock"):
            stock(courses["stock"])
    with timed(result, "ours"):
        summary = ours(courses["ours"], workers, courses["ours"] / "grade_class.json")
    result["ours"].update(workers=summary["workers"], failed=len(summary["failed"]))
    seconds = sorted(r["seconds"] for r in summary["results"])
    if seconds:
        result["ours"]["per_notebook_s"] = {"median": seconds[len(seconds) // 2], "max": seconds[-1],
                                            "mean": round(sum(seconds) / len(seconds), 3)}
    # A rerun must skip everyone: nothing is regraded unless forced.
    with timed(result, "ours_rerun"):
        rerun = ours(courses["ours"], workers, courses["ours"] / "grade_class-rerun.json")
    result["ours_rerun"]["graded"] = rerun["graded"]
    result["ours_rerun"]["skipped"] = rerun["skipped"]
    result["score_mix"] = score_mix(courses["ours"])
    result["per_assignment"] = per_assignment(summary)
    if not skip_stock:
        with timed(result, "feedback_both"):
            for course in courses.values():
                feedback(course)
        result["comparison"] = compare(courses["stock"], courses["ours"])
        result["speedup"] = round(result["stock"]["wall_s"] / result["ours"]["wall_s"], 2)
    notebooks = result["notebooks"]
    per_notebook_cpu = result["ours"]["cpu_s"] / notebooks
    per_notebook_wall = result["ours"]["wall_s"] / notebooks
    cores = os.cpu_count() or 1
    result["extrapolation"] = {
        "cpu_s_per_notebook": round(per_notebook_cpu, 3),
        "wall_s_per_notebook": round(per_notebook_wall, 3),
        # The measured wall time per notebook scales linearly with the class (grading is embarrassingly
        # parallel); an idle machine does better, bounded below by CPU time / cores.
        "class_100_full_s_measured_rate": round(per_notebook_wall * 100 * len(COURSE.assignments()), 1),
        "class_100_full_s_cpu_bound": round(per_notebook_cpu * 100 * len(COURSE.assignments()) / cores, 1),
        "budget_class_100_s": 480,
        # 1,000 students on one such machine, and on a cluster of ten (autograder.classgrader.grade_class --scheduler: the
        # client's own work per notebook, writing the gradebook, is small; the scaling benchmark measures it).
        "class_1000_full_s_one_machine": round(per_notebook_wall * 1000 * len(COURSE.assignments()), 1),
        "class_1000_full_s_ten_machines": round(per_notebook_wall * 100 * len(COURSE.assignments()), 1),
    }
    if not skip_stock:
        stock_rate = result["stock"]["wall_s"] / notebooks
        result["extrapolation"]["stock_wall_s_per_notebook"] = round(stock_rate, 3)
        result["extrapolation"]["stock_class_100_full_s"] = round(stock_rate * 100 * len(COURSE.assignments()), 1)
    return result


def scaling(size: int) -> dict:
    """The class graded on a local Dask cluster of 1 and of 2 workers, each from the same fresh start:
    wall time, and the parallel efficiency (time with 1 / (2 x time with 2))."""
    result: dict = {"class_size": size}
    for workers in (1, 2):
        course = clone(f"class-scaling-{workers}")
        synthetic_class(course, size)
        with timed(result, f"workers_{workers}"):
            summary = ours(course, workers, course / "grade_class.json")
        result[f"workers_{workers}"]["failed"] = len(summary["failed"])
    result["efficiency_1_to_2"] = round(result["workers_1"]["wall_s"] / (2 * result["workers_2"]["wall_s"]), 3)
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--class", dest="size", type=int, default=int(os.environ.get("BENCH_CLASS", "20")))
    parser.add_argument("--workers", type=int, default=None, help="autograder.classgrader.grade_class workers (default: cores)")
    parser.add_argument("--skip-stock", action="store_true", help="grade only with ours (for large classes)")
    parser.add_argument("--skip-single", action="store_true")
    parser.add_argument("--skip-scaling", action="store_true", help="skip grading with 1 and 2 workers")
    parser.add_argument("--save-as", default="grading", help="name of the JSON summary in _build/bench/")
    args = parser.parse_args(argv)

    print("preparing the scratch course (nbgrader generate_assignment)...", flush=True)
    template()
    summary: dict = {}
    if not args.skip_single:
        summary["single_submission"] = single(args.workers, args.skip_stock)
        s = summary["single_submission"]
        print(table([["ours (autograder.classgrader.grade_class), median", s["ours"]["wall_s"], s["ours"]["runs"][0]["cpu_s"]]]
                    + ([["stock nbgrader autograde", s["stock"]["wall_s"], s["stock"]["cpu_s"]]] if "stock" in s else []),
                    ["one full submission", "wall s", "CPU s (first run)"]))
        print(f"identical: {s.get('identical')}; budget < 15 s: {s['within_budget']}", flush=True)
        if args.size == 0:                       # --class 0: the single submission only
            save(args.save_as if args.save_as != "grading" else "grading_single", summary)
            return summary
    summary["class"] = klass(args.size, args.workers, args.skip_stock)
    c = summary["class"]
    rows = [["ours (autograder.classgrader.grade_class)", c["ours"]["wall_s"], c["ours"]["cpu_s"]],
            ["ours, rerun (all skipped)", c["ours_rerun"]["wall_s"], c["ours_rerun"]["cpu_s"]]]
    if "stock" in c:
        rows.insert(0, ["stock nbgrader autograde", c["stock"]["wall_s"], c["stock"]["cpu_s"]])
    print(table(rows, [f"class of {args.size} ({c['notebooks']} notebooks)", "wall s", "CPU s"]))
    if "comparison" in c:
        print(f"identical grades, autograded notebooks and feedback: {c['comparison']['identical']} "
              f"({c['comparison']['submissions_compared']} submissions; files differing only in stream "
              f"chunking: {c['comparison']['differing_only_in_stream_chunking']}); speed-up {c['speedup']}x")
        for line in c["comparison"]["differences"][:10]:
            print("  DIFF", line)
    if not args.skip_scaling:
        summary["scaling"] = scaling(args.size)
        sc = summary["scaling"]
        print(f"local cluster: 1 worker {sc['workers_1']['wall_s']} s, 2 workers {sc['workers_2']['wall_s']} s; "
              f"efficiency {sc['efficiency_1_to_2']}", flush=True)
    print(f"score mix: {c['score_mix']}; extrapolated class of 100: {c['extrapolation']}")
    print(f"load average {machine()['load_average']}")
    save(args.save_as, summary)
    return summary


if __name__ == "__main__":
    main()
