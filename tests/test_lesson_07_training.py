"""Lesson 7's figures: autograd matches the hand calculation, and the tiny GPT trains down to the exact
floor of its training text at every context length, on one thread and on two."""

import math
import re

import nbformat
import pytest

from tests.glue import glued, glued_values
from tools.course import COURSE
from tools.notebooks import PASSIVE_OPENMP, execute, read_notebook

pytestmark = [pytest.mark.lessons, pytest.mark.notebooks("book/07-training.md")]

LESSON = COURSE.root / "book" / "07-training.md"


@pytest.fixture(scope="module")
def values(executions):
    execution = executions[LESSON]
    assert execution.error is None, execution.error
    return glued_values(execution.output)


def test_autograd_matches_the_hand_calculation_exactly(values):
    assert values["autograd_loss"] == 0.5
    assert values["autograd_grad_w1"] == -0.5
    assert values["autograd_grad_w2"] == -2.0
    assert values["autograd_matches_hand"] is True


def test_toy_text_gives_112_windows_of_16_over_27_symbols(values):
    assert values["text_length"] == 128
    assert values["vocab_size"] == 27
    assert values["space_id"] == 0
    assert values["windows"] == 112
    assert values["examples"] == 1792


def test_untied_model_has_the_formula_count_plus_one_head(values):
    assert values["n_params"] == 27_712
    assert values["n_params_tied"] == 26_848
    assert values["head_params"] == 864
    assert values["count_matches_formula"] is True


def test_loss_starts_at_ln_27(values):
    assert values["ln27"] == f"{math.log(27):.3f}"
    assert abs(float(values["start_loss"]) - math.log(27)) < 0.05


def key_figures_hold(values):
    """The lesson's claims, as tolerances: these must hold on any thread count."""
    assert float(values["final_loss"]) < 0.2
    gaps = values["per_position_gaps"]
    assert len(gaps) == 16
    assert max(abs(gap) for gap in gaps) < 0.01, gaps           # on the floor at every position
    assert values["generated_in_text"] is True
    assert values["both_branches_in_text"] is True
    assert 0.3 < values["p_t_value"] < 0.7 and 0.3 < values["p_w_value"] < 0.7   # a near tie
    assert values["p_t_value"] + values["p_w_value"] > 0.9
    assert values["same_seed_same_text"] is True and values["topk_respected"] is True   # sampling
    entropy = values["entropy_by_temperature"]
    assert entropy[0.5] < entropy[1.0] < entropy[2.0]


def test_trained_model_sits_on_the_floor_at_every_position(values):
    key_figures_hold(values)


def test_floor_is_counted_exactly_from_the_text(values):
    assert values["floor_k1"] == "0.869"
    assert values["zero_floor_from"] == 14


def test_greedy_continuation_starts_from_the_prompt(values):
    assert values["generated"].startswith("the c")
    assert len(values["generated"]) == 45


def test_previous_character_baseline_and_strongest_head(values):
    assert values["uniform_previous_value"] == pytest.approx(sum(1 / k for k in range(2, 17)) / 15)
    assert values["uniform_previous"] == "0.16"
    assert float(values["best_previous"]) > values["uniform_previous_value"]
    assert 1 <= values["heads_above_uniform"] <= 8           # the strongest head is above it


def test_published_tinygpt_count_is_ours_plus_a_head_bias(values):
    """The source guide's TinyGPT has 27,739 parameters: our 27,712 plus a 27-number bias on its head,
    which then holds 891 (27 x 32 + 27) where ours holds 864."""
    assert values["n_params"] == 27_712
    assert values["seed_tinygpt_params"] == 27_739
    assert values["seed_head_params"] == 891 and values["head_params"] == 864
    assert values["head_bias"] == 27


def test_seeded_sampling_is_reproducible_and_varied(values):
    """Properties only: sampled (like greedy) text can change with the machine and the thread count."""
    assert values["same_seed_same_text"] is True
    assert values["distinct_texts"] >= 2


def test_temperature_reshapes_the_trained_distribution(values):
    entropy = values["entropy_by_temperature"]
    assert entropy[0.5] < entropy[1.0] < entropy[2.0]
    assert float(values["top_char_cold"]) > float(values["top_char_one"])
    assert values["model_vs_counted"] < 0.05          # at T = 1 the model gives the counted frequencies
    assert values["continuations_after_the"] == 4


