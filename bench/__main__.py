"""Run every benchmark in turn (what `make bench` does); each prints its figures and writes
_build/bench/<name>.json, and this writes _build/bench/summary.json with the headline figures.

    python -m bench [--class N] [--workers N] [--only notebooks,site,grading,test_command] [--install]

Run it on a quiet machine: every figure is wall time, inflated by whatever else runs. Each JSON
records the load average before and after, and CPU times beside the wall times.
"""

from __future__ import annotations

import argparse
import os
import time

from bench import common

SECTIONS = ["notebooks", "site", "grading", "test_command"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--class", dest="size", type=int, default=int(os.environ.get("BENCH_CLASS", "20")),
                        help="students in the synthetic class (default 20, or $BENCH_CLASS)")
    parser.add_argument("--workers", type=int, default=None, help="grading workers (default: cores)")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--install", action="store_true", help="also time a cold venv install")
    args = parser.parse_args()

    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    headline: dict = {}
    started = time.perf_counter()
    for name in chosen:
        print(f"\n=== {name} ===", flush=True)
        if name == "notebooks":
            from bench import notebooks
            result = notebooks.main()
            headline["notebooks_overhead_ratio"] = result["ratio_total"]
            headline["notebooks_wall_s"] = result["wall_s"]
        elif name == "site":
            from bench import site
            result = site.main()
            headline["site"] = {step: value["wall_s"] for step, value in result["steps"].items()}
            headline["site_module_edits_exact"] = result["module_edits_exact"]
        elif name == "grading":
            from bench import grading
            argv = ["--class", str(args.size)] + (["--workers", str(args.workers)] if args.workers else [])
            result = grading.main(argv)
            if "single_submission" in result:
                headline["one_submission_s"] = result["single_submission"]["ours"]["wall_s"]
            headline["class"] = {key: result["class"][key]["wall_s"] for key in ("stock", "ours") if key in result["class"]}
            headline["class_size"] = args.size
            headline["class_identical"] = result["class"].get("comparison", {}).get("identical")
            extrapolation = result["class"]["extrapolation"]
            headline["class_100_extrapolated_s"] = extrapolation["class_100_full_s_measured_rate"]
            headline["class_100_stock_extrapolated_s"] = extrapolation.get("stock_class_100_full_s")
            headline["class_1000_one_machine_extrapolated_s"] = extrapolation["class_1000_full_s_one_machine"]
        elif name == "test_command":
            from bench import suite
            result = suite.main(["--install"] if args.install else [])
            headline["test_command_s"] = result["test_command"]["wall_s"]
            if "install" in result:
                headline["cold_install_s"] = result["install"]["wall_s"]
        else:
            raise SystemExit(f"unknown section {name!r}; choose from {SECTIONS}")
    headline["bench_wall_s"] = round(time.perf_counter() - started, 1)
    common.save("summary", headline)


if __name__ == "__main__":
    main()
