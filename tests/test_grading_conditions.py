"""An account that can create no control group grades with memory and process limits per process only. That is
how the whole run was graded, not something a submission did: it is recorded as a condition beside the flags
(never a flag on every notebook, which would teach instructors to ignore flags), said once when the class
grader starts and once on the class report. A submission whose own group failed while others got theirs is
still flagged."""

from __future__ import annotations

import nbformat
import pytest

from autograder.sandbox import cgroups
from autograder.classgrader import grade_class
from autograder.plugins import sandbox_kernels
from autograder.cells import CONDITIONS, FLAGS, notebook_conditions, notebook_flags
from autograder.plugins.guarded_execute import GuardedExecute
from autograder.plugins.sandbox_kernels import PER_PROCESS_ONLY, ROOT_WITHOUT_CGROUP
from autograder.report import page
from autograder.report.data import ClassData, Result, read_notebook
from autograder.plugins.verdict import RecordFlags

pytestmark = pytest.mark.quick


def released_group(monkeypatch, machine_has_cgroups: bool) -> dict:
    """The resources after GuardedExecute looked for a kernel's group and found none."""
    monkeypatch.setattr(cgroups, "find", lambda name: None)
    monkeypatch.setattr(cgroups, "available", lambda: machine_has_cgroups)
    executor = GuardedExecute()
    executor._kernel_id = "kernel-1"
    resources: dict = {}
    executor.release_cgroup(resources)
    return resources


def test_an_account_without_cgroups_is_a_condition_of_the_run_not_a_flag(monkeypatch):
    monkeypatch.setattr(sandbox_kernels.os, "getuid", lambda: 1000)
    resources = released_group(monkeypatch, machine_has_cgroups=False)
    assert resources.get(FLAGS, []) == [] and resources[CONDITIONS] == [PER_PROCESS_ONLY]
    nb, _ = RecordFlags().preprocess(nbformat.v4.new_notebook(), resources)
    assert notebook_flags(nb) == [] and notebook_conditions(nb) == [PER_PROCESS_ONLY]


def test_as_root_the_condition_says_processes_were_not_limited_at_all(monkeypatch):
    """RLIMIT_NPROC does not bind root: without a group nothing limits a root grader's kernels' processes."""
    monkeypatch.setattr(sandbox_kernels.os, "getuid", lambda: 0)
    resources = released_group(monkeypatch, machine_has_cgroups=False)
    assert resources[CONDITIONS] == [ROOT_WITHOUT_CGROUP] and "processes not limited at all" in ROOT_WITHOUT_CGROUP
    monkeypatch.setattr(cgroups, "available", lambda: False)
    monkeypatch.delenv("COURSE_GRADING_SANDBOX", raising=False)
    assert grade_class.run_conditions(remote=False) == [ROOT_WITHOUT_CGROUP]
    flagged = released_group(monkeypatch, machine_has_cgroups=True)
    assert flagged[FLAGS] == ["limits per process only: no cgroup could be created for this submission, "
                              "and as root its processes were not limited"]


def test_one_submission_without_its_group_where_others_get_theirs_is_flagged(monkeypatch):
    monkeypatch.setattr(sandbox_kernels.os, "getuid", lambda: 1000)
    resources = released_group(monkeypatch, machine_has_cgroups=True)
    assert resources[FLAGS] == ["limits per process only: no cgroup could be created for this submission"]
    assert CONDITIONS not in resources


def test_the_class_grader_says_it_once_when_it_starts(monkeypatch):
    monkeypatch.setattr(sandbox_kernels.os, "getuid", lambda: 1000)
    monkeypatch.setattr(cgroups, "available", lambda: False)
    monkeypatch.delenv("COURSE_GRADING_SANDBOX", raising=False)
    assert grade_class.run_conditions(remote=False) == [PER_PROCESS_ONLY]
    assert grade_class.run_conditions(remote=True) == []          # a remote machine's own notebooks say it
    monkeypatch.setattr(cgroups, "available", lambda: True)
    assert grade_class.run_conditions(remote=False) == []


def test_the_class_report_says_it_once_for_the_class():
    graded = nbformat.v4.new_notebook()
    graded.metadata[FLAGS] = {"flags": [], "conditions": [PER_PROCESS_ONLY]}
    results = [Result(student, {}, 1.0, 1.0, 0.0) for student in ("ada", "bo", "cy")]
    for result in results[:2]:
        read_notebook(graded, "layernorm", result, [], summary=None)
    data = ClassData("01-layernorm", "course", [], results, [], 1.0)
    assert data.conditions == {PER_PROCESS_ONLY: 2}
    html = page.render(data, [], [], {"scores": "", "checks": ""}, None, {})
    assert html.count("this account can create no control group") == 1 and "(2 of 3 submissions)" in html
    assert 'id="flagged"' in html and "No submission was flagged." in html


def test_a_hand_in_cannot_tag_a_test_cell_to_be_skipped(monkeypatch):
    """nbclient skips a cell tagged skip-execution; a test that never ran would score as passed. Intake drops
    every tag of the hand-in (no release cell has one)."""
    from autograder.plugins.intake import Intake

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("assert False")])
    nb.cells[0].metadata["tags"] = ["skip-execution", "raises-exception"]
    monkeypatch.setattr(Intake, "take_handed_in_files", lambda self, resources: [])
    nb, _ = Intake().preprocess(nb, {"nbgrader": {}})
    assert "tags" not in nb.cells[0].metadata


def test_a_long_raw_cell_is_shown_as_bounded_text_in_bounded_time():
    """Cleaning nested tags with html5lib grows faster than the text (a 576 KB raw cell kept a worker busy for
    minutes); a raw cell over the markdown limit is cut and shown as text, its size bounded."""
    import time

    from autograder.pages.safe_markup import MAX_MARKDOWN_CHARS, safe_cell

    cell = nbformat.v4.new_raw_cell("<b><i><u><s>" * 48_000 + "&" * 1_000_000)
    started = time.monotonic()
    assert safe_cell(cell) == 1
    assert time.monotonic() - started < 5
    assert "<b>" not in cell.source and len(cell.source) < 6 * MAX_MARKDOWN_CHARS
    assert "more characters not shown by the grader" in cell.source
