"""Grading the known submissions: the master, the untouched release and the catalog's variants.

The course's engine (`graded`: autograder.classgrader.grade_class, real `nbgrader autograde` in the sandbox) grades each
assignment's master, release and a sample of its catalog (grading.engine_sample); the fast path
(`mutants`: tools.mutation_grading, one process per assignment) grades the whole catalog, and
test_the_fast_path_gives_the_engines_verdicts holds the two equal on the sample, scores, messages and flags.
"""

import pytest

from tools import grading
from tools.course import COURSE
from tools.mutation_grading import verdict

pytestmark = pytest.mark.grading

ASSIGNMENTS = COURSE.assignments()
VARIANTS = [variant for assignment in ASSIGNMENTS for variant in grading.load_catalog(assignment)]
COPIES = [copy for assignment in ASSIGNMENTS for copy in grading.load_copies(assignment)]
SAMPLE = [(assignment, submission.student) for assignment in ASSIGNMENTS
          for submission in grading.engine_sample(assignment)]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_master_runs_without_error_and_scores_full_marks(assignment, graded):
    """Grading executes the master top to bottom in the sandbox: no cell may raise, every check must pass."""
    result = graded.scores(assignment, f"{assignment}--solution")
    lost = {cell: score for cell, score in result.items() if score[0] != score[1]}
    assert result and not lost, f"the master lost points in {lost}"
    feedback = graded.feedback(assignment, f"{assignment}--solution")
    raised = {index: f"{out.ename}: {out.evalue}" for index, cell in enumerate(feedback.cells)
              for out in cell.get("outputs", []) if out.output_type == "error"}
    assert not raised, f"cells of the master raised: {raised}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_untouched_release_scores_zero_without_crashing_the_grader(assignment, graded):
    result = graded.scores(assignment, f"{assignment}--release")
    assert result, "the release was not graded"
    assert sum(score for score, _ in result.values()) == 0
    assert not graded.grade(assignment)["failed"], graded.grade(assignment)["failed"]


@pytest.mark.parametrize("assignment, student", SAMPLE, ids=[student for _, student in SAMPLE])
def test_the_fast_path_gives_the_engines_verdicts(assignment, student, graded, mutants):
    """What every catalog test below reads (each graded cell's score, the error it shows, whether its visible
    part passed, and the grader's flags) is the same from the fast path as from the real engine."""
    failed = {failure["student"]: failure["error"] for failure in graded.grade(assignment)["failed"]}
    assert student not in failed, f"the engine could not grade {student}: {failed.get(student)}"
    engine = verdict(graded.scores(assignment, student), graded.feedback(assignment, student))
    fast = verdict(mutants.scores(assignment, student), mutants.feedback(assignment, student))
    assert fast == engine


@pytest.mark.parametrize("variant", [v for v in VARIANTS if not v.correct], ids=lambda v: v.student)
def test_bug_loses_exactly_the_points_of_its_checks(variant, mutants):
    result = mutants.scores(variant.assignment, variant.student)
    failed = {cell for cell, (score, top) in result.items() if score < top}
    assert set(variant.fails) <= failed, f"{variant.misconception}: expected {variant.fails} to fail, failed {failed}"
    assert failed <= set(variant.fails), f"{variant.misconception}: also lost points in {failed - set(variant.fails)}"
    feedback = mutants.feedback(variant.assignment, variant.student)
    for cell in variant.fails:
        assert variant.message in grading.cell_error(feedback, cell), (
            f"{cell} should tell the student '{variant.message}', it said: {grading.cell_error(feedback, cell)}")


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.correct], ids=lambda v: v.student)
def test_alternative_correct_solution_scores_full_marks(variant, mutants):
    result = mutants.scores(variant.assignment, variant.student)
    lost = {cell: score for cell, score in result.items() if score[0] != score[1]}
    assert result and not lost, f"{variant.description}: a correct solution lost points in {lost}"


@pytest.mark.parametrize("copy", COPIES, ids=lambda v: v.student)
def test_copy_baseline_scores_at_most_40_percent(copy, mutants):
    """The lessons' own code pasted under the assignment's names: the transfer parts must be worth the rest."""
    result = mutants.scores(copy.assignment, copy.student)
    got, top = sum(score for score, _ in result.values()), sum(top for _, top in result.values())
    assert result and got <= grading.COPY_CEILING * top, (
        f"{copy.name} (the code of {', '.join(copy.lessons)}) scores {got:g} of {top:g}, over "
        f"{grading.COPY_CEILING:.0%}: the parts the lessons do not write out must be worth more")


def test_committed_mutation_report_is_current(mutants):
    from tools.mutation_report import REPORT, render

    fresh = render(mutants.scores, mutants.feedback)
    if not REPORT.exists() or REPORT.read_text() != fresh:
        # Leave the up-to-date report where it can be reviewed and copied in.
        candidate = REPORT.parents[1] / "_build" / "mutation-report.md"
        candidate.parent.mkdir(exist_ok=True)
        candidate.write_text(fresh)
        pytest.fail(f"autograder/mutation-report.md is stale: review {candidate} and copy it over "
                    "(or run `python -m tools.mutation_report`)")


# Test cells of the first four assignments whose hidden checks no catalog bug yet catches on its own
# (the mutation report lists them as "none yet"): gaps to close by adding a bug, listed so that no new
# one appears unnoticed. Assignments 5 and 6 have none, nor has assignment 1's gradient check (its bug:
# detached statistics) or assignment 3's comparison with fused attention (a 1/sqrt(heads) scale).
KNOWN_GAPS = {
    "01-layernorm": {
        "test_eps_inside_sqrt", "test_float64", "test_gamma_beta", "test_last_axis", "test_no_inplace",
        "test_population_variance", "test_worked_example",
    },
    "02-mlp": {
        "test_gelu_tanh_form", "test_gelu_values", "test_mlp_parameters", "test_mlp_positionwise",
        "test_mlp_shape",
    },
    "03-block": {
        "test_attention_causal", "test_attention_heads_check", "test_attention_shape", "test_block_identity",
        "test_block_shape",
    },
    "04-gpt": {
        "test_blocks_distinct", "test_context_limit", "test_count_parameters",
        "test_gpt2_small_size", "test_head_no_bias", "test_initialization",
        "test_logits_shape", "test_no_leakage", "test_parameter_formula", "test_positions",
        "test_weight_tying",
    },
}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_promised_hidden_check_has_a_bug_that_only_it_catches(assignment, mutants):
    from tools.mutation_report import exercised_checks

    exercised = exercised_checks(assignment, mutants.scores, mutants.feedback)
    bare = {cell for cell, bugs in exercised.items() if not bugs}
    known = KNOWN_GAPS.get(assignment, set())
    assert bare <= known, (f"no catalog bug fails only the hidden part of {sorted(bare - known)}: add one that "
                           "the visible part passes and the promised hidden check catches")
