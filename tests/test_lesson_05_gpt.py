"""Lesson 5 assembles a GPT that agrees with the reference, and its tests catch the mistakes it shows."""

import pytest

from tests.glue import glued, glued_values
from tools.course import COURSE

pytestmark = [pytest.mark.lessons, pytest.mark.notebooks("book/05-gpt.md")]


@pytest.fixture(scope="module")
def lesson(executions):
    execution = executions[COURSE.root / "book" / "05-gpt.md"]
    assert execution.error is None, execution.error
    return execution.output


@pytest.fixture(scope="module")
def values(lesson):
    """Every glued value except the figures, as Python values."""
    return glued_values(lesson)


def test_worked_example_matches_the_hand_calculation(values):
    assert values["hand_stream"] == "[[1, 1], [11, 0], [2, 9]]"
    assert values["hand_logits"] == "[1, 2, 3, 0]"


def test_lesson_gpt_agrees_with_the_reference_module(values):
    assert values["same_seed_same_weights"] is True
    assert values["same_as_reference"] is True


def test_logits_have_shape_batch_positions_vocabulary(values):
    assert values["logits_shape"] == "[3, 10, 27]"


def test_tying_saves_vocab_times_width(values):
    assert values["tie_saving"] == 27 * 32
    assert values["gpt2_tie_saving"] == 38_597_376


def test_initialization_is_gpt2s(values):
    assert abs(values["init_std"] - 0.02) < 0.002
    assert values["init_count"] > 10_000
    assert values["biases_zero"] is True
    assert values["scales_one"] is True


def test_a_sequence_longer_than_the_context_raises(values):
    assert values["context_error_raised"] is True
    assert "exceeds the model's context of 16" in values["context_error"]


def test_leakage_test_passes_with_the_mask_and_fails_without_it(values):
    assert values["masked_passes"] is True
    assert values["unmasked_passes"] is False
    assert values["masked_earlier_moved"] == 0
    assert values["unmasked_earlier_moved"] == 12 * 11 // 2


def test_shared_block_list_is_caught_by_the_parameter_count(values):
    assert values["shared_stack_ok"] is False
    assert values["distinct_stack_params"] == 2 * values["shared_stack_params"]


def test_dropout_makes_passes_differ_until_eval(values):
    assert values["train_repeatable"] is False
    assert values["train_leakage"] is False
    assert values["eval_repeatable"] is True
    assert values["eval_leakage"] is True


def test_position_mistakes_are_shown_failing(values):
    assert float(values["spread_without_positions"]) < 1e-4 < float(values["spread_with_positions"])
    assert values["wrong_axis_raises"] is True
    assert values["wrong_axis_single_ok"] is False


def test_greedy_generation_appends_the_requested_tokens(values):
    assert values["generated_shape"] == "[1, 27]"
    assert len(values["continuation"]) == 20


def test_lesson_has_its_figure(lesson):
    assert "image/png" in glued(lesson)["fig_leakage"]


def test_the_same_token_starts_static_and_leaves_the_blocks_contextual(values):
    """'bank' in 'the river bank' and 'the money bank': one row at the bottom, two vectors at the top."""
    assert values["bank_bottom_same"] is True
    assert float(values["bank_top_gap"]) > 0.01


@pytest.mark.quick
def test_page_separates_gpt2s_initialization_from_the_courses():
    """GPT-2 scales its residual layers by 1/sqrt(N); the course does not, and the page says both."""
    source = " ".join((COURSE.root / "book" / "05-gpt.md").read_text().split())
    assert "1/\\sqrt{N}" in source and "The course leaves the paper's scaling out" in source
    assert "GPT-2's initialization:" not in source


def test_every_sequence_gets_the_same_position_rows(values):
    """The printed check is True; subtracting the token rows back out differs only by float32 rounding."""
    assert values["same_position_rows"] is True
    assert float(values["position_recovery_gap"]) < 1e-5


# The key/value cache, moved here from lesson 3 (issue #40): it runs a whole GPT and replaces the generation
# loop, both built in this lesson.
def test_kv_cache_gives_the_same_logits_with_far_less_work(values):
    assert float(values["cache_diff"]) < 1e-5
    assert values["same_tokens"] is True
    assert values["flops_without"] > 100 * values["flops_with"]
    assert values["flops_ratio"] == f"{values['flops_without'] / values['flops_with']:.0f}"
    # A ratio of CPU times, best of five runs each way taken in turns: other programs' load does not count
    # (a single wall-clock run once read 0.8 at a load of about 4). The cache does over 100 times less
    # arithmetic, so even Python's fixed cost per step leaves the margin above 1 wide.
    assert float(values["gen_speedup"]) > 1
    # GPT-2 small: keys and values of width 768 in 12 blocks, float32.
    assert values["cache_kib_per_token"] == 2 * 12 * 768 * 4 // 1024 == 72
    assert values["cache_mib_full"] == 72


def test_cached_path_refuses_several_new_tokens(values):
    assert values["cache_two_refused"] is True



@pytest.mark.quick
def test_cache_section_comes_after_generation_and_its_quiz_question_moved_with_it():
    import json

    source = (COURSE.root / "book" / "05-gpt.md").read_text()
    assert source.index("## A random model already runs") < source.index("## Faster generation: a key/value cache")
    quizzes = COURSE.root / "book" / "quizzes"
    questions = {name: [q["question"] for q in json.loads((quizzes / name).read_text())]
                 for name in ("03-attention.json", "05-gpt.json")}
    assert any("key/value cache" in q for q in questions["05-gpt.json"])
    assert not any("key/value cache" in q for q in questions["03-attention.json"])


@pytest.mark.quick
def test_cache_section_says_gpt2s_released_code_already_caches_keys_and_values():
    """Issue 53: OpenAI's src/model.py passes `past` into attn, which returns `present = tf.stack([k, v],
    axis=1)` and concatenates `past` in front; the lesson says so where it presents the cache."""
    source = " ".join((COURSE.root / "book" / "05-gpt.md").read_text().split())
    section = source[source.index("## Faster generation: a key/value cache"):source.index("```{figure} _static/diagrams/kv-cache.svg")]
    assert "present = tf.stack([k, v], axis=1)" in section and "`past`" in section
    assert "{footcite:p}`openai2019gpt2code`" in section
