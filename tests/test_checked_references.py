"""A wrong answer written against the order of a check earns exactly what it earns without the trick: the checks
take what they expect before the student's code runs, in the checker, and read a module as PyTorch holds it
(tests/attacks_on_references.py: one hand-in per assignment, each with its floor; tests/attacks_on_calls.py:
the third review round's, written against how a check calls the student's code). Graded by the catalog's fast
path, which runs the same checker and bridge as both front doors."""

from __future__ import annotations

import pytest

from tests import attacks_on_calls, attacks_on_references
from tools import grading, mutation_grading

CASES = {**{assignment: (assignment, floor, attack) for assignment, (floor, attack) in attacks_on_references.PAIRS.items()},
         **attacks_on_calls.PAIRS}


@pytest.mark.parametrize("assignment", sorted({assignment for assignment, _, _ in CASES.values()}))
def test_a_trick_on_the_checks_order_earns_only_its_floor(course, assignment):
    """Every pair of the assignment graded in one batch (the fast path's start is paid once)."""
    cases = {case: (floor, attack) for case, (of, floor, attack) in CASES.items() if of == assignment}
    submissions = [grading.Submission(f"{case.replace('/', '--')}--{kind}", assignment,
                                      grading.submission_from_release(assignment, cells))
                   for case, (floor, attack) in cases.items() for kind, cells in (("floor", floor), ("attack", attack))]
    graded = mutation_grading.grade_known(assignment, submissions, workers=2, course=course)
    for case in cases:
        floor_scores, _ = graded[f"{case.replace('/', '--')}--floor"]
        attack_scores, _ = graded[f"{case.replace('/', '--')}--attack"]
        assert sum(score for score, _ in attack_scores.values()) <= sum(score for score, _ in floor_scores.values()), case
        assert {cell: score for cell, (score, _) in attack_scores.items() if score} == \
            {cell: score for cell, (score, _) in floor_scores.items() if score}, case
