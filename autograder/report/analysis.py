"""What the numbers say: item analysis of each graded cell (as of a test's items: does passing it go with doing
well on the rest?) and the mistakes the checks named, grouped across students so that the instructor reads
each misconception once, with everyone who has it."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass

from autograder.report.data import ClassData, GradedCell, Result

# Item analysis: a discrimination this close to zero says passing the check tells nothing about the rest.
NEAR_ZERO = 0.1


def pearson(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's correlation (the point-biserial one when xs is 0/1); None when either does not vary."""
    if len(xs) < 2 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None                               # statistics.correlation raises on a constant input
    return statistics.correlation(xs, ys)


@dataclass
class Item:
    cell: GradedCell
    passed: int
    students: int
    discrimination: float | None
    flag: str                  # "", "near zero", "negative", "no variation"
    why: str = ""

    @property
    def difficulty(self) -> float:
        return self.passed / self.students if self.students else 0.0


def passed(result: Result, cell: GradedCell) -> bool:
    """All the cell's points, and it has some: a cell worth nothing is never passed."""
    return result.scores.get(cell.column, 0.0) >= cell.points and cell.points > 0


def item_analysis(data: ClassData) -> list[Item]:
    """Each graded cell: how many passed it, and the point-biserial correlation of passing it with the rest of
    the score (the total without this cell's points), as item analysis of a test does."""
    items = []
    for cell in data.cells:
        xs = [1.0 if passed(result, cell) else 0.0 for result in data.results]
        rest = [result.total - result.scores.get(cell.column, 0.0) for result in data.results]
        r = pearson(xs, rest)
        got = int(sum(xs))
        if r is None:
            flag = "no variation"
            why = ("everyone passed it" if got == len(xs) else "no one passed it" if got == 0 else
                   "the rest of the score is the same for everyone")
            why += ": in this class it cannot separate the students who understood from those who did not"
        elif r <= -NEAR_ZERO:
            flag = "negative"
            why = ("students who did better on the rest failed it more often: look for a check that rejects a "
                   "correct alternative, or one that a wrong answer passes")
        elif abs(r) < NEAR_ZERO:
            flag = "near zero"
            why = ("passing it says nothing about the rest of the score: it may test something the rest does not, "
                   "or be passed or failed for reasons other than understanding")
        else:
            flag, why = "", ""
        items.append(Item(cell, got, len(xs), r, flag, why))
    return items


NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def message_key(errors: list[tuple[str, str]], unanswered: str) -> tuple:
    """What a check said with the numbers taken out, so that the same mistake made on other numbers (another
    width, another value) groups together."""
    if not errors:
        return ("",)
    if all(name == unanswered for name, _ in errors):
        return (unanswered,)
    key = []
    for name, message in errors:
        text = NUMBER.sub("#", " ".join(message.split()))
        key.append((name, re.sub(r"#(?:\s*,\s*#)+", "#…", text)))
    return tuple(key)


@dataclass
class Mistake:
    message: str                          # what the check said, to read (the most common wording)
    students: list[str]
    checks: dict[str, int]                # column -> students it cost that check
    wordings: int                         # distinct messages grouped here (numbers differ)


def mistakes(data: ClassData, summary) -> list[Mistake]:
    """The messages the checks raised, the same message with other numbers counted as one, ranked by how many
    students got it. A check that lost points without raising anything (changed by hand) is its own entry."""
    groups: dict[tuple, dict] = {}
    autograded = [cell for cell in data.cells if cell.autograded]
    for result in data.results:
        if result.unread:
            continue
        for cell in autograded:
            if passed(result, cell) or cell.points == 0:
                continue
            errors = result.errors.get(cell.column, [])
            key = message_key(errors, summary.UNANSWERED)
            group = groups.setdefault(key, {"students": set(), "checks": Counter(), "wordings": Counter()})
            group["students"].add(result.student)
            group["checks"][cell.column] += 1
            group["wordings"][summary.readable_message(errors, 600)] += 1
    order = {cell.column: index for index, cell in enumerate(data.cells)}
    found = [Mistake(group["wordings"].most_common(1)[0][0], sorted(group["students"]),
                     dict(sorted(group["checks"].items(), key=lambda item: order[item[0]])), len(group["wordings"]))
             for group in groups.values()]
    return sorted(found, key=lambda m: (-len(m.students), min(order[c] for c in m.checks), m.message))


def score_summary(data: ClassData) -> dict[str, float | int]:
    """The class's totals after late penalties: how many, mean, median, lowest, highest (only the count when no
    one is graded)."""
    totals = [result.final for result in data.results]
    if not totals:
        return {"students": 0}
    return {"students": len(totals), "mean": statistics.fmean(totals), "median": statistics.median(totals),
            "min": min(totals), "max": max(totals)}


@dataclass
class NotebookTimes:
    notebook: str
    timed: list[tuple[float, str]]        # (seconds, student), the longest first; students without a time left out

    @property
    def median(self) -> float:
        return statistics.median(seconds for seconds, _ in self.timed)


def grading_times(data: ClassData) -> list[NotebookTimes]:
    """How long each notebook ran in its grading kernel, per notebook of the assignment that any student's
    autograded copy was read for."""
    notebooks = sorted({name for result in data.results for name in result.seconds})
    return [NotebookTimes(name, sorted(((result.seconds[name], result.student) for result in data.results
                                        if result.seconds.get(name) is not None), reverse=True))
            for name in notebooks]
