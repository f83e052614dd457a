"""The README's performance table is `make bench`'s, not typed: bench/published.py wrote it from the
summary it keeps in bench/published.json."""

import json

import pytest

from bench import published

pytestmark = pytest.mark.quick


def test_the_readme_shows_the_table_generated_from_the_last_bench_run():
    summary = json.loads(published.PUBLISHED.read_text())
    assert published.published_table() == published.render(summary), (
        "README.md's performance table differs from what `python -m bench.published` writes from "
        "bench/published.json: rerun `make bench` (or that command) instead of editing the table")


def test_every_figure_says_when_and_how_busy_the_machine_was():
    summary = json.loads(published.PUBLISHED.read_text())
    assert summary["machine"]["cores"] and summary["machine"]["cpu"]
    for row in summary["figures"]:
        assert row["date"] and isinstance(row["load_before"], (int, float)), row["what"]
