"""Lesson 12's claims: the stream rebuilt from the hooks' writes to the last bit and no hook left behind; the
logit lens ending at the model's own loss; direct logit attribution adding up; induction heads grown in every
seed the lesson trains, found by their scores in the layer the circuit needs; ablating them and patching them.

Trained models move in their last digits with the machine and the thread count, so trained quantities are
checked with margins well inside what the prose says, and the prose's verdicts against the values they glue."""

import math

import pytest

from tests.glue import glued, glued_values
from tools.course import COURSE

pytestmark = [pytest.mark.lessons, pytest.mark.notebooks("book/12-looking-inside.md")]

LESSON = COURSE.root / "book" / "12-looking-inside.md"


@pytest.fixture(scope="module")
def values(executions):
    execution = executions[LESSON]
    assert execution.error is None, execution.error
    return glued_values(execution.output)


def test_the_stream_is_the_sum_of_the_hooked_writes_and_no_hook_is_left(values):
    assert values["stream_exact"] is True
    assert values["no_hook_left"] is True and values["no_hook_after_ablation"] is True
    assert values["leaky_outputs"] == 3             # the forgotten hook ran in each of 3 later passes


def test_the_logit_lens_ends_at_the_models_own_loss_and_falls_block_by_block(values):
    lens = values["lens"]
    assert list(lens) == ["embed", "attn0", "mlp0", "attn1", "mlp1"]
    assert values["lens_final_equals_model"] is True
    assert lens["mlp1"] == pytest.approx(values["val_loss_value"], abs=1e-5)
    assert lens["embed"] > lens["mlp0"] > lens["mlp1"]
    assert values["lens_falls_block_by_block"] is True
    ln_v = math.log(513)
    assert values["lens_embed_side"] == ("above" if lens["embed"] > ln_v else "below")
    assert values["val_loss_value"] < ln_v - 1.0


def test_direct_logit_attribution_adds_up_to_the_right_tokens_logit(values):
    shares = values["mean_share"]
    assert values["attribution_adds_up"] is True
    assert list(shares) == ["embed", "attn0", "mlp0", "attn1", "mlp1", "norm shift"]
    assert sum(shares.values()) == pytest.approx(float(values["mean_total"]), abs=0.01)
    assert values["largest_share"] == max(shares, key=shares.get)


def test_every_seed_grows_a_previous_token_head_in_layer_0_and_an_induction_head_in_layer_1(values):
    """The issue's condition: found by their scores in every seed tried, not one lucky seed; well above a head
    that spreads its weight evenly."""
    found, drops = values["found"], values["drop_steps"]
    assert sorted(found) == [0, 1, 2]
    even_previous, even_induction = float(values["even_previous"]), float(values["even_induction"])
    for seed, heads in found.items():
        assert heads["previous"][0] == 0 and heads["previous_score"] > max(0.35, 2 * even_previous), seed
        assert heads["induction"][0] == 1 and heads["induction_score"] > max(0.4, 5 * even_induction), seed
        assert heads["induction_heads"] >= 1
        assert drops[seed] is not None and 0 < drops[seed] < values["copy_steps"]
    assert values["previous_head_in_layer_0"] is True and values["induction_head_in_layer_1"] is True


def test_the_induction_heads_form_when_the_loss_falls(values):
    """Expert review: the drop is tied to the heads forming by scoring the copies kept during training."""
    for seed, (before, after) in values["formed"].items():
        assert after > before + 0.4 and after > 0.6, (seed, before, after)


def test_switching_off_an_induction_head_raises_only_the_loss_after_the_repeat(values):
    base_before, base_after = values["ablation_base"]
    ablation, induction = values["ablation"], values["induction_heads_seed0"]
    assert base_after < 0.3 and base_before > math.log(128) - 0.2
    assert induction and all(key.startswith("1.") for key in induction)
    for key in induction:
        before, after = ablation[key]["mean"]
        assert after - base_after > 0.3, key                  # the margin the page's claim rests on
        assert abs(before - base_before) < 0.2, key
    previous = values["previous_key"]
    assert ablation[previous]["mean"][1] - base_after > 1.0
    off = values["previous_off"]
    assert sorted(off) == [0, 1, 2] and off[0] == pytest.approx(ablation[previous]["mean"][1], abs=1e-6)
    shared = [seed for seed in off if off[seed] < 1.5]
    assert values["previous_shared_text"].startswith("Where it stays low" if shared else "In every seed")
    assert float(values["mean_before_most"]) < 0.2
    assert float(values["zero_before_most"]) > float(values["mean_before_most"]) + 0.3   # the page's contrast


def test_patching_names_the_induction_heads_as_carrying_the_answer(values):
    recovered, induction = values["recovered"], values["induction_heads_seed0"]
    assert values["induction_heads_carry_the_answer"] is True
    assert all(recovered[key] > 0.4 for key in induction)
    assert recovered[values["previous_key"]] < 0.3
    assert float(values["clean_logprob"]) > float(values["corrupted_logprob"]) + 2
    # Expert review: the patched previous-token head steers the induction heads to the wrong token's place.
    assert values["steered_value"] > values["unsteered_value"] + 0.5


def test_lesson_has_its_figures(executions):
    figures = glued(executions[LESSON].output)
    for name in ("fig_logit_lens", "fig_attribution", "fig_copy_training", "fig_formation", "fig_patterns"):
        assert "image/png" in figures[name], name


def test_the_training_length_is_a_papermill_parameter_whose_default_built_the_page(values, tmp_path):
    import nbformat
    import papermill

    from tools.notebooks import read_notebook

    notebook = tmp_path / "12-looking-inside.ipynb"
    nbformat.write(read_notebook(LESSON), notebook)
    defaults = {name: int(parameter["default"]) for name, parameter in papermill.inspect_notebook(str(notebook)).items()}
    assert defaults == {"copy_steps": values["copy_steps"]}


@pytest.mark.quick
def test_the_cpu_budget_the_lesson_states_is_the_one_the_benchmark_reports():
    import re

    from bench.notebooks import BUDGETED_LESSONS

    stated = re.search(r"the lesson's budget is (\d+) s", LESSON.read_text()).group(1)
    assert BUDGETED_LESSONS["book/12-looking-inside.md"][1] == int(stated)
    assert "{glue:text}`lesson_cpu_text` seconds of CPU time" in LESSON.read_text()
