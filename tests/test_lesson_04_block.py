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
    """The page credits the 2017 paper with dropout on the sub-layer outputs and the embeddings at 0.1,
    GPT-1's paper with the third place (attention), and reads Hugging Face's GPT2Config defaults from the
    library (OpenAI's GPT-2 code has no dropout); the reference model has one dropout module on the
    embeddings and two in each block."""
    values = glued_text(lesson)
    assert glued_value(values["hf_dropout_rates"]) == "embd_pdrop = 0.1, attn_pdrop = 0.1, resid_pdrop = 0.1"
    assert glued_value(values["dropout_modules"]) == [
        "drop", "blocks.0.attn.attn_drop", "blocks.0.drop", "blocks.1.attn.attn_drop", "blocks.1.drop"]
    source = " ".join((COURSE.root / "book" / "04-block.md").read_text().split())
    assert "GPT-2 applies it in three places" not in source
    assert "{footcite:p}`radford2018improving`" in source and "{footcite:p}`openai2019gpt2code`" in source
    section = source[source.index("## Dropout: where, and when it is off"):source.index("## A picture")]
    assert "{footcite:p}`vaswani2017attention`" in section and "Where it goes in a GPT comes from GPT-1" not in section


def test_updates_keep_their_size_while_the_norms_increments_shrink(lesson):
    """The caption: each block's update ||h_l - h_(l-1)|| has about the same size at every depth, while
    the norm's increments shrink (first against last), because the updates are nearly orthogonal to the
    stream, as random directions are, and the squared norms add up (the dashed line's prediction)."""
    values = glued_text(lesson)
    low, high = (float(v) for v in glued_value(values["update_norm_range"]).split(" to "))
    assert 0.1 < low <= high < 0.5 and high / low < 1.6
    first_step = float(glued_value(values["stream_norm_first_step"]))
    last_step = float(glued_value(values["stream_norm_last_step"]))
    assert first_step > 3 * last_step and first_step < low      # each increment is below an update's size
    width = glued_value(values["deep_width"])
    assert glued_value(values["random_abs_cos"]) == f"{(2 / (3.141592653589793 * width)) ** 0.5:.2f}"
    assert float(glued_value(values["update_stream_abs_cos"])) < 0.2
    last = float(glued_value(values["stream_norm_last"]))
    assert float(glued_value(values["stream_norm_pythagoras"])) == pytest.approx(last, rel=0.15)


def test_the_caption_quotes_mean_increments_beside_the_dashed_lines_prediction(lesson):
    """Expert review: the increments are noisy block to block, so the caption says "less and less on
    average" and quotes the mean of the first four and of the last four blocks beside what the dashed
    (Pythagoras) curve predicts for the same blocks; no raw boolean is glued into the prose."""
    values = glued_text(lesson)
    first4 = float(glued_value(values["stream_norm_first4_step"]))
    last4 = float(glued_value(values["stream_norm_last4_step"]))
    predicted_first4 = float(glued_value(values["pythagoras_first4_step"]))
    predicted_last4 = float(glued_value(values["pythagoras_last4_step"]))
    assert 0 < last4 and first4 > 2 * last4 and predicted_first4 > 2 * predicted_last4
    assert first4 == pytest.approx(predicted_first4, rel=0.3)
    assert last4 == pytest.approx(predicted_last4, rel=0.5)
    every = glued_value(values["stream_norm_every_block_adds"])
    assert glued_value(values["stream_norm_adds_text"]).startswith("every one of" if every else "")
    source = " ".join((COURSE.root / "book" / "04-block.md").read_text().split())
    assert "by less and less on average" in source
    assert "{glue:text}`stream_norm_every_block_adds`" not in source
