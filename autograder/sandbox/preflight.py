"""Before grading a class: which of the grader's limits hold on this machine, for this account, and why.

    python -m autograder.sandbox.preflight                    # the course the current folder is in, else this checkout's
    python -m autograder.sandbox.preflight --course /srv/gpt2-block/course

Run it as the account that grades (on a JupyterHub, the grader account, never root), where it grades. It
starts a trivial sandbox, tries what a grading kernel's launcher does with control groups (create a group,
move a process into it, remove it), and prints every limit with the value this course applies, what enforces
it and whether it holds for the whole submission, per process only, or not here. It changes nothing: the
trial group is removed, the trial process stopped.

Exit status: 0 when grading can go ahead; 1 when it would refuse (no sandbox, or COURSE_GRADING_CGROUPS=required
and no group can be made). Without control groups, grading goes ahead with per-process limits (the default,
COURSE_GRADING_CGROUPS=optional); the instructors' page says how an admin delegates a cgroup subtree to the
grading account so that every limit holds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from autograder.sandbox import cgroups
from autograder import grading_environment

# What enforces each limit: where it holds whatever the machine allows (the grader's own side, the sandbox's
# tmpfs), and the two that need a control group to hold for the whole submission.
GRADER_SIDE = {"COURSE_GRADING_CELL_TIMEOUT", "COURSE_GRADING_NOTEBOOK_TIMEOUT",
               "COURSE_GRADING_KERNEL_STARTUP_TIMEOUT", "COURSE_GRADING_OUTPUT_CELL_KB",
               "COURSE_GRADING_OUTPUT_NOTEBOOK_MB", "COURSE_GRADING_NOTEBOOK_MB", "COURSE_GRADING_HANDIN_FILES",
               "COURSE_GRADING_HANDIN_MB", "COURSE_GRADING_MESSAGE_MB", "COURSE_GRADING_MESSAGE_VALUES",
               "COURSE_GRADING_MESSAGE_PARTS"}
NEEDS_CGROUP = {"COURSE_GRADING_MEMORY_GB", "COURSE_GRADING_PROCESSES"}
IN_THE_SANDBOX = {"COURSE_GRADING_DISK_MB"}                 # its size-limited tmpfs
PER_PROCESS = {"COURSE_GRADING_CPU_SECONDS"}                # setrlimit, cgroup or not


@dataclass
class Cgroups:
    """What the trial found: whether a launcher could put a submission in a group here, and why not."""
    works: bool
    where: str           # the hierarchy the groups go in, or ''
    why: str             # '' when it works


def try_cgroups() -> Cgroups:
    """Do what a launcher does (cgroups.create, then move a process in), with a trial process, and undo it."""
    parents = cgroups._parents()
    if parents is None:
        return Cgroups(False, "", no_hierarchy_reason())
    where = ", ".join(str(parent) for parent in parents.values())
    group = cgroups.create(f"preflight-{os.getpid()}", 64 * 2**20, 16)
    if group is None:
        delegated = grading_environment.cgroup_parent()
        return Cgroups(False, where, f"this account cannot create a group in {where}" + (
            f" ({grading_environment.CGROUP_PARENT_VARIABLE}={delegated}: the admin makes that group and gives it "
            "to this account)" if delegated else
            f" (an admin delegates a group to this account and names it in {grading_environment.CGROUP_PARENT_VARIABLE})"))
    trial = subprocess.Popen(["sleep", "30"])
    try:
        group.add(trial.pid)
    except OSError as error:
        return Cgroups(False, where, f"a group was made in {where}, but a process cannot be moved into it ({error}): "
                       "the account needs write access to cgroup.procs up to the group it starts in")
    finally:
        trial.kill()
        trial.wait()
        group.remove()
    return Cgroups(True, where, "")


def no_hierarchy_reason() -> str:
    """Why cgroups._parents found no hierarchy with the memory and pids controllers this account may use."""
    own = cgroups._own_paths()
    delegated = grading_environment.cgroup_parent()
    unified = cgroups.ROOT / "cgroup.controllers"
    if unified.exists() and "" in own:
        base = cgroups.ROOT / (delegated or own[""]).lstrip("/")
        if delegated and not base.is_dir():
            return (f"{grading_environment.CGROUP_PARENT_VARIABLE} names {delegated}, and there is no such group "
                    f"({base})")
        try:
            offered = set((base / "cgroup.controllers").read_text().split())
        except OSError:
            offered = set()
        missing = sorted({"memory", "pids"} - offered)
        whose = "the delegated" if delegated else "this account's"
        if missing:
            return (f"{whose} cgroup ({base}) is not given the {' and '.join(missing)} controller"
                    f"{'s' if len(missing) > 1 else ''}: an admin delegates them (systemd: Delegate=memory pids)")
        return f"{whose} cgroup ({base}) cannot be written"
    if not cgroups.ROOT.exists():
        return f"no cgroup file system at {cgroups.ROOT}"
    return "no writable memory and pids hierarchies (cgroup v1) for this account"


def limit_rows(found: Cgroups, sandbox: bool) -> list[tuple[str, str, str, str]]:
    """(limit, the value applied, what enforces it, whether it holds here) for every declared limit."""
    rows = []
    for limit in grading_environment.LIMITS:
        applied = f"{limit.value:g} {limit.unit}".strip()
        if limit.variable in GRADER_SIDE:
            rows.append((limit.what, applied, "the grader", "holds"))
        elif limit.variable in NEEDS_CGROUP and found.works:
            rows.append((limit.what, applied, "the submission's control group", "holds for the whole submission"))
        elif limit.variable == "COURSE_GRADING_PROCESSES" and os.getuid() == 0:
            rows.append((limit.what, applied, "nothing: RLIMIT_NPROC does not bind root", "NOT LIMITED"))
        elif limit.variable in NEEDS_CGROUP:
            rows.append((limit.what, applied, "per-process limits (setrlimit)", "per process only"))
        elif limit.variable in IN_THE_SANDBOX:
            rows.append((limit.what, applied, "the sandbox's size-limited tmpfs",
                         "holds" if sandbox else "not here (no sandbox)"))
        elif limit.variable in PER_PROCESS:
            rows.append((limit.what, applied, "per-process limits (setrlimit)", "holds per process"))
        else:
            raise ValueError(f"{limit.variable}: the preflight does not know what enforces it "
                             "(autograder/sandbox/preflight.py)")
    return rows


def course_here(folder: Path | None = None) -> Path | None:
    """The course whose folder holds `folder` (the current one): the nearest with
    autograder/course_directory.py (on a hub, the grader account's copy: /srv/gpt2-block/course), or None."""
    folder = (folder or Path.cwd()).resolve()
    return next((parent for parent in [folder, *folder.parents]
                 if (parent / "autograder" / "course_directory.py").is_file()), None)


def report(course_root: Path | None = None) -> tuple[str, int]:
    """The preflight's text and exit status, for `course_root`, else the course the current folder is in, else
    this checkout's."""
    from autograder.course import REPO, Course
    from autograder.sandbox.sandboxed_kernel import check

    course = Course(course_root or course_here() or REPO)
    course.grading_config()                   # the course's limits, as its nbgrader_config.py sets them
    problem = check()
    found = try_cgroups()
    required = grading_environment.cgroups_required()
    lines = [f"Grading preflight for {course.root}, as user {os.getuid()} on this machine:", ""]
    lines.append("sandbox (bubblewrap): " + ("starts" if problem is None else f"CANNOT START: {problem}"))
    if found.works:
        lines.append(f"control groups: a submission gets its own group ({found.where}): memory and processes are "
                     "limited for the whole submission")
    else:
        consequence = ("grading refuses every submission (COURSE_GRADING_CGROUPS=required)" if required else
                       ("memory is limited per process only and processes NOT AT ALL, since RLIMIT_NPROC does not "
                        "bind root: grade as an ordinary account, or give this one a control group"
                        if os.getuid() == 0 else "memory and processes are limited per process only")
                       + " (COURSE_GRADING_CGROUPS=optional), which the class grader says when it starts and the "
                       "class report once for the class")
        lines.append(f"control groups: NOT AVAILABLE: {found.why}; {consequence}")
    lines += ["", *table(limit_rows(found, problem is None))]
    refuses = problem is not None or (required and not found.works)
    lines += ["", "Grading would refuse here." if refuses else "Grading can go ahead here."]
    return "\n".join(lines), 1 if refuses else 0


def table(rows: list[tuple[str, ...]]) -> list[str]:
    header = ("limit", "applied", "enforced by", "here")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--course", type=Path, default=None,
                        help="the course's root folder (default: the one the current folder is in, else this checkout)")
    text, status = report(parser.parse_args(argv).course)
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