def test_top_k_draws_only_the_k_likeliest(values):
    assert values["topk_respected"] is True


def test_lesson_has_its_figures(executions):
    figures = glued(executions[LESSON].output)
    for name in ("fig_loss_curve", "fig_floor", "fig_temperature", "fig_heatmaps"):
        assert "image/png" in figures[name], name


# What key_figures_hold reads, and the thread count: the two-thread run stops after the last cell gluing one.
KEY_FIGURES = {"final_loss", "per_position_gaps", "generated_in_text", "both_branches_in_text", "p_t_value",
               "p_w_value", "same_seed_same_text", "topk_respected", "entropy_by_temperature", "threads"}
GLUED = re.compile(r"""glue\(\s*["'](\w+)["']""")


def key_figures_run(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The lesson up to the last cell that glues a key figure, without the cells that only draw a figure
    (every name they glue is a fig_...): the smallest run that recomputes every key figure."""
    glues = [set(GLUED.findall(cell.source)) if cell.cell_type == "code" else set() for cell in notebook.cells]
    last = max(index for index, names in enumerate(glues) if names & KEY_FIGURES)
    notebook.cells = [cell for cell, names in zip(notebook.cells[:last + 1], glues)
                      if not names or not all(name.startswith("fig_") for name in names)]
    return notebook


def on_two_threads(folder):
    """The key figures' part of the lesson, executed with two threads (in the background: tests/conftest.py)."""
    prefix = folder / "07-key-figures.ipynb"
    nbformat.write(key_figures_run(read_notebook(LESSON)), prefix)
    return execute(prefix, folder / "07-two-threads.ipynb", threads=2, env=PASSIVE_OPENMP)


@pytest.mark.rerun.with_args(on_two_threads)      # with_args: a lone function would be decorated
def test_key_figures_hold_on_two_threads(rerun):
    """The session runs every notebook with one thread per kernel (tools.notebooks.execute_all); rerun
    this one with two and check the same tolerances. Matrix sums split differently across threads, so
    the digits may change; the conclusions must not."""
    run = rerun
    assert run.error is None, run.error
    values = glued_values(run.output)
    assert values["threads"] == 2
    key_figures_hold(values)


def test_loss_curve_caption_most_of_the_descent_comes_first(values):
    """The caption says the loss falls steeply at first, then flattens: most of the drop by step 100."""
    assert float(values["final_loss"]) < float(values["loss_step_100"])
    assert int(values["drop_by_step_100"].rstrip("%")) > 50


@pytest.mark.quick
def test_torch_compile_paragraph_claims_no_cost_the_page_does_not_measure():
    """Issue #40: the page times no compiled model, so it states no cost or saving of torch.compile."""
    source = " ".join(LESSON.read_text().split())
    paragraph = source[source.index("**`torch.compile`** saves time."):source.index("## Check your understanding")]
    assert "would cost more than it saves" not in paragraph
    assert not re.search(r"\d", paragraph.replace("{footcite:p}`ansel2024pytorch`", "")), paragraph


def adam_by_hand(gradient_of, theta, steps, lr, beta1=0.9, beta2=0.999, eps=1e-8):
    """Adam's update in plain Python floats, from Kingma and Ba's formulas: the test's own reference."""
    m = v = 0.0
    trace = []
    for t in range(1, steps + 1):
        g = gradient_of(theta)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
        theta = theta - lr * m_hat / (math.sqrt(v_hat) + eps)
        trace.append({"m": m, "v": v, "m_hat": m_hat, "v_hat": v_hat, "theta": theta})
    return trace


def test_adam_worked_example_is_the_hand_calculation(values):
    """L = theta^2 / 2 from theta = 1 at lr 0.1: theta 0.9, then 0.800412 (m 0.18, v 0.001809)."""
    trace = adam_by_hand(lambda theta: theta, 1.0, 2, lr=0.1)
    assert values["hand_theta1"] == "0.900000" == f"{trace[0]['theta']:.6f}"
    assert values["hand_m2"] == "0.180000" and values["hand_v2"] == "0.001809"
    assert values["hand_m_hat2"] == f"{0.18 / 0.19:.5f}" == "0.94737"
    assert values["hand_v_hat2"] == f"{0.001809 / 0.001999:.5f}" == "0.90495"
    assert values["hand_theta2"] == f"{trace[1]['theta']:.6f}" == "0.800412"
    assert values["hand_torch_diff"] < 1e-12               # torch.optim.AdamW on the same two steps


def test_adamw_from_scratch_agrees_with_torch_to_float_precision(values):
    assert values["adamw_check_steps"] >= 5
    assert values["adamw_max_diff"] < 1e-6
    # The per-parameter step size: gradients 100,000-fold apart, steps of the same size in units of lr.
    ratios = values["adamw_ratios"]
    assert len(ratios) == 3 and max(ratios) < 2 * min(ratios) and max(ratios) <= 1.5
    assert values["adamw_ratio_low"] == f"{min(ratios):.2f}" and values["adamw_ratio_high"] == f"{max(ratios):.2f}"


def test_step_size_cases_against_kingma_and_bas_bounds(values):
    """Steady gradient: exactly lr. One gradient after zeros: just under (1 - b1)/sqrt(1 - b2) = 3.16 lr,
    the paper's sparse case. A gradient growing 10% a step: past that bound (the prose says so)."""
    steady, spike, growing = values["bound_values"]
    paper = 0.1 / math.sqrt(0.001)
    assert values["bound_paper"] == f"{paper:.2f}" == "3.16"
    assert steady == pytest.approx(1.0, abs=1e-4)
    t = values["bound_steps"]
    assert spike == pytest.approx(paper * math.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t), abs=1e-3)
    assert spike < paper
    assert growing > paper + 1                               # "goes past that bound", several times lr


