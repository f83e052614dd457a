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


def test_dropout_places_are_gpt1s_three_as_hugging_face_and_the_reference_model_have_them(lesson):
    """The page attributes the three places and the rate of 0.1 to GPT-1's paper and Hugging Face's
    GPT2Config (OpenAI's GPT-2 code has no dropout): the defaults are read from the library, and the
    reference model has one dropout module on the embeddings and two in each block."""
    values = glued_text(lesson)
    assert glued_value(values["hf_dropout_rates"]) == "embd_pdrop = 0.1, attn_pdrop = 0.1, resid_pdrop = 0.1"
    assert glued_value(values["dropout_modules"]) == [
        "drop", "blocks.0.attn.attn_drop", "blocks.0.drop", "blocks.1.attn.attn_drop", "blocks.1.drop"]
    source = " ".join((COURSE.root / "book" / "04-block.md").read_text().split())
    assert "GPT-2 applies it in three places" not in source
    assert "{footcite:p}`radford2018improving`" in source and "{footcite:p}`openai2019gpt2code`" in source
