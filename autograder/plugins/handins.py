"""What of a hand-in is graded: the release's notebooks, and beside them only the files the release ships,
within a count and a size limit (grading_environment.py).

A student hands in a folder. nbgrader's own autograde copies every file of it into `autograded/`, where the
grading kernel works, and the class grader (autograder.classgrader.grade_class) used to read all of it into memory to send
it to a worker: six files of 99 MB (each under the exchange's per-file limit) cost gigabytes. Here:

- the release's notebooks and nbgrader's own files, `timestamp.txt` and `submission_secret.txt`, are always
  taken within their size limits (release_feedback needs the secret in the feedback folder, which
  generate_feedback copies from `autograded/`);
- every other file is *beside the notebooks*. Their number and total size are counted from the folder's
  listing, never by reading them. Over either limit, none of them is taken, and the submission is flagged
  (the notebooks are still graded);
- within the limits, only files the release ships (at the same path) are taken; the others are left out,
  named in a flag, so a student who imported a helper of their own learns why it was missing.

Both engines apply the same rule. intake.Intake applies it under `nbgrader autograde` (it removes
what is not taken from the autograded folder before the kernel starts there); autograder/classgrader/grading_kit.py applies
it when it packs a task for a grading worker, which then sends only what is taken, and lists what it did
not send (name and size) in the task's arguments (never in a file: the submitted folder is the student's), so
the worker's Intake reaches the same verdict and the same flags. A MANIFEST file a student hands in is dropped
unread: the grader's bookkeeping never comes from the hand-in.

Nothing is read before its size is known (autograder/bounded.py): a notebook over COURSE_GRADING_NOTEBOOK_MB is
not taken (Intake grades the unanswered release in its place, flagged), nor a timestamp.txt or a
submission_secret.txt over its own small cap (flagged). A timestamp.txt that the pre-convert hook of `nbgrader
autograde` found not to hold a time was moved aside to REFUSED_TIMESTAMP (intake.bound_timestamp), and is flagged.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from autograder.bounded import SECRET_MAX_BYTES, TIMESTAMP_MAX_BYTES, describe, notebook_limit
from autograder.grading_environment import value

TIMESTAMP = "timestamp.txt"               # written by nbgrader collect; the submission's time
SECRET = "submission_secret.txt"          # written by nbgrader submit; release_feedback names the feedback by it
NBGRADER_FILES = {TIMESTAMP, SECRET}
# Once the name of the packer's list of files left out; the list now travels in the task's arguments, and a file
# of this name in a hand-in is the student's own: dropped, never read.
MANIFEST = ".course-grading-not-sent.json"
# Where `nbgrader autograde`'s pre-convert hook (intake.bound_timestamp) moves a timestamp.txt that holds no time,
# before nbgrader would parse it.
REFUSED_TIMESTAMP = "timestamp.txt.not-a-time"
CAPS = {TIMESTAMP: TIMESTAMP_MAX_BYTES, SECRET: SECRET_MAX_BYTES}


@dataclass
class Survey:
    taken: list[str] = field(default_factory=list)          # relative paths to grade with
    beside: dict[str, int] = field(default_factory=dict)    # every other file: relative path -> size
    left_out: list[str] = field(default_factory=list)       # beside files not taken
    refusal: str | None = None                              # why none of the beside files was taken
    oversized: dict[str, int] = field(default_factory=dict)  # notebooks and nbgrader's files over their caps: not read
    refused_timestamp: int | None = None                    # the size of REFUSED_TIMESTAMP, when there is one

    def flags(self) -> list[str]:
        """The flags of the files beside the notebooks (an oversized notebook is flagged by Intake, which
        grades the release in its place)."""
        flags = [f"refused at intake: {name} is {describe(size)}, over the limit of {describe(CAPS[name])}; it was "
                 f"not read{' (graded without a submission time)' if name == TIMESTAMP else ''}"
                 for name, size in sorted(self.oversized.items()) if name in CAPS]
        if self.refused_timestamp is not None:
            flags.append(f"refused at intake: timestamp.txt held no time, so it was moved aside to {REFUSED_TIMESTAMP} "
                         "unread by nbgrader and the submission was graded without a submission time (no late "
                         "penalty); correct it, rename it back and grade again with --force")
        if self.refusal:
            return [*flags, self.refusal]
        if self.left_out:
            names = ", ".join(map(shown, self.left_out[:5])) + (
                f" and {len(self.left_out) - 5} more" if len(self.left_out) > 5 else "")
            flags.append(f"not graded: files the release does not ship ({names})")
        return flags


def shown(name: str, most: int = 80) -> str:
    """A file name as a flag shows it: the student chose it, so bytes that are not UTF-8 (which Python keeps as
    surrogates, and which no notebook can be written with) and characters that are not printable are written as
    escapes, and a long name is cut."""
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))
    return text if len(text) <= most else text[:most] + "…"


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


def survey(submitted: Path, release: Path, not_sent: dict[str, int] | None = None) -> Survey:
    """What of the hand-in in `submitted` is graded, for the assignment released in `release`, from the folder's
    listing alone (nothing is read). `not_sent`: the files a packer left out (name -> size as it listed them),
    which a grading worker gets in its task's arguments, never from the submitted folder."""
    submitted, release = Path(submitted), Path(release)
    shipped = {name for name in listing(release) if regular(release, name)}
    notebooks = {name for name in shipped if name.endswith(".ipynb")}
    result = Survey()
    present = listing(submitted)
    present.pop(MANIFEST, None)                    # the student's own: dropped unread
    for name, size in (not_sent or {}).items():    # the packer's word wins over a placeholder the worker wrote
        if isinstance(name, str) and isinstance(size, int) and size >= 0 and name != MANIFEST:
            present[name] = size
    if REFUSED_TIMESTAMP in present:
        result.refused_timestamp = present.pop(REFUSED_TIMESTAMP)
    most_notebook = notebook_limit()
    for name, size in present.items():
        if name in notebooks or name in NBGRADER_FILES:
            if size > CAPS.get(name, most_notebook):
                result.oversized[name] = size
            elif regular(submitted, name):
                result.taken.append(name)
            else:
                result.beside[name] = size
        else:
            result.beside[name] = size
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
    """The markdown cell a student finds at the top of their graded notebook. The flags name the student's files,
    so each is literal text there: a file named as a link or an image reads as its name."""
    from autograder.pages.summary import markdown_text

    return "**Grader's note.** " + " ".join(markdown_text(flag[0].upper() + flag[1:] + ".") for flag in flags)
