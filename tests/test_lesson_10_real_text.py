"""Lesson 10's figures: a byte-level BPE tokenizer on Tiny Shakespeare (the same merges as a short one
written in the lesson), GPT-2's real vocabulary counted from its own files, a validation split that shows
overfitting, the training recipe measured against the seed-to-seed noise, and the FLOPs and MFU.

Trained losses change in their last digits with the machine and the thread count, so the claims on
them are checked with margins; what is counted (the corpus, the tokenizer, GPT-2's files) is exact."""

import math

import pytest

from tests.glue import glued, glued_values
from tools.course import COURSE

pytestmark = [pytest.mark.lessons, pytest.mark.notebooks("book/10-real-text.md")]

LESSON = COURSE.root / "book" / "10-real-text.md"


@pytest.fixture(scope="module")
def values(executions):
    execution = executions[LESSON]
    assert execution.error is None, execution.error
    return glued_values(execution.output)


def test_the_corpus_is_the_shipped_tiny_shakespeare(values):
    assert values["corpus_sha256"] == "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
    assert values["corpus_bytes"] == values["corpus_chars"] == 1_115_394      # plain ASCII: one byte each
    assert values["corpus_lines"] == 40_000
    assert values["train_chars"] + values["val_chars"] == values["corpus_chars"]
    assert 0.09 < values["val_chars"] / values["corpus_chars"] < 0.11         # the last tenth


def test_the_hand_example_merges_at_then_th_then_the(values):
    assert values["hand_first_merge"] == "at" and values["hand_first_count"] == 3
    assert values["example_merges"] == [("at", 3), ("th", 2), ("the", 2)]
    assert values["example_symbols"] == [22, 19, 17, 15]                      # what the diagram draws
    assert values["example_bytes"] == 22 and values["example_final"] == 15
    assert values["example_left_max"] == 1


def test_tokenizer_has_256_bytes_256_merges_and_end_of_text(values):
    assert values["vocab_size"] == 513 and values["n_merges"] == 256
    assert values["ln_vocab"] == f"{math.log(513):.3f}"
    assert values["same_first_merges"] is True          # the lesson's BPE agrees with tokenizers'
    assert values["leaked_merges"] > 0                  # the validation text would change the merges


def test_compression_is_about_two_bytes_per_token_and_gpt2_packs_more(values):
    assert 1.7 < float(values["bytes_per_token"]) < 2.2
    assert 1.7 < values["val_bytes_per_token_value"] < 2.2
    assert values["gpt2_bytes_per_token_value"] > 1.4 * values["val_bytes_per_token_value"]
    assert values["gpt2_line_tokens"] < values["ours_line_tokens"]


def test_gpt2_vocabulary_is_256_bytes_plus_50000_merges_plus_end_of_text(values):
    assert values["gpt2_files_verified"] is True
    assert (values["gpt2_bytes"], values["gpt2_merges"], values["gpt2_special"]) == (256, 50_000, 1)
    assert values["gpt2_vocab"] == 50_257 and values["gpt2_eot_id"] == 50_256
    assert values["gpt2_layout_holds"] is True
    assert values["two_implementations_agree"] is True


def test_gpt2_table_would_dwarf_the_small_model(values):
    assert values["n_params"] == 137_024
    assert values["gpt2_table_at_64"] == 50_257 * 64
    assert int(values["gpt2_table_ratio"]) == round(50_257 * 64 / (137_024 - 513 * 64))


def test_training_starts_at_ln_v(values):
    assert abs(values["start_loss_value"] - math.log(513)) < 0.05


def test_the_small_slice_overfits_and_the_whole_text_does_not(values):
    """What the figure's alt text and the prose say: curves together on the whole text; on the slice,
    the training loss keeps falling while the validation loss turns up from its minimum."""
    assert abs(values["full_gap"]) < 0.15
    assert float(values["full_passes"]) < 1                # "sees each token less than once"
    assert values["small_gap"] > 1.0
    assert values["small_val_rise"] > 0.1
    assert values["small_best_step"] < values["general_steps"]
    assert float(values["small_train_final"]) < float(values["full_train_final"])


def test_floors_fall_on_training_text_and_the_model_beats_the_unigram(values):
    assert values["floors_fall"] is True
    assert float(values["trigram_val"]) > float(values["bigram_val"])      # long counts do not generalize
    assert float(values["k3_val"]) > float(values["trigram_val"])
    assert values["model_val_value"] < values["unigram_val_value"] - 0.5
    assert values["k3_unseen_value"] > 0.1                 # many long contexts of new text are new
    relation = "above" if values["model_val_value"] > values["bigram_val_value"] else "below"
    assert values["model_vs_bigram"] == relation


def test_parameter_groups_cover_every_parameter_once(values):
    assert values["groups_cover_model"] is True
    assert values["decayed_tensors"] == 8                  # qkv, proj, up, down in each of 2 blocks
    assert values["decayed_numbers"] == 2 * 12 * 64 * 64
    assert values["decayed_numbers"] + values["undecayed_numbers"] == values["n_params"]


def test_schedule_warms_up_linearly_then_decays_to_a_tenth(values):
    rates = values["lr_log"]
    assert len(rates) == values["recipe_steps"]
    assert rates[0] == pytest.approx(0.01 / 20) and rates[19] == pytest.approx(0.01)
    assert all(a >= b for a, b in zip(rates[19:], rates[20:]))
    assert 0.001 <= rates[-1] < 0.0011
    assert values["schedule_start"] == "0.05" and values["schedule_end"] == "0.10"


def test_clipping_caps_the_norm_and_the_verdict_matches_the_measurements(values):
    assert values["norm_after_max"] <= 1.0 + 1e-5
    assert 0 <= values["clipped_steps"] <= values["recipe_steps"]
    gains, spread = values["recipe_gains"], values["seed_spread"]
    assert len(gains) == 3 and spread > 0
    assert values["clear_pieces"] == sum(abs(gain) > spread for gain in gains)
    expected = ("none of", "only one of", "two of", "all three")[values["clear_pieces"]]
    assert values["clear_verdict"].startswith(expected)


def test_flops_per_token_and_mfu(values):
    n_matmul = values["n_params"] - 64 * 64                 # the position table is only looked up
    assert values["n_matmul"] == n_matmul
    assert values["attention_flops"] == 12 * 2 * 64 * 64
    assert values["flops_per_token"] == 6 * n_matmul + 12 * 2 * 64 * 64
    assert 0 < values["mfu_value"] < 1


def test_lesson_has_its_figures(executions):
    figures = glued(executions[LESSON].output)
    for name in ("fig_generalization", "fig_recipe"):
        assert "image/png" in figures[name], name



def test_the_run_lengths_are_papermill_parameters_whose_defaults_built_the_page(values, tmp_path):
    """A reader (or CI) can change the training lengths with `papermill -p`; the cell tagged `parameters`
    holds the values the page's prose and numbers were computed with."""
    import nbformat
    import papermill

    from tools.notebooks import read_notebook

    notebook = tmp_path / "10-real-text.ipynb"
    nbformat.write(read_notebook(LESSON), notebook)
    defaults = {name: int(parameter["default"]) for name, parameter in papermill.inspect_notebook(str(notebook)).items()}
    assert defaults == {"general_steps": values["general_steps"], "recipe_steps": values["recipe_steps"]}
