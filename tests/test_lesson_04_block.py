"""The figures Lesson 4 (the pre-LN block) states are computed in the lesson, and they are right."""

import pytest

from tests.glue import glued, glued_text, glued_value
from tools.course import COURSE

pytestmark = [pytest.mark.lessons, pytest.mark.notebooks("book/04-block.md")]


@pytest.fixture(scope="module")
def lesson(executions):
    execution = executions[COURSE.root / "book" / "04-block.md"]
    assert execution.error is None, execution.error
    return execution.output


def test_scratch_block_agrees_with_the_reference_module(lesson):
    assert glued_value(glued_text(lesson)["block_agrees"]) is True


def test_block_has_12d2_plus_13d_parameters_at_gpt2_width(lesson):
    assert glued_value(glued_text(lesson)["block_count_768"]) == 12 * 768**2 + 13 * 768 == 7_087_872


def test_zeroed_branches_give_identity_for_pre_ln_but_not_post_ln(lesson):
    values = glued_text(lesson)
    assert glued_value(values["pre_ln_identity"]) is True
    assert glued_value(values["post_ln_identity"]) is False
    assert float(glued_value(values["post_ln_gap"])) > 0.1


def test_residual_stream_norm_grows_with_depth(lesson):
    values = glued_text(lesson)
    first = float(glued_value(values["stream_norm_first"]))
    last = float(glued_value(values["stream_norm_last"]))
    assert last > first
    assert float(glued_value(values["stream_norm_ratio"])) == pytest.approx(last / first, abs=0.1)


def test_lesson_has_its_figures(lesson):
    figures = glued(lesson)
    assert "image/png" in figures["fig_stream_norm"]


def test_every_block_lengthens_the_stream_as_the_caption_says(lesson):
    values = glued_text(lesson)
    assert glued_value(values["stream_norm_every_block_adds"]) is True
    assert float(glued_value(values["stream_norm_first_step"])) > 0
    assert float(glued_value(values["stream_norm_last_step"])) > 0
