"""autograder/pages/summary.py on hand-made notebooks and lessons: the summary's lines and totals, a student's
message kept to text, the lessons' sections read as MyST reads them (what looks like a heading in front matter or a
code block is none; a repeated heading is linked as its page, as Sphinx numbers its id) and the section finder's
choice. The real lessons and feedback pages are checked in tests/test_site_content.py and
tests/test_hostile_pages.py."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.pages.summary import (
    SUMMARY, FeedbackSummary, SectionFinder, markdown_text, read_lesson, readable_message,
)

pytestmark = pytest.mark.quick


def check(grade_id: str, points: float, score: float, *errors: tuple[str, str], description: str = "") -> object:
    outputs = [new_output("error", ename=name, evalue=message, traceback=[]) for name, message in errors]
    return new_code_cell(f"# {points:g} points: {description or grade_id}\nassert True", outputs=outputs, metadata={
        "nbgrader": {"grade_id": grade_id, "grade": True, "solution": False, "points": points, "score": score}})


# --- what a check said ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("errors, said", [
    ([], "no message (the check raised no error: graded by hand, or a score changed in the gradebook)"),
    ([("NotImplementedError", "")], "not answered: the function still raises NotImplementedError"),
    ([("AssertionError", "the variance  divides\n by N, not N - 1")], "the variance divides by N, not N - 1"),
    ([("AssertionError", "")], "a check failed without a message"),
    ([("TypeError", "unsupported operand"), ("TypeError", "unsupported operand")], "TypeError: unsupported operand"),
    ([("KernelDied", "")], "KernelDied"),
])
def test_a_lost_points_message_is_one_readable_line(errors, said):
    assert readable_message(errors) == said


def test_a_long_message_is_cut_with_an_ellipsis():
    assert readable_message([("AssertionError", "x" * 500)], limit=40) == "x" * 39 + "…"


def test_a_students_message_reads_as_text_whatever_markup_it_holds():
    message = '[full marks](javascript:alert(1)) <img src=x onerror=alert(2)> **bold** `code` # $x$'
    tokens = [token for block in MarkdownIt("commonmark").parse(markdown_text(message))
              for token in [block, *(block.children or [])]]
    assert {token.type for token in tokens} <= {"paragraph_open", "inline", "text", "paragraph_close"}
    assert "".join(token.content for token in tokens if token.type == "text") == message


# --- the lessons' sections --------------------------------------------------------------------------------------

LESSON = """---
jupytext:
  text_representation:
# not a heading: front matter
---

# 3. Causal attention

Words before the first section.

## Why the mask goes *before* the `softmax`

A future position must get zero weight: masking the scores with minus infinity before the softmax does it.

```python
## not a heading: a comment in code
```

## Check your understanding

The softmax, the mask and the scores again, in a quiz.

## Scaling the scores

Dividing by the square root of the head's width keeps the variance of the scores near one.

## Scaling the scores

A second section of the same name.
"""


@pytest.fixture
def lesson(tmp_path):
    path = tmp_path / "03-attention.md"
    path.write_text(LESSON)
    return read_lesson(path)


def test_a_lessons_sections_are_its_myst_headings_with_sphinxs_ids(lesson):
    assert lesson.title == "3. Causal attention"
    assert [(section.title, section.anchor) for section in lesson.sections] == [
        ("Why the mask goes before the softmax", "why-the-mask-goes-before-the-softmax"),
        ("Check your understanding", "check-your-understanding"),
        ("Scaling the scores", "scaling-the-scores"),
        ("Scaling the scores", ""),                 # Sphinx numbers the second id: linked as the page
    ]
    assert "## not a heading" in lesson.sections[0].text


def test_the_finder_picks_the_closest_teaching_section_or_none(lesson):
    finder = SectionFinder([lesson])
    assert "Check your understanding" not in [section.title for section in finder.sections]
    assert finder.closest("a future position got weight: mask before the softmax", 0.3).title.startswith("Why the mask")
    assert finder.closest("divide the scores by the square root of the head width", 0.3).title == "Scaling the scores"
    assert finder.closest("the tokenizer's merges", 0.3) is None


# --- the summary --------------------------------------------------------------------------------------------

def summary(nb, resources=None, **settings):
    result, _ = FeedbackSummary(site_url="", **settings).preprocess(nb, resources or {"nbgrader": {}})
    return result


def test_the_summary_counts_each_check_and_says_what_a_lost_one_found():
    nb = new_notebook(cells=[new_markdown_cell("# Assignment"), check("test_shape", 1, 1),
                             check("test_values", 2, 0, ("AssertionError", "divide by N, <b>not</b> N-1"))])
    first = summary(nb).cells[0]
    assert first.metadata[SUMMARY] is True
    lines = first.source.splitlines()
    assert lines[0] == "## Your result: 1 of 3 points"
    assert lines[2].startswith("1 of 2 checks passed.")
    assert lines[4] == "- **passed** (1 of 1): [`test_shape`](#test_shape)"
    assert lines[5].startswith("- **lost 2 points** (0 of 2) in [`test_values`](#test_values): divide by N")
    assert "<b>" not in lines[5] and "&lt;b&gt;" in lines[5]


def test_the_gradebooks_total_and_a_late_penalty_are_what_the_summary_says():
    nb = new_notebook(cells=[check("test_a", 2, 2)])
    lines = summary(nb, {"nbgrader": {"score": 1.5, "max_score": 2, "late_penalty": 0.5}}).cells[0].source.splitlines()
    assert lines[0] == "## Your result: 1.5 of 2 points"
    assert lines[2].startswith("1 of 1 checks passed; 0.5 points were taken off for a late submission.")


def test_the_summary_is_made_again_not_added_again_and_can_be_switched_off():
    nb = new_notebook(cells=[check("test_a", 1, 0, ("AssertionError", "wrong"))])
    once = summary(nb)
    twice = summary(once)
    assert [cell.metadata.get(SUMMARY, False) for cell in twice.cells] == [True, False]
    untouched = new_notebook(cells=[check("test_a", 1, 0)])
    assert summary(untouched, enabled=False).cells == untouched.cells
    assert summary(new_notebook(cells=[new_markdown_cell("no checks")])).cells[0].source == "no checks"
