"""autograder/plugins/verdict.py's Verdict and RecordFlags, on hand-made cells and a stand-in guard: what a test cell's
outputs and the guard's reports make of a submission's scores and flags. Both front doors and the fast path use
this class (the guard's report comes from the kernel there); the hostile classes grade the same cases end to end
(tests/test_grader_robustness.py)."""

from __future__ import annotations

import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from autograder.cells import CONDITIONS, FLAGS
from autograder.plugins.verdict import RecordFlags, Verdict
from autograder.plugins.withhold import WITHHELD

pytestmark = pytest.mark.quick

BASELINE = {"torch.allclose": "a1", "builtins": "b1"}


class Guard:
    """The guard's reports, in order; the last one repeats."""

    def __init__(self, *reports):
        self.reports, self.asked = list(reports), 0

    def __call__(self):
        self.asked += 1
        return self.reports[min(self.asked, len(self.reports)) - 1]


def check(grade_id: str = "test_a", *outputs):
    return new_code_cell("assert ok", outputs=list(outputs), metadata={"nbgrader": {
        "grade_id": grade_id, "grade": True, "solution": False, "points": 1}})


def judged(guard, cells, checked: bool = False, baseline=BASELINE) -> tuple[list, dict]:
    verdict, resources = Verdict(set(), guard), {}
    verdict.baseline = baseline
    for cell in cells:
        verdict.judge(cell, resources, checked=checked)
    return cells, resources


def test_an_untouched_guard_flags_nothing_and_is_asked_after_each_check():
    guard = Guard({"fingerprint": dict(BASELINE)})
    cells, resources = judged(guard, [check("test_a"), check("test_b")])
    assert resources == {} and all(cell.outputs == [] for cell in cells) and guard.asked == 2


def test_from_the_first_change_on_no_kernel_check_earns_points_and_the_flag_names_it():
    guard = Guard({"fingerprint": dict(BASELINE)}, {"fingerprint": {**BASELINE, "builtins": "patched"}})
    cells, resources = judged(guard, [check("test_a"), check("test_b"), check("test_c")])
    assert cells[0].outputs == []
    assert [out.ename for cell in cells[1:] for out in cell.outputs] == ["GradingIntegrityError"] * 2
    assert resources[FLAGS] == ["tampering detected after test_b: builtins"]
    assert guard.asked == 2, "once tampering is seen, the guard is not asked again"


def test_checks_run_in_the_checker_keep_their_scores_and_the_tampering_is_still_flagged():
    guard = Guard({"fingerprint": {**BASELINE, "torch.allclose": "patched"}})
    cells, resources = judged(guard, [check("test_a"), check("test_b")], checked=True)
    assert all(cell.outputs == [] for cell in cells)
    assert resources[FLAGS] == ["tampering detected after test_a: torch.allclose (the checks ran outside the "
                                "notebook's kernel: their scores stand)"]


@pytest.mark.parametrize("baseline, report, named", [
    (None, {"fingerprint": BASELINE}, "the grading guard (it did not answer before the first cell)"),
    (BASELINE, None, "the grading guard itself"),                       # it did not answer (or too much)
    (BASELINE, {"fingerprint": "not a record"}, "the grading guard itself"),
    (BASELINE, {"fingerprint": {**BASELINE, "numpy.allclose": "new"}}, "numpy.allclose"),   # a watched name added
])
def test_a_guard_that_cannot_vouch_for_the_kernel_counts_as_tampering(baseline, report, named):
    _, resources = judged(Guard(report), [check()], baseline=baseline)
    assert resources[FLAGS] == [f"tampering detected after test_a: {named}"]


def test_a_displayed_value_becomes_a_display_and_is_flagged_once():
    """nbgrader reads a test cell's displayed number as partial credit: a check scores all or nothing."""
    shown = [check(f"test_{n}", new_output("execute_result", data={"text/plain": "0.5"}, execution_count=3))
             for n in "ab"]
    cells, resources = judged(Guard({"fingerprint": BASELINE}), shown)
    assert [out.output_type for cell in cells for out in cell.outputs] == ["display_data"] * 2
    assert "execution_count" not in cells[0].outputs[0]
    assert len(resources[FLAGS]) == 1 and "partial score" in resources[FLAGS][0]


def test_broken_rules_are_flagged_once_each():
    report = {"fingerprint": BASELINE, "rules_broken": ["torch.nn.functional.layer_norm"]}
    _, resources = judged(Guard(report), [check("test_a"), check("test_b")])
    assert resources[FLAGS] == ["rule broken: your code called torch.nn.functional.layer_norm, which this "
                                "assignment forbids"]


def test_an_output_quoting_hidden_code_is_withheld_and_its_error_kept():
    verdict, resources = Verdict({"assertlayernorm(probe)==expected_value"}, Guard({})), {}
    cell = check("test_a", new_output("stream", name="stdout", text="assert layernorm(probe) \n== expected_value"),
                 new_output("error", ename="AssertionError", evalue="wrong", traceback=[]))
    verdict.withhold_quotations(cell, resources)
    assert [out.get("text") for out in cell.outputs] == [WITHHELD + "\n", None]
    assert cell.outputs[1].ename == "AssertionError"
    assert resources[FLAGS] == ["an output of test_a quoted hidden test code and was withheld"]


def test_limits_and_rules_seen_in_outputs_are_flagged():
    verdict, resources = Verdict(set(), Guard({})), {}
    cell = check("test_a", new_output("stream", name="stderr", text="OSError: [Errno 28] No space left on device"),
                 new_output("stream", name="stdout", text="[output truncated by the grader: ...]"),
                 new_output("error", ename="CourseRuleError", evalue="course rule: no F.layer_norm", traceback=[]))
    verdict.flag_limits_and_rules(cell, resources)
    flags = resources[FLAGS]
    assert flags[0].startswith("disk limit reached in test_a (") and flags[0].endswith(" MB of files)")
    assert "output limit reached: some output was not kept" in flags
    assert "rule broken: no F.layer_norm" in flags


@pytest.mark.parametrize("outputs, earned", [
    ([], 3.0),                                                                    # passed, silently
    ([new_output("stream", name="stdout", text="passed: the worked example\n")], 3.0),
    ([new_output("error", ename="AssertionError", evalue="wrong", traceback=[])], 0.0),
    ([new_output("execute_result", data={"text/plain": "0.5"}, execution_count=1)], 3.0),   # never partial credit
    ([new_output("stream", name="stdout", text="1.0"),
      new_output("execute_result", data={"text/plain": "0"}, execution_count=1)], 3.0),
])
def test_a_judged_check_scores_all_or_nothing_as_nbgrader_records_it(outputs, earned):
    """The scoring rule end to end on one cell: judged by the verdict, scored by nbgrader's own determine_grade (what
    SaveAutoGrades records)."""
    from nbgrader.utils import determine_grade

    cell = check("test_a", *outputs)
    cell.metadata["nbgrader"]["points"] = 3
    judged(Guard({"fingerprint": BASELINE}), [cell], checked=True)
    assert determine_grade(cell) == (earned, 3.0)


def test_record_flags_writes_the_flags_and_the_conditions_into_the_notebook():
    nb, _ = RecordFlags().preprocess(new_notebook(), {FLAGS: ["a flag"], CONDITIONS: ["a condition"]})
    assert nb.metadata[FLAGS] == {"flags": ["a flag"], "conditions": ["a condition"]}
    nb, _ = RecordFlags().preprocess(new_notebook(), {})
    assert nb.metadata[FLAGS] == {"flags": []}
