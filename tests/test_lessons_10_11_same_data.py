"""Lessons 11 and 12 train on lesson 10's data without importing it: it rebuilds the tokenizer and the ids in one
cell (cheaper than a module's worth of code, and a reader sees every line). This checks that the
lessons' ids are the same, token for token. It needs both lessons executed, so it lives in a file of its
own: each lesson's own test file still executes that lesson alone."""

import pytest

from tests.glue import glued_values
from tools.course import COURSE

TOKENS = COURSE.root / "book" / "10-tokens-and-evaluation.md"
RECIPE = COURSE.root / "book" / "11-training-recipe.md"
INSIDE = COURSE.root / "book" / "12-looking-inside.md"

pytestmark = [pytest.mark.lessons, pytest.mark.notebooks("book/10-tokens-and-evaluation.md",
                                                         "book/11-training-recipe.md",
                                                         "book/12-looking-inside.md")]


def test_lesson_11_trains_on_exactly_lesson_10s_ids(executions):
    """Training and validation ids (speeches ended by <|endoftext|>), the vocabulary and the model's size."""
    for lesson in (TOKENS, RECIPE):
        assert executions[lesson].error is None, executions[lesson].error
    tokens, recipe = glued_values(executions[TOKENS].output), glued_values(executions[RECIPE].output)
    for name in ("ids_sha256", "vocab_size", "train_tokens", "val_tokens", "n_params"):
        assert recipe[name] == tokens[name], name


def test_lesson_12_looks_inside_a_model_trained_on_exactly_lesson_10s_ids(executions):
    assert executions[INSIDE].error is None, executions[INSIDE].error
    tokens, inside = glued_values(executions[TOKENS].output), glued_values(executions[INSIDE].output)
    assert inside["ids_sha256"] == tokens["ids_sha256"]
