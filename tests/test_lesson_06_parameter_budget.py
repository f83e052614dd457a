"""Lesson 6's parameter counts are the exact integers of GPT-2 and its variants, and its mistakes fail."""

import pytest

from tests.glue import glued, glued_values
from tools.course import COURSE

pytestmark = [pytest.mark.lessons, pytest.mark.notebooks("book/06-parameter-budget.md")]


@pytest.fixture(scope="module")
def lesson(executions):
    execution = executions[COURSE.root / "book" / "06-parameter-budget.md"]
    assert execution.error is None, execution.error
    return execution.output


@pytest.fixture(scope="module")
def values(lesson):
    """Every glued value except figures and Markdown tables, as Python values."""
    return glued_values(lesson)


def test_worked_example_matches_the_hand_count(values):
    assert values["hand_block"] == 244
    assert values["hand_model"] == 324


def test_gpt2_small_budget_table_has_the_exact_counts(values):
    expected = {
        "small_token": 38_597_376,
        "small_position": 786_432,
        "small_attention": 2_362_368,
        "small_mlp": 4_722_432,
        "small_block_norms": 3_072,
        "small_block": 7_087_872,
        "small_blocks": 85_054_464,
        "small_final_norm": 1_536,
        "small_head": 0,
        "small_total": 124_439_808,
    }
    assert {name: values[name] for name in expected} == expected


def test_formula_agrees_with_the_model_built_on_meta(values):
    assert values["small_meta"] == 124_439_808
    assert values["small_matches"] is True
    assert values["breakdown_matches"] is True
    assert values["head_listed"] is False


def test_tying_saves_one_token_table(values):
    assert values["small_untied"] == values["small_untied_formula"] == 163_037_184
    assert values["tie_saving"] == 50257 * 768


def test_budget_table_is_glued_as_markdown(lesson):
    table = glued(lesson)["budget_table"]["text/markdown"]
    assert "| total | N | 124,439,808 |" in table
    assert "38,597,376" in table and "7,087,872" in table


def test_counting_mistakes_are_shown_failing(values):
    assert values["state_dict_sum"] == 163_037_184
    assert values["state_dict_ok"] is False
    assert values["without_positions_ok"] is False
    assert values["without_final_norm_ok"] is False
    assert values["hard_coded_medium_ok"] is False


def test_variants_without_qkv_bias_and_the_compact_gpt(values):
    assert values["block_no_qkv_bias"] == values["block_no_qkv_bias_formula"] == 7_085_568
    assert values["compact_params"] == values["compact_formula"] == 32_192


def test_gpt2_family_counts_from_formula_and_meta(values):
    for name, count in [("small", 124_439_808), ("medium", 354_823_168),
                        ("large", 774_030_080), ("xl", 1_557_611_200)]:
        assert values[f"{name}_params"] == values[f"{name}_formula"] == count, name


def test_embedding_share_and_the_12ld2_approximation(values):
    assert values["token_share"] == "31.0%"
    assert values["embedding_share"] == "31.6%"
    assert values["approx_small"] == 12 * 12 * 768**2
    assert values["approx_small_ratio"] == "68.3%"
    assert values["approx_xl_ratio"] == "94.7%"
    assert values["crossover_width"] == "355"


def test_check_your_understanding_answers(values):
    assert values["q_seed_block"] == 788_992
    assert values["q_seed"] == 4_733_952
    assert values["q_medium_tie"] == 51_463_168
    assert values["q_mlp_fraction"] == "66.6%"
    assert values["q_double_context"] == 786_432


def test_lesson_has_its_figures(lesson):
    figures = glued(lesson)
    assert "image/png" in figures["fig_budget_family"]
    assert "image/png" in figures["fig_budget_width"]


def test_is_gpt2_medium_really_355m_is_asked_and_answered_from_the_notebook(values):
    """Seed 000's question: the hidden answer quotes the formula's count and the meta-built one."""
    assert values["medium_formula"] == values["medium_params"] == 354_823_168
    assert round(values["medium_params"] / 1e6) == 355
    source = (COURSE.root / "book" / "06-parameter-budget.md").read_text()
    question = source[source.index("Is it really \"355M\"?"):]
    answer = question[: question.index("```\n", question.index(":class: dropdown"))]
    assert "{glue:text}`medium_formula:,`" in answer and "{glue:text}`medium_params:,`" in answer
