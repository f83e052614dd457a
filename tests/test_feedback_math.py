"""autograder/pages/formulas.py's memory of what MathJax made: `nbgrader generate_feedback` makes a whole class's
pages in one process, and every page repeats the release's formulas, so each formula is typeset once per
process. Node.js is replaced here by a stand-in that counts its runs; the real typesetting is tested on
hostile pages (tests/test_hostile_pages.py)."""

from __future__ import annotations

import json
import subprocess

import pytest

from autograder.pages import formulas

pytestmark = pytest.mark.quick


@pytest.fixture
def node_runs(monkeypatch, tmp_path):
    """Each run of the stand-in Node.js: the formulas it was given. It typesets `$bad$` as unreadable."""
    runs: list[list] = []

    def run(command, input, **_):
        formulas = json.loads(input)
        runs.append(formulas)
        out = [None if tex == "bad" else f"<math>{tex}</math>" for tex, _ in formulas]
        return subprocess.CompletedProcess(command, 0, json.dumps(out), "")

    script = tmp_path / "node-main.js"
    script.write_text("")
    monkeypatch.setattr(formulas, "MATHJAX", script)
    monkeypatch.setattr(formulas.subprocess, "run", run)
    monkeypatch.setattr(formulas, "_typeset", {})
    return runs


def test_a_formula_is_typeset_once_per_process(node_runs):
    page = [("x^2", False), ("bad", False), ("x^2", True)]
    assert formulas.to_mathml(page, node="node") == ["<math>x^2</math>", None, "<math>x^2</math>"]
    assert formulas.to_mathml([("x^2", True), ("y", False), ("bad", False)], node="node") == [
        "<math>x^2</math>", "<math>y</math>", None]
    assert node_runs == [[["x^2", False], ["bad", False], ["x^2", True]], [["y", False]]]
    assert formulas.to_mathml(page, node="node")[0] == "<math>x^2</math>" and len(node_runs) == 2


def test_nothing_is_remembered_when_mathjax_cannot_run(node_runs, monkeypatch):
    def fails(command, **_):
        raise subprocess.TimeoutExpired(command, 1)

    monkeypatch.setattr(formulas.subprocess, "run", fails)
    assert formulas.to_mathml([("z", False)], node="node") == [None]
    assert formulas._typeset == {}


def test_the_memory_is_bounded(node_runs, monkeypatch):
    monkeypatch.setattr(formulas, "CACHE_ENTRIES", 3)
    long = "a" * (formulas.CACHE_MATHML_CHARS + 1)
    results = formulas.to_mathml([(str(n), False) for n in range(5)] + [(long, False)], node="node")
    assert results[:5] == [f"<math>{n}</math>" for n in range(5)] and results[5] == f"<math>{long}</math>"
    assert len(formulas._typeset) == 3 and (long, False) not in formulas._typeset


def test_a_long_formula_is_not_remembered(node_runs):
    long = "a" * (formulas.CACHE_MATHML_CHARS + 1)
    typeset = formulas.to_mathml([(long, False), ("b", False)], node="node")
    assert typeset == [f"<math>{long}</math>", "<math>b</math>"]
    assert list(formulas._typeset) == [("b", False)]
