"""The figures Lesson 3 (causal self-attention) states are computed in the lesson, and they are right."""

import math

import pytest

from tests.glue import glued, glued_values
from tools.course import COURSE

pytestmark = [pytest.mark.lessons, pytest.mark.notebooks("book/03-attention.md")]


@pytest.fixture(scope="module")
def values(executions):
    execution = executions[COURSE.root / "book" / "03-attention.md"]
    assert execution.error is None, execution.error
    return glued_values(execution.output)


@pytest.fixture(scope="module")
def figures(executions):
    return glued(executions[COURSE.root / "book" / "03-attention.md"].output)


def test_uniform_average_is_a_lower_triangular_product_and_a_masked_softmax_of_equal_scores(values):
    assert values["matmul_agrees"] is True
    assert values["softmax_is_average"] is True


def test_worked_example_matches_the_hand_calculation(values):
    e = math.e
    assert values["hand_row1"] == f"{1 / (1 + e):.4f}, {e / (1 + e):.4f}, 0.0000" == "0.2689, 0.7311, 0.0000"
    assert values["hand_out1"] == "1.0758, 2.9242, 0.0000, 0.0000"
    assert float(values["hand_out1"].split(", ")[0]) == pytest.approx(4 / (1 + e), abs=1e-4)


def test_raw_score_spread_grows_like_the_square_root_of_the_head_width(values):
    assert 0.9 <= float(values["ratio_min"]) <= float(values["ratio_max"]) <= 1.1
    assert float(values["std_1024"]) == pytest.approx(32, rel=0.1)


def test_unscaled_softmax_saturates_and_the_scaled_one_does_not(values):
    assert float(values["maxw_raw_4"]) < 0.5 < 0.9 < float(values["maxw_raw_1024"])
    assert float(values["ent_raw_1024"]) < 0.5
    assert float(values["maxw_scaled_hi"]) - float(values["maxw_scaled_lo"]) < 0.05
    assert 3.0 < float(values["ent_scaled_lo"]) <= float(values["ent_scaled_hi"]) < math.log(64)
    assert int(values["grad_ratio"]) >= 3


def test_scaling_by_the_model_width_flattens_the_softmax(values):
    assert float(values["wrong_scale_maxw"]) < float(values["right_scale_maxw"])


def test_head_split_round_trips_and_a_bare_view_mixes_positions(values):
    assert values["round_trip"] is True
    assert values["bare_mixes"] is True


def test_hand_built_heads_read_the_previous_and_the_first_position(values):
    assert float(values["prev_min"]) > 0.95
    assert float(values["first_min"]) > 0.95


def test_scratch_attention_is_the_reference_module_and_matches_sdpa(values):
    assert values["reference_agrees"] is True
    assert values["matches_sdpa"] is True
    assert float(values["sdpa_diff"]) < 1e-5


def test_perturbing_a_token_moves_only_it_and_later_positions(values):
    assert values["earlier_unchanged"] is True
    assert values["later_moved"] is True
    assert values["no_mask_leaks"] is True


def test_dropout_breaks_row_sums_in_training_and_is_off_in_eval(values):
    assert float(values["rowsum_min"]) < 1 < float(values["rowsum_max"])
    assert values["eval_same"] is True


def test_attention_cost_grows_quadratically(values):
    # The memory is exact: 2 heads x 2048^2 float32 numbers; the time is a measurement, held loosely.
    assert values["mib_2048"] == str(2 * 2048**2 * 4 // 2**20) == "32"
    assert values["mib_ratio"] == "4"
    assert 1.3 <= float(values["time_slope"]) <= 3.0
    assert float(values["ms_2048"]) > 0


def test_kv_cache_gives_the_same_logits_with_far_less_work(values):
    assert float(values["cache_diff"]) < 1e-5
    assert values["same_tokens"] is True
    assert values["flops_without"] > 100 * values["flops_with"]
    assert values["flops_ratio"] == f"{values['flops_without'] / values['flops_with']:.0f}"
    assert float(values["gen_speedup"]) > 1
    # GPT-2 small: keys and values of width 768 in 12 blocks, float32.
    assert values["cache_kib_per_token"] == 2 * 12 * 768 * 4 // 1024 == 72
    assert values["cache_mib_full"] == 72


def test_lesson_has_its_figures(figures):
    for name in ("fig_scaling", "fig_two_heads", "fig_cost"):
        assert "image/png" in figures[name], name
