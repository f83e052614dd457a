"""autograder/plugins/withhold.py's HideHiddenTests, the feedback's pass, on small hand-made notebooks: a test cell's hidden
part becomes one placeholder line, a traceback becomes its one-line message, an output that quotes hidden code
(however it is spaced) is withheld, and what a check says in the open stays. Switched off (to release the tests
after the due date), it changes nothing."""

from __future__ import annotations

import copy

import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from autograder.notebook import HIDDEN_BEGIN, HIDDEN_END
from autograder.plugins.withhold import WITHHELD, HideHiddenTests, hidden_lines, quotes_hidden

pytestmark = pytest.mark.quick

HIDDEN_LINE = "assert torch.allclose(layernorm(probe, weight, bias), expected_from_the_reference)"
TEST = f"""# 2 points: the worked example.
assert layernorm(x, 1, 0).shape == x.shape
### {HIDDEN_BEGIN}
{HIDDEN_LINE}
"the message a failing check shows, which is meant to be read by the student"
### {HIDDEN_END}
print("passed: the worked example")
"""
TEST_RECORD = {"nbgrader": {"grade_id": "test_example", "grade": True, "solution": False, "locked": True, "points": 2}}


def notebook(*outputs):
    cell = new_code_cell(TEST, metadata=TEST_RECORD, outputs=list(outputs))
    answer = new_code_cell("def layernorm(x, g, b):\n    return x",
                           metadata={"nbgrader": {"grade_id": "answer", "solution": True, "grade": False}},
                           outputs=[new_output("stream", name="stdout", text="  ".join(HIDDEN_LINE.split()))])
    return new_notebook(cells=[answer, cell])


def hidden(nb, enabled: bool = True):
    result, _ = HideHiddenTests(enabled=enabled).preprocess(copy.deepcopy(nb), {})
    return result


def test_the_hidden_part_becomes_one_placeholder_line_and_the_open_part_stays():
    cell = hidden(notebook()).cells[1]
    placeholder = HideHiddenTests().placeholder
    assert cell.source == TEST.split(f"### {HIDDEN_BEGIN}")[0] + placeholder + '\nprint("passed: the worked example")\n'
    assert HIDDEN_LINE not in cell.source and "meant to be read" not in cell.source


def test_a_traceback_becomes_its_message_and_the_message_stays():
    error = new_output("error", ename="AssertionError", evalue="the message a failing check shows",
                       traceback=["Traceback (most recent call last):", f"----> 4 {HIDDEN_LINE}", "AssertionError"])
    output = hidden(notebook(error)).cells[1].outputs[0]
    assert output.traceback == ["AssertionError: the message a failing check shows"]
    assert output.evalue == "the message a failing check shows"


def test_an_output_quoting_hidden_code_is_withheld_however_it_is_spaced():
    """The answer cell printed the hidden line with its spaces doubled: still a quotation, in any cell."""
    nb = hidden(notebook(new_output("stream", name="stdout", text="passed: the worked example\n")))
    assert nb.cells[0].outputs[0].text == WITHHELD + "\n"
    assert nb.cells[1].outputs[0].text == "passed: the worked example\n"


def test_what_counts_as_hidden_code():
    """Lines long enough to recognise, not comments, not a string alone (a check's message is meant to be read)."""
    lines = hidden_lines(notebook())
    assert lines == {"".join(HIDDEN_LINE.split())}
    assert quotes_hidden(f"look: {HIDDEN_LINE.replace(' ', chr(10))}", lines)
    assert not quotes_hidden("the message a failing check shows", lines)


def test_switched_off_it_changes_nothing():
    error = new_output("error", ename="AssertionError", evalue="no", traceback=["a", "traceback"])
    original = notebook(error)
    assert hidden(original, enabled=False) == original
