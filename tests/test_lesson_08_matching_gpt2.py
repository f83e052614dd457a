"""Lesson 8's figures: our GPT reproduces transformers' GPT-2 small to float32 rounding."""

import pytest

from tests.glue import glued, glued_text, glued_value
from tools.notebooks import REPO


@pytest.fixture(scope="module")
def values(executions):
    execution = executions[REPO / "book" / "08-matching-gpt2.md"]
    assert execution.error is None, execution.error
    return glued_text(execution.output)


def test_reference_has_the_gpt2_small_budget(values):
    assert glued_value(values["reference_count"]) == 124_439_808


def test_lesson_conversion_is_the_modules(values):
    assert glued_value(values["same_as_module"]) is True


def test_logits_agree_to_float32_rounding(values):
    assert float(glued_value(values["logit_difference"])) < 2e-5


def test_each_wiring_mistake_is_orders_of_magnitude_louder(values):
    correct = float(glued_value(values["logit_difference"]))
    for mistake in ("diff_exact_gelu", "diff_no_norm", "diff_untransposed"):
        assert float(glued_value(values[mistake])) > 30 * correct, mistake


def test_lesson_has_its_figure(executions):
    assert "image/png" in glued(executions[REPO / "book" / "08-matching-gpt2.md"].output)["fig_wiring"]