def test_forgetting_bias_correction_makes_early_steps_too_large(values):
    uncorrected = values["no_correction_values"]
    assert uncorrected[1] == pytest.approx(math.sqrt(10), abs=1e-3)      # (1 - b1) / sqrt(1 - b2)
    assert uncorrected[10] > max(uncorrected[1], uncorrected[100]) and uncorrected[100] > 3   # "still" at 100
    assert 1 < uncorrected[1000] < uncorrected[100]
    assert values["no_correction_10"] == f"{uncorrected[10]:.2f}"
    assert values["v_only_correction_1"] == "0.1"                        # m uncorrected: a tenth of lr


def test_adams_l2_weight_decay_is_not_adamws(values):
    """Adam's weight_decay (an L2 term in the gradient) decays the small-gradient weight far more than the
    large-gradient one; AdamW's decays both alike."""
    adam_small, adam_large = values["decay_effect"]["Adam"]
    adamw_small, adamw_large = values["decay_effect"]["AdamW"]
    assert adam_small > 10 * adam_large
    assert adamw_small == pytest.approx(adamw_large, rel=1e-4)
    assert adamw_small == pytest.approx(1 - (1 - 0.01 * 0.1) ** values["decay_steps"], rel=0.05)


@pytest.mark.quick
def test_adam_section_is_labelled_and_comes_before_the_first_optimizer():
    """Lesson 10 refers to `(adam-update)=`: the label sits directly above the section's heading, and the
    section comes before the lesson first builds an optimizer."""
    lines = LESSON.read_text().splitlines()
    label = lines.index("(adam-update)=")
    assert lines[label + 1].startswith("## "), lines[label + 1]
    source = LESSON.read_text()
    first_use = min(source.index(name) for name in ("torch.optim.Adam(", "torch.optim.AdamW(") if name in source)
    assert source.index("(adam-update)=") < first_use
    assert "{ref}`adam-update`" in source[source.index("## Training"):]


@pytest.mark.quick
def test_quiz_asks_about_bias_correction_and_adamw():
    import json
    quiz = json.loads((COURSE.root / "book" / "quizzes" / "07-training.json").read_text())
    questions = [q["question"] for q in quiz]
    assert any("bias correction" in q for q in questions)
    assert any("AdamW" in q and "weight_decay" in q for q in questions)
    for q in quiz:
        assert sum(answer.get("correct", False) for answer in q["answers"]) == 1, q["question"]
