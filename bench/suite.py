"""Benchmark 5, the suite, as CI runs it and as its budget is set (decided: 25 min of wall time from a fresh
clone, cold install included, on the machine it runs on; its CPU-seconds recorded beside it): `.ci/run`
in a fresh clone of this repository's HEAD (committed work only), cold install included. The clone's
`make` first builds the virtual environment and the npm packages (timed on their own: the cold install,
uv's download cache used if it is there, as CI's cache would be, and the summary says whether it was),
then `bash .ci/run` runs `make test` (timed).

    python -m bench.suite [--no-tests] [-- PYTEST ARGS]

The figures go to _build/bench/test_command.json.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bench.common import REPO, SCRATCH, machine, run, save, timed

INSTALL = [".venv/.installed", "node_modules/.installed"]      # the Makefile's stamps for the two installs


def download_cache() -> str:
    """uv's download cache (the Makefile installs with uv) and its size: a warm one makes the install faster."""
    result = subprocess.run([sys.executable, "-m", "uv", "cache", "dir"], capture_output=True, text=True)
    folder = Path(result.stdout.strip()) if result.returncode == 0 else None
    if folder and folder.exists():
        size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
        return f"{folder} ({size / 2**30:.1f} GiB)"
    return "none"


def fresh_clone() -> Path:
    clone = SCRATCH / "suite" / "repo"
    shutil.rmtree(clone, ignore_errors=True)
    clone.parent.mkdir(parents=True, exist_ok=True)
    run(["git", "clone", "--quiet", str(REPO), str(clone)])
    return clone


def clean_environment() -> dict[str, str]:
    """This shell's environment without this checkout's virtual environment (as CI starts)."""
    env = {name: value for name, value in os.environ.items() if name not in ("VIRTUAL_ENV", "PYTHONPATH")}
    venv_bin = str(REPO / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(part for part in env.get("PATH", "").split(os.pathsep) if part != venv_bin)
    return env


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-tests", action="store_true", help="only the cold install")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --), through PYTEST_ADDOPTS")
    args = parser.parse_args(argv)

    clone = fresh_clone()
    env = clean_environment()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip()
    summary: dict = {"commit": commit, "download_cache": download_cache()}
    with timed(summary, "install"):
        subprocess.run(["make", *INSTALL], cwd=clone, env=env, check=True, capture_output=True)
    summary["install"]["budget_s"] = 120
    print(f"cold install in a fresh clone of {commit}: {summary['install']['wall_s']} s "
          f"(uv's cache: {summary['download_cache']}); budget 120 s", flush=True)
    if not args.no_tests:
        if args.pytest_args:
            env["PYTEST_ADDOPTS"] = " ".join(args.pytest_args)
        with timed(summary, "test_command"):
            result = subprocess.run(["bash", ".ci/run"], cwd=clone, env=env, capture_output=True, text=True)
        tail = result.stdout.strip().splitlines()[-40:]
        outcome = next((line for line in reversed(tail) if re.search(r"\b(passed|failed|error)", line)), "")
        total = round(summary["install"]["wall_s"] + summary["test_command"]["wall_s"], 1)
        summary["test_command"].update(returncode=result.returncode, outcome=outcome.strip("= "),
                                       fresh_clone_total_s=total, budget_s=25 * 60)
        print(f"`.ci/run` after it: {summary['test_command']['wall_s']} s, {outcome.strip('= ')}; from the fresh "
              f"clone {total} s in all (budget 25 min), {summary['test_command']['cpu_s']:.0f} CPU-s; load average {machine()['load_average']}")
        (SCRATCH / "suite" / "ci.log").write_text(result.stdout + result.stderr)
    save("test_command", summary)
    return summary


if __name__ == "__main__":
    main()
