"""What of a hand-in is graded: the release's notebooks, and beside them only the files the release ships,
within a count and a size limit (grading_environment.py).

A student hands in a folder. nbgrader's own autograde copies every file of it into `autograded/`, where the
grading kernel works, and the class grader (autograder.grade_class) used to read all of it into memory to send
it to a worker: six files of 99 MB (each under the exchange's per-file limit) cost gigabytes. Here:

- the release's notebooks and nbgrader's own files, `timestamp.txt` and `submission_secret.txt`, are always
  taken (a notebook has a size limit of its own, checked when it is read; release_feedback needs the secret in
  the feedback folder, which generate_feedback copies from `autograded/`);
- every other file is *beside the notebooks*. Their number and total size are counted from the folder's
  listing, never by reading them. Over either limit, none of them is taken, and the submission is flagged
  (the notebooks are still graded);
- within the limits, only files the release ships (at the same path) are taken; the others are left out,
  named in a flag, so a student who imported a helper of their own learns why it was missing.

Both engines apply the same rule. intake.Intake applies it under `nbgrader autograde` (it removes
what is not taken from the autograded folder before the kernel starts there); autograder/grading_kit.py applies
it when it packs a task for a grading worker, which then sends only what is taken, and lists what it did
not send (name and size) in MANIFEST, so the worker's Intake reaches the same verdict and the same flags.
A manifest a student hands in themselves can only add files to their own count, never remove one.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from autograder.grading_environment import value

TIMESTAMP = "timestamp.txt"               # written by nbgrader collect; the submission's time
SECRET = "submission_secret.txt"          # written by nbgrader submit; release_feedback names the feedback by it
NBGRADER_FILES = {TIMESTAMP, SECRET}
MANIFEST = ".course-grading-not-sent.json"
MANIFEST_MAX_BYTES = 2**20


@dataclass
class Survey:
    taken: list[str] = field(default_factory=list)          # relative paths to grade with
    beside: dict[str, int] = field(default_factory=dict)    # every other file: relative path -> size
    left_out: list[str] = field(default_factory=list)       # beside files not taken
    refusal: str | None = None                              # why none of the beside files was taken

    def flags(self) -> list[str]:
        if self.refusal:
            return [self.refusal]
        if self.left_out:
            names = ", ".join(self.left_out[:5]) + (f" and {len(self.left_out) - 5} more" if len(self.left_out) > 5 else "")
            return [f"not graded: files the release does not ship ({names})"]
        return []


def listing(folder: Path) -> dict[str, int]:
    """Every file under `folder` (links included, never followed): relative path -> size, from lstat only."""
    found = {}
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(root, d)))]:
            path = os.path.join(root, name)
            try:
                found[os.path.relpath(path, folder)] = os.lstat(path).st_size
            except OSError:
                pass
    return found


def regular(folder: Path, relative: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(folder / relative).st_mode) and not any(
            os.path.islink(folder / parent) for parent in Path(relative).parents if str(parent) != ".")
    except OSError:
        return False


def not_sent(folder: Path) -> dict[str, int]:
    """The files a packer left out (MANIFEST), as counted on the instructor's side."""
    path = folder / MANIFEST
    if not regular(folder, MANIFEST) or path.stat().st_size > MANIFEST_MAX_BYTES:
        return {}
    try:
        entries = json.loads(path.read_text())
        return {f"{name}": int(size) for name, size in entries if int(size) >= 0}
    except (ValueError, TypeError):
        return {}


def survey(submitted: Path, release: Path) -> Survey:
    """What of the hand-in in `submitted` is graded, for the assignment released in `release`."""
    submitted, release = Path(submitted), Path(release)
    shipped = {name for name in listing(release) if regular(release, name)}
    notebooks = {name for name in shipped if name.endswith(".ipynb")}
    result = Survey()
    present = listing(submitted)
    present.pop(MANIFEST, None)
    for name, size in present.items():
        if (name in notebooks or name in NBGRADER_FILES) and regular(submitted, name):
            result.taken.append(name)
        else:
            result.beside[name] = size
    for name, size in not_sent(submitted).items():
        result.beside.setdefault(name, size)
    count, total = len(result.beside), sum(result.beside.values())
    most_files, most_bytes = int(value("COURSE_GRADING_HANDIN_FILES")), value("COURSE_GRADING_HANDIN_MB") * 2**20
    if count > most_files or total > most_bytes:
        result.refusal = (f"refused at intake: {count} files of {total / 2**20:.1f} MB were handed in beside the "
                          f"notebook, over the limit of {most_files} files and {most_bytes / 2**20:g} MB; none of "
                          "them was used (the notebook was graded)")
        result.left_out = sorted(result.beside)
        return result
    for name in sorted(result.beside):
        if name in shipped and name not in notebooks and regular(submitted, name):
            result.taken.append(name)
        else:
            result.left_out.append(name)
    result.taken.sort()
    return result


def note(flags: list[str]) -> str:
    """The markdown cell a student finds at the top of their graded notebook."""
    return "**Grader's note.** " + " ".join(flag[0].upper() + flag[1:] + "." for flag in flags)
