"""What every benchmark shares: the machine it ran on, timers, scratch copies, the JSON summaries."""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from tools.course import REPO, tool_env

OUT = REPO / "_build" / "bench"
SCRATCH = Path(os.environ.get("BENCH_SCRATCH", "/tmp/course-bench"))


def machine() -> dict:
    """The machine and how busy it was: figures from a shared machine are inflated by its load."""
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                      if line.startswith("model name")), "")
    memory = ""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kib = int(meminfo.read_text().split()[1])
        memory = f"{kib / 2**20:.1f} GiB"
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    return {
        "cores": os.cpu_count(), "cpu": model, "memory": memory, "platform": platform.platform(),
        "python": platform.python_version(), "torch": torch_version,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


class CpuTracker:
    """CPU time of this process and of every process it starts, however deep (kernels included).

    `getrusage(RUSAGE_CHILDREN)` misses the grading kernels: they run under bubblewrap, whose sandboxed
    child is never waited for by a process we wait for. So a thread samples the whole process tree
    every `interval` seconds with psutil and keeps each process's last reading; a process that ends
    between two samples loses at most `interval` seconds of its time."""

    def __init__(self, interval: float = 0.2):
        import threading

        self.interval = interval
        self.seen: dict[tuple[int, float], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        import psutil

        me = psutil.Process()
        for process in me.children(recursive=True):
            try:
                with process.oneshot():
                    times = process.cpu_times()
                    self.seen[(process.pid, process.create_time())] = times.user + times.system
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> "CpuTracker":
        own = resource.getrusage(resource.RUSAGE_SELF)
        self._own = own.ru_utime + own.ru_stime
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        self._children = children.ru_utime + children.ru_stime
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._sample()
        self._stop.set()
        self._thread.join()
        own = resource.getrusage(resource.RUSAGE_SELF)
        self.own = own.ru_utime + own.ru_stime - self._own
        # Sampling misses a process that lived between two samples; the kernel's count of waited-for descendants
        # (every process of `.ci/run` is waited for by its parent) misses none of those. The larger of the two.
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.descendants = max(sum(self.seen.values()), children.ru_utime + children.ru_stime - self._children)

    @property
    def total(self) -> float:
        return self.own + self.descendants


@contextmanager
def timed(record: dict, name: str):
    """Wall time and CPU time (this process and all its descendants, kernels included) of the block,
    into record[name], with the load average before and after (other work on the machine)."""
    load = os.getloadavg()[0]
    started = time.perf_counter()
    with CpuTracker() as tracker:
        yield
    record[name] = {
        "wall_s": round(time.perf_counter() - started, 3),
        "cpu_s": round(tracker.total, 3),
        "load_average_before": round(load, 2), "load_average_after": round(os.getloadavg()[0], 2),
    }


def run(command: list[str], cwd: Path = REPO, env: dict | None = None, check: bool = True,
        quiet: bool = True) -> subprocess.CompletedProcess:
    """A command with the venv's bin first on PATH (nbgrader calls `alembic`)."""
    result = subprocess.run(command, cwd=cwd, env=tool_env(env), text=True,
                            capture_output=quiet)
    if check and result.returncode:
        raise RuntimeError(f"{' '.join(map(str, command))} failed ({result.returncode}):\n"
                           f"{(result.stdout or '')[-3000:]}\n{(result.stderr or '')[-3000:]}")
    return result


def tracked_files() -> list[Path]:
    """The working tree as git sees it: tracked files plus untracked ones that are not ignored."""
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=REPO, capture_output=True, check=True).stdout.decode()
    return [REPO / name for name in listing.split("\0") if name and (REPO / name).is_file()]


def copy_repository(dest: Path) -> Path:
    """A scratch copy of the working tree (no _build, no venv), with the npm packages linked in."""
    shutil.rmtree(dest, ignore_errors=True)
    for path in tracked_files():
        target = dest / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    if (REPO / "node_modules").exists():
        (dest / "node_modules").symlink_to(REPO / "node_modules", target_is_directory=True)
    return dest


def save(name: str, data: dict) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **data}, indent=2) + "\n")
    print(f"-> {path.relative_to(REPO)}")
    return path


def table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(width) if i else cell.ljust(width) for i, (cell, width) in enumerate(zip(row, widths)))
             for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
