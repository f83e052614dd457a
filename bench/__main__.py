"""Run every benchmark in turn (what `make bench` does); each prints its figures and writes
_build/bench/<name>.json, and this writes _build/bench/summary.json with the headline figures.

    python -m bench [--class N] [--workers N] [--only notebooks,site,kernels,grading,test_command]

Run it on a quiet machine: every figure is wall time, inflated by whatever else runs. Each JSON
records the load average before and after, and CPU times beside the wall times.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os

from bench import common

SECTIONS = ["notebooks", "site", "kernels", "grading", "test_command"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--class", dest="size", type=int, default=int(os.environ.get("BENCH_CLASS", "20")),
                        help="students in the synthetic class (default 20, or $BENCH_CLASS)")
    parser.add_argument("--workers", type=int, default=None, help="grading workers (default: cores)")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    args = parser.parse_args()

    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    figures: list[dict] = []           # the README's performance table, one row each (bench/published.py)
    for name in chosen:
        print(f"\n=== {name} ===", flush=True)
        if name == "notebooks":
            from bench import notebooks
            result = notebooks.main()
            figures.append(figure(
                f"Executing all {result['notebooks']} notebooks, {result['workers']} at a time",
                "wall time at most 1.3 x the time in cells",
                f"{result['ratio_total']} x ({result['wall_s']:.0f} s of wall time for {result['cells_s']:.0f} s of cells)",
                result["ratio_total"] <= result["budget_ratio"], result["load_before"]))
            for lesson in result["budgeted_lessons"]:
                if lesson["cpu_s"] is not None:
                    figures.append(figure(
                        f"{lesson['what']}, one kernel",
                        f"under {lesson['budget_cpu_s']} CPU-s",
                        f"{lesson['cpu_s']:.0f} CPU-s, kernel start-up included",
                        lesson["cpu_s"] <= lesson["budget_cpu_s"],
                        result["load_before"]))
        elif name == "site":
            from bench import site
            result = site.main()
            steps = result["steps"]
            figures.append(figure("Site build after a prose-only edit", "under 15 s",
                                  f"{steps['prose_edit']['wall_s']:.1f} s (median of {len(steps['prose_edit']['runs'])}, nothing executed); "
                                  f"nothing changed {steps['warm']['wall_s']:.1f} s; cold {steps['cold']['wall_s']:.0f} s",
                                  result["prose_edit_within_budget"], steps["prose_edit"]["runs"][0]["load_average_before"]))
            weights, model = steps["gpt2_weights_edit"], steps["model_edit"]
            figures.append(figure("After a module change", "exactly the lessons importing it re-execute",
                                  f"`gptcourse/gpt2_weights.py`: {', '.join(weights['expected_executed'])} "
                                  f"({weights['wall_s']:.0f} s); `gptcourse/model.py`: all "
                                  f"{len(model['expected_executed'])} lessons ({model['wall_s']:.0f} s)",
                                  result["module_edits_exact"], weights["runs"][0]["load_average_before"]))
        elif name == "kernels":
            from bench import kernel_startup
            result = kernel_startup.main([])
            if result.get("measured"):
                warm, cold = result["warm"], result["cold"]
                figures.append(figure(
                    "CPU a graded notebook costs beyond its cells (kernel start to shutdown, sandbox and grader included)",
                    "at most 0.3 CPU-s",
                    f"{warm['cpu_s_per_notebook']:.2f} CPU-s warm ({warm['wall_s_per_notebook']:.1f} s wall); "
                    f"cold {cold['cpu_s_per_notebook']:.2f} CPU-s ({cold['wall_s_per_notebook']:.1f} s); the warm "
                    f"parent's start {result['warm_parent_start_cpu_s']:.1f} CPU-s, once per grading process",
                    warm["cpu_s_per_notebook"] <= result["budget_cpu_s_per_notebook"],
                    result["machine"]["load_average"][0]))
        elif name == "grading":
            from bench import grading
            argv = ["--class", str(args.size)] + (["--workers", str(args.workers)] if args.workers else [])
            result = grading.main(argv)
            single = result.get("single_submission")
            if single:
                figures.append(figure("One full submission (every assignment's master) autograded", "under 15 s",
                                      f"{single['ours']['wall_s']:.1f} s (median of {len(single['ours']['runs'])})",
                                      single["within_budget"], single["ours"]["runs"][0]["load_average_before"],
                                      stock=f"{single['stock']['wall_s']:.1f} s" if "stock" in single else None,
                                      identical=single.get("identical")))
            klass = result["class"]
            speedup = klass.get("speedup")
            figures.append(figure(
                f"A class of {args.size} ({klass['notebooks']} notebooks), "
                f"{klass['ours']['workers']} local Dask workers", "at least 6 x faster than stock (issue 41)",
                f"{klass['ours']['wall_s']:.1f} s, {klass['ours']['cpu_s']:.0f} CPU-s"
                + (f" ({speedup} x faster)" if speedup else "")
                + f"; a rerun skips them all in {klass['ours_rerun']['wall_s']:.1f} s",
                speedup >= 6 if speedup else None, klass["ours"]["load_average_before"],
                stock=f"{klass['stock']['wall_s']:.1f} s, {klass['stock']['cpu_s']:.0f} CPU-s" if "stock" in klass else None,
                identical=klass.get("comparison", {}).get("identical")))
        elif name == "test_command":
            from bench import suite
            result = suite.main([])
            run, install = result["test_command"], result["install"]
            figures.append(figure(
                f"The test command from a fresh clone (`.ci/run` of {result['commit']}, cold install included)",
                "25 min",
                f"{run['fresh_clone_total_s'] / 60:.1f} min: install {install['wall_s']:.0f} s, then `make test` "
                f"{run['wall_s'] / 60:.1f} min ({run['outcome']}), {run['cpu_s']:.0f} CPU-s",
                run["returncode"] == 0 and run["fresh_clone_total_s"] <= run["budget_s"], install["load_average_before"]))
            figures.append(figure("A cold install (virtual environment and npm packages, in that clone)", "under 2 min",
                                  f"{install['wall_s']:.0f} s (uv's download cache: {result['download_cache']})",
                                  install["wall_s"] <= install["budget_s"], install["load_average_before"]))
        else:
            raise SystemExit(f"unknown section {name!r}; choose from {SECTIONS}")
        for row in figures:
            row["section"] = row["section"] or name          # this section's new rows
    # A run of some sections replaces their rows and keeps the others' (each row says its date).
    previous = common.OUT / "summary.json"
    kept = [row for row in json.loads(previous.read_text())["figures"] if row["section"] not in chosen] \
        if previous.exists() else []
    figures = sorted(kept + figures, key=lambda row: SECTIONS.index(row["section"]))
    common.save("summary", {"figures": figures})


def figure(what: str, budget: str | None, ours: str, met: bool | None, load_before: float, stock: str | None = None,
           identical: bool | None = None) -> dict:
    """One row of the README's table: what was measured, its budget, our figure and stock nbgrader's, when (its
    section is set by the loop that measured it)."""
    return {"what": what, "budget": budget, "ours": ours, "met": met, "stock": stock, "identical": identical,
            "load_before": load_before, "section": None, "date": datetime.date.today().isoformat()}


if __name__ == "__main__":
    main()
