"""Lesson 8's figures: without residual additions an eight-block model stays on the no-context floor,
without LayerNorms it trains like the full block, on one thread and on two."""

import re

import jupytext
import nbformat
import pytest

from tests.glue import glued, glued_values
from tools.course import COURSE
from tools.notebooks import PASSIVE_OPENMP, execute

pytestmark = [pytest.mark.lessons, pytest.mark.notebooks("book/08-ablations.md")]

LESSON = COURSE.root / "book" / "08-ablations.md"
ABLATION_CELL = "histories = {name: train(model)"     # the last cell the two-thread check needs


@pytest.fixture(scope="module")
def values(executions):
    execution = executions[LESSON]
    assert execution.error is None, execution.error
    return glued_values(execution.output)


def test_hand_written_switches_agree_with_the_module(values):
    assert values["switches_agree"] is True


def test_no_context_floor_is_2_318(values):
    assert values["floor0"] == "2.318"


def test_variants_start_from_the_same_weights(values):
    assert values["same_start"] is True
    assert values["block_params"] == 12_704
    assert values["gpt2_block_params"] == 7_087_872


def key_figures_hold(values):
    """The ablation's claims, as tolerances: these must hold on any thread count."""
    floor = values["floor0_value"]
    assert values["spread_full_value"] > 0.7
    assert values["spread_nonorm_value"] > 0.7
    assert values["spread_nores_value"] < 0.1
    assert values["loss_full_value"] < 0.2
    assert values["loss_nonorm_value"] < 0.2
    assert abs(values["loss_nores_value"] - floor) < 0.01


def test_no_residual_stays_on_the_floor_and_the_others_learn(values):
    key_figures_hold(values)


def test_gradients_do_not_vanish_without_residuals(values):
    assert values["grad_nores_min_value"] > values["grad_full_max_value"]


def test_no_residual_learns_at_two_blocks_and_stalls_from_four(values):
    losses = values["depth_losses"]
    assert losses[2] < 0.2
    assert abs(losses[4] - values["floor0_value"]) < 0.01
    assert values["deepest_that_learns"] == 2
    assert values["shallowest_stuck"] == 4


def test_lesson_has_its_figures(executions):
    figures = glued(executions[LESSON].output)
    for name in ("fig_init", "fig_ablation_curves", "fig_depth"):
        assert "image/png" in figures[name], name


def draws_only(cell) -> bool:
    """A code cell whose every glued name is a figure (fig_...): the key figures never read it."""
    names = re.findall(r"""glue\(\s*["'](\w+)["']""", cell.source) if cell.cell_type == "code" else []
    return bool(names) and all(name.startswith("fig_") for name in names)


def on_two_threads(folder):
    """The lesson up to the three-model ablation (the depth sweep after it is left out to save time),
    without the cells that only draw a figure, executed with two threads (in the background:
    tests/conftest.py)."""
    notebook = jupytext.read(LESSON)
    last = next(i for i, cell in enumerate(notebook.cells) if ABLATION_CELL in cell.source)
    notebook.cells = [cell for cell in notebook.cells[:last + 1] if not draws_only(cell)]
    # The lesson does not print its thread count (lesson 7 does); this run records it, so the test can tell
    # that two threads were used (a leaked MKL_NUM_THREADS=1 once made lesson 7's "two threads" one).
    notebook.cells.append(nbformat.v4.new_code_cell(
        'import torch\nglue("rerun_threads", torch.get_num_threads(), display=False)'))
    prefix = folder / "08-prefix.ipynb"
    nbformat.write(notebook, prefix)
    return execute(prefix, folder / "08-two-threads.ipynb", threads=2, env=PASSIVE_OPENMP)


@pytest.mark.rerun.with_args(on_two_threads)      # with_args: a lone function would be decorated
def test_key_figures_hold_on_two_threads(rerun):
    """The session runs every notebook with one thread per kernel (tools.notebooks.execute_all). The
    lesson's key figures, rerun with two threads, must hold to the same tolerances."""
    run = rerun
    assert run.error is None, run.error
    values = glued_values(run.output)
    assert values["rerun_threads"] == 2
    key_figures_hold(values)


def test_quiz_states_the_notebooks_model_size(values):
    """Quiz feedback quotes the eight-block model's size; it must be the size the notebook counted
    (about 104 thousand, eight blocks of 12,704 plus the tables and the head), not one block's."""
    import json
    import re

    assert values["model_params"] == 8 * values["block_params"] + 27 * 32 + 16 * 32 + 2 * 32 + 27 * 32
    quiz = (COURSE.root / "book" / "quizzes" / "08-ablations.json").read_text()
    stated = [int(n) for n in re.findall(r"(\d+)-thousand-parameter", json.dumps(json.loads(quiz)))]
    assert stated and all(n == values["model_params_thousands"] for n in stated), stated


def test_initial_spread_caption_falls_every_block_without_residuals(values):
    """The figure's caption: without the additions the spread shrinks at every block; with them it stays
    high at every level."""
    assert values["nores_spread_falls_every_block"] is True
    assert float(values["kept_spread_min"]) > 0.5
