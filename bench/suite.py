"""Benchmark 5, the suite: the whole test command (`make test` runs `python -m pytest`), and optionally the cold
install of the virtual environment that `make` does first (`--install`: a new venv in the scratch
folder, `pip install -r requirements.txt`, the course package; pip's download cache is used if it is
there, as CI's cache would be, and the summary says whether it was).

    python -m bench.suite [--install] [--no-tests] [-- PYTEST ARGS]

The install figures go to _build/bench/install.json, the test command's to test_command.json.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bench.common import REPO, SCRATCH, machine, run, save, timed


def pip_cache() -> str:
    result = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True)
    folder = Path(result.stdout.strip()) if result.returncode == 0 else None
    if folder and folder.exists():
        size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
        return f"{folder} ({size / 2**30:.1f} GiB)"
    return "none"


def install() -> dict:
    record: dict = {"pip_cache": pip_cache()}
    venv = SCRATCH / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    python = venv / "bin" / "python"
    with timed(record, "install"):
        run(["python3", "-m", "venv", str(venv)])
        run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
        run([str(python), "-m", "pip", "install", "--quiet", "-r", str(REPO / "requirements.txt")])
        run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "-e", str(REPO)])
    record["install"]["budget_s"] = 120
    shutil.rmtree(venv, ignore_errors=True)
    return record


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--install", action="store_true", help="also time a cold venv install")
    parser.add_argument("--no-tests", action="store_true", help="only the install (with --install)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)

    summary: dict = {}
    if args.install:
        installed = install()
        summary.update(installed)
        print(f"cold venv install: {installed['install']['wall_s']} s (pip cache: {installed['pip_cache']}); "
              f"budget 120 s", flush=True)
        save("install", installed)
    if args.no_tests:
        return summary
    with timed(summary, "test_command"):
        result = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=15",
                      *args.pytest_args], check=False)
    tail = result.stdout.strip().splitlines()[-40:]
    outcome = next((line for line in reversed(tail) if re.search(r"\b(passed|failed|error)", line)), "")
    summary["test_command"].update(returncode=result.returncode, outcome=outcome.strip("= "),
                                   budget_s=18 * 60, slowest=[line for line in tail if re.match(r"\s*\d+\.\d+s ", line)])
    print(f"test command: {summary['test_command']['wall_s']} s, {outcome.strip('= ')} "
          f"(budget 15 min); load average {machine()['load_average']}")
    save("test_command", summary)
    return summary


if __name__ == "__main__":
    main()
