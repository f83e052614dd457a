"""autograder/sandbox/preflight.py: before a class is graded, which limits hold here and why. On this machine (root, with
cgroups) every limit holds; a grading account without a delegated cgroup subtree is simulated by pointing the
cgroup code at a hierarchy that does not give it the memory and pids controllers, as systemd leaves an ordinary
user's slice."""

from __future__ import annotations

import pytest

from autograder.sandbox import cgroups, preflight
from autograder import grading_environment

pytestmark = pytest.mark.quick


def test_here_every_limit_holds_and_grading_can_go_ahead():
    if not cgroups.available():
        pytest.skip("this machine lets the grader create no cgroup")
    text, status = preflight.report()
    assert status == 0 and "Grading can go ahead here." in text
    assert "sandbox (bubblewrap): starts" in text
    assert text.count("holds for the whole submission") == len(preflight.NEEDS_CGROUP)
    assert "per process only" not in text


@pytest.fixture
def undelegated(monkeypatch, tmp_path):
    """An ordinary user's cgroup v2 slice, given cpu and io but neither memory nor pids."""
    slice_ = tmp_path / "user.slice" / "user-1000.slice"
    slice_.mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids\n")
    (slice_ / "cgroup.controllers").write_text("cpu io\n")
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    monkeypatch.setattr(cgroups, "_own_paths", lambda: {"": "/user.slice/user-1000.slice"})
    return slice_


def test_without_delegation_it_says_why_and_what_is_per_process(undelegated, monkeypatch):
    monkeypatch.setenv("COURSE_GRADING_CGROUPS", "optional")
    monkeypatch.setattr(preflight.os, "getuid", lambda: 1000)        # an ordinary account, as the slice says
    text, status = preflight.report()
    assert status == 0
    assert f"this account's cgroup ({undelegated}) is not given the memory and pids controllers" in text
    assert "Delegate=memory pids" in text
    rows = {row[0]: row[3] for row in preflight.limit_rows(preflight.try_cgroups(), sandbox=True)}
    assert [rows[limit.what] for limit in preflight.grading_environment.LIMITS
            if limit.variable in preflight.NEEDS_CGROUP] == ["per process only"] * 2
    assert "the class report once for the class" in text


def test_without_delegation_and_cgroups_required_grading_would_refuse(undelegated, monkeypatch):
    monkeypatch.setenv("COURSE_GRADING_CGROUPS", "required")
    text, status = preflight.report()
    assert status == 1 and "Grading would refuse here." in text and "grading refuses every submission" in text


def test_a_group_it_may_create_but_not_enter_is_reported(monkeypatch):
    class Unenterable:
        removed = False

        def add(self, pid):
            raise PermissionError(13, "Permission denied")

        def remove(self):
            Unenterable.removed = True

    monkeypatch.setattr(cgroups, "_parents", lambda: {"unified": cgroups.ROOT / "somewhere" / cgroups.GROUP})
    monkeypatch.setattr(cgroups, "create", lambda *args: Unenterable())
    found = preflight.try_cgroups()
    assert not found.works and "cannot be moved into it" in found.why and Unenterable.removed


def test_the_preflight_knows_what_enforces_every_declared_limit():
    groups = [preflight.GRADER_SIDE, preflight.NEEDS_CGROUP, preflight.IN_THE_SANDBOX, preflight.PER_PROCESS]
    for limit in preflight.grading_environment.LIMITS:
        assert sum(limit.variable in group for group in groups) == 1, limit.variable


@pytest.mark.parametrize("setting", ["course-grader", "/", "/a//b", "/a/../b", "/a/./b"])
def test_a_delegated_group_must_be_a_plain_cgroup_path(monkeypatch, setting):
    monkeypatch.setenv(grading_environment.CGROUP_PARENT_VARIABLE, setting)
    with pytest.raises(ValueError, match=grading_environment.CGROUP_PARENT_VARIABLE):
        grading_environment.cgroup_parent()


def test_kernels_groups_go_below_the_delegated_group_and_its_absence_is_named(undelegated, monkeypatch):
    """cgroup v2: the grader runs in an undelegated slice; the admin delegated another group to it."""
    delegated = undelegated.parent.parent / "course-grader.service"
    monkeypatch.setenv(grading_environment.CGROUP_PARENT_VARIABLE, "/course-grader.service")
    assert cgroups._parents() is None
    assert "names /course-grader.service, and there is no such group" in preflight.no_hierarchy_reason()
    delegated.mkdir()
    (delegated / "cgroup.controllers").write_text("memory pids\n")
    assert cgroups._parents() == {"unified": delegated / cgroups.GROUP}


def test_as_root_without_a_group_it_says_processes_are_not_limited_at_all(undelegated, monkeypatch):
    """RLIMIT_NPROC does not bind root: in a container with a read-only /sys/fs/cgroup a hand-in started 600
    processes against a limit of 256 while the preflight said "per process"."""
    monkeypatch.setenv("COURSE_GRADING_CGROUPS", "optional")
    monkeypatch.setattr(preflight.os, "getuid", lambda: 0)
    text, status = preflight.report()
    rows = {row[0]: row[2:] for row in preflight.limit_rows(preflight.try_cgroups(), sandbox=True)}
    processes = next(limit.what for limit in grading_environment.LIMITS if limit.variable == "COURSE_GRADING_PROCESSES")
    memory = next(limit.what for limit in grading_environment.LIMITS if limit.variable == "COURSE_GRADING_MEMORY_GB")
    assert rows[processes] == ("nothing: RLIMIT_NPROC does not bind root", "NOT LIMITED")
    assert rows[memory] == ("per-process limits (setrlimit)", "per process only")
    assert "processes NOT AT ALL, since RLIMIT_NPROC does not bind root" in text


def test_run_from_a_course_copy_it_checks_that_course(tmp_path, monkeypatch):
    """On a hub the grader account runs it from its course copy (the instructors' page): that course's
    configuration, not the checkout's (issue 56, item 5)."""
    course = tmp_path / "srv" / "course"
    (course / "autograder").mkdir(parents=True)
    (course / "autograder" / "course_directory.py").write_text("c = get_config()  # noqa: F821\n")
    monkeypatch.chdir(course / "autograder")
    assert preflight.course_here() == course
    monkeypatch.chdir(tmp_path)
    assert preflight.course_here() is None
