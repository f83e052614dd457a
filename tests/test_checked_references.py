"""A wrong answer written against the order of a check earns exactly what it earns without the trick: the checks
take what they expect before the student's code runs, in the checker, and read a module as PyTorch holds it
(tests/attacks_on_references.py: one hand-in per assignment, each with its floor; tests/attacks_on_calls.py:
the third review round's, written against how a check calls the student's code). Graded by the catalog's fast
path, which runs the same checker and bridge as both front doors."""

from __future__ import annotations

import pytest

from tests import attacks_on_calls, attacks_on_references
from tools import grading

CASES = {**{assignment: (assignment, floor, attack) for assignment, (floor, attack) in attacks_on_references.PAIRS.items()},
         **attacks_on_calls.PAIRS}


ASSIGNMENTS = sorted({assignment for assignment, _, _ in CASES.values()})


def submissions(assignment: str) -> list[grading.Submission]:
    return [grading.Submission(f"{case.replace('/', '--')}--{kind}", assignment,
                               grading.submission_from_release(assignment, cells))
            for case, (of, floor, attack) in CASES.items() if of == assignment
            for kind, cells in (("floor", floor), ("attack", attack))]


# Graded by the catalog's fast-path process of each assignment, beside its catalog (tests/grading_fixtures.py).
pytestmark = pytest.mark.fast_path({assignment: submissions(assignment) for assignment in ASSIGNMENTS})


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_trick_on_the_checks_order_earns_only_its_floor(mutants, assignment):
    """Every pair of the assignment: the attack earns no point its floor does not, check by check (it may earn
    fewer: a layer kept out of the module's tables is no layer to a check that asks for one)."""
    for case in (case for case, (of, _, _) in CASES.items() if of == assignment):
        floor_scores = mutants.scores(assignment, f"{case.replace('/', '--')}--floor")
        attack_scores = mutants.scores(assignment, f"{case.replace('/', '--')}--attack")
        gained = {cell: (floor_scores[cell][0], score) for cell, (score, _) in attack_scores.items()
                  if score > floor_scores[cell][0]}
        assert not gained, (case, gained)
