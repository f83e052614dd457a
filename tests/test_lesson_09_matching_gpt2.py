"""Lesson 9's figures: our GPT reproduces transformers' GPT-2 small to float32 rounding, on a reference
whose every parameter was randomized, and every wiring mistake in the lesson's table is orders of
magnitude louder than that. The optional real-GPT-2 path runs here on a checkpoint the test writes."""

import json

import pytest
import torch

from tests.glue import glued, glued_text, glued_value
from tools.course import COURSE

pytestmark = [pytest.mark.lessons, pytest.mark.notebooks("book/09-matching-gpt2.md")]

LESSON = COURSE.root / "book" / "09-matching-gpt2.md"
MISTAKES = ("diff_exact_gelu", "diff_no_norm", "diff_untransposed", "diff_swapped_ln", "diff_swapped_bias")


@pytest.fixture(scope="module")
def values(executions):
    execution = executions[LESSON]
    assert execution.error is None, execution.error
    return glued_text(execution.output)


def test_reference_has_the_gpt2_small_budget(values):
    assert glued_value(values["reference_count"]) == 124_439_808


def test_lesson_conversion_is_the_modules(values):
    assert glued_value(values["same_as_module"]) is True


def test_fresh_reference_hides_the_swaps_and_the_randomized_one_does_not(values):
    """A fresh transformers GPT-2 has LayerNorms at 1 and 0 and biases at 0: swapped tensors are equal."""
    assert glued_value(values["fresh_swaps_invisible"]) is True
    assert glued_value(values["fresh_distinct"]) is False
    assert glued_value(values["randomized_distinct"]) is True
    assert glued_value(values["randomized_swaps_visible"]) is True


def test_logits_agree_to_float32_rounding(values):
    assert float(glued_value(values["logit_difference"])) < 2e-5


@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_wiring_mistake_is_detected_by_orders_of_magnitude(values, mistake):
    """Swapped ln_1/ln_2 and a misplaced c_proj bias included: each at least 100 times the correct
    wiring's difference, which is float32 rounding."""
    correct = float(glued_value(values["logit_difference"]))
    assert float(glued_value(values[mistake])) > 100 * correct, mistake


def test_every_mistake_of_the_table_is_measured_on_the_page():
    source = LESSON.read_text()
    for mistake in MISTAKES:
        assert f"{{glue:text}}`{mistake}`" in source, f"the page never shows {mistake}"


def test_lesson_has_its_figure(executions):
    assert "image/png" in glued(executions[LESSON].output)["fig_wiring"]


def test_offline_page_says_how_to_run_the_real_gpt2(values):
    assert isinstance(glued_value(values["real_gpt2_available"]), bool)
    source = LESSON.read_text()
    assert "export GPT2_WEIGHTS=" in source and "from_pretrained('gpt2')" in source


# --- the real-GPT-2 path, offline, on a small checkpoint with random weights ---------------------------

def byte_level_alphabet():
    """GPT-2's byte-to-character table: each of the 256 bytes as one printable character."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = iter(range(256, 512))
    return [chr(b if b in printable else next(extra)) for b in range(256)]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A GPT-2-format folder (model and tokenizer, as save_pretrained writes them): 2 blocks of width
    32, a byte-level tokenizer with no merges (257 tokens), random weights."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    folder = tmp_path_factory.mktemp("gpt2-checkpoint")
    vocab = {char: index for index, char in enumerate(byte_level_alphabet())}
    vocab["<|endoftext|>"] = len(vocab)
    tokenizer = GPT2TokenizerFast(vocab=vocab, merges=[])
    end = vocab["<|endoftext|>"]
    config = GPT2Config(vocab_size=len(vocab), n_positions=64, n_embd=32, n_layer=2, n_head=4,
                        bos_token_id=end, eos_token_id=end)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():                      # no LayerNorm or bias left at its constant start
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "written-by-the-test.json").write_text(json.dumps({"purpose": "tests/test_lesson_09"}))
    return folder


def test_real_gpt2_path_runs_offline_on_a_checkpoint_folder(checkpoint, monkeypatch):
    from gptcourse.pretrained import ENV_VAR, compare_next_tokens, load_pretrained

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(ENV_VAR, str(checkpoint))
    loaded = load_pretrained()                 # found through the environment variable, as the lesson does
    assert loaded is not None
    hf_model, tokenizer = loaded
    result = compare_next_tokens(hf_model, tokenizer, "The cat sat on the", new_tokens=8, k=5)
    assert [token for token, _ in result.ours] == [token for token, _ in result.theirs]
    for (_, ours), (_, theirs) in zip(result.ours, result.theirs):
        assert abs(ours - theirs) < 1e-5
    assert result.max_logit_difference < 1e-4
    assert isinstance(result.continuation, str) and result.continuation   # its text depends on the machine


def test_a_named_folder_that_cannot_be_loaded_is_an_error(tmp_path, monkeypatch):
    from gptcourse.pretrained import ENV_VAR, load_pretrained

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(OSError):
        load_pretrained()


def test_exact_gelu_is_the_subtlest_mistake_as_the_caption_says(values):
    differences = {mistake: float(glued_value(values[mistake])) for mistake in MISTAKES}
    assert min(differences, key=differences.get) == "diff_exact_gelu", differences
