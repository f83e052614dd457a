"""The grading configuration fails closed, changes nothing when it loads, and the grader page states the
limits the code applies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from autograder import grading_environment
from tools import grading


@pytest.mark.quick
def test_each_limit_can_be_changed_by_its_variable(monkeypatch):
    monkeypatch.setenv("COURSE_GRADING_MEMORY_GB", "1.5")
    assert grading_environment.value("COURSE_GRADING_MEMORY_GB") == 1.5
    monkeypatch.delenv("COURSE_GRADING_MEMORY_GB")
    assert grading_environment.value("COURSE_GRADING_MEMORY_GB") == 4


@pytest.fixture
def course_limits():
    """The process's configured limits, put back as they were after the test."""
    saved = dict(grading_environment._configured)
    yield
    grading_environment.use_limits(saved)


@pytest.mark.quick
def test_each_limit_is_a_setting_that_its_variable_overrides(monkeypatch, course_limits):
    from traitlets.config import Config

    from autograder.limits import Limits

    monkeypatch.delenv("COURSE_GRADING_MEMORY_GB", raising=False)
    config = Config()
    config.Limits.memory_gb = 8
    grading_environment.use_limits(Limits(config=config).configured())
    assert grading_environment.value("COURSE_GRADING_MEMORY_GB") == 8
    assert grading_environment.value("COURSE_GRADING_DISK_MB") == 512              # the rest as declared
    monkeypatch.setenv("COURSE_GRADING_MEMORY_GB", "1.5")
    assert grading_environment.value("COURSE_GRADING_MEMORY_GB") == 1.5            # the run's override wins
    assert Limits(config=config).values()["COURSE_GRADING_MEMORY_GB"] == 1.5
    with pytest.raises(ValueError, match="no such limit"):
        grading_environment.use_limits({"COURSE_GRADING_MEMORY": 1})


@pytest.mark.grading
def test_a_configured_limit_is_what_the_sandbox_applies(tmp_path, monkeypatch, course_limits):
    """c.Limits.disk_mb = 8 in the configuration: the sandbox's launcher, a process of its own, gets it from
    the grader (its kernelspec's environment), and the kernel cannot write 20 MB; the flag names the limit."""
    from traitlets.config import Config

    from autograder.cells import FLAGS
    from autograder.plugins.guarded_execute import GuardedExecute

    monkeypatch.delenv("COURSE_GRADING_DISK_MB", raising=False)
    config = Config()
    config.Limits.disk_mb = 8
    (tmp_path / "work").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "written = 0\n"
        "with open('filler.bin', 'wb') as handle:\n"
        "    for _ in range(20):\n"
        "        handle.write(b'x' * 2**20)\n"
        "        handle.flush()\n"
        "        written += 1\n")])
    nb.cells.append(nbformat.v4.new_code_cell("print('written', written)"))
    executor = GuardedExecute(config=config, extra_arguments=grading_environment.kernel_arguments(),
                              startup_timeout=int(grading_environment.value("COURSE_GRADING_KERNEL_STARTUP_TIMEOUT")))
    nb, resources = executor.preprocess(nb, {"metadata": {"path": str(tmp_path / "work")}})
    written = int(nb.cells[1].outputs[0].text.split()[1])
    assert written < 8, f"the kernel wrote {written} MB under a configured limit of 8 MB"
    assert any("disk limit reached" in flag and "(8 MB of files)" in flag for flag in resources[FLAGS])


@pytest.mark.grading
def test_grading_refuses_with_a_clear_message_where_the_sandbox_cannot_start(tmp_path):
    """In a container that blocks user namespaces bwrap exits at once; nbgrader must stop, not grade
    every student into a dead kernel (and never grade unsandboxed)."""
    course = grading.make_course(tmp_path / "course")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    result = grading.nbgrader(course, "generate_assignment", "01-layernorm", "--force", check=False, env=env)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "cannot start here" in output and "No permissions to creating new namespace" in output
    assert not (course / "exercises" / "01-layernorm").exists()


@pytest.mark.grading
def test_an_error_in_the_configuration_stops_nbgrader_instead_of_grading_with_defaults(tmp_path):
    course = grading.make_course(tmp_path / "course")
    (course / "autograder" / "course_directory.py").write_text("raise ImportError('broken layout')\n")
    result = grading.nbgrader(course, "generate_assignment", "01-layernorm", "--force", check=False)
    assert result.returncode != 0
    assert "nbgrader_config.py failed, so nothing is graded" in result.stdout + result.stderr


LOAD = """
import json, os, sys
from traitlets.config.loader import PyFileConfigLoader
before = dict(os.environ)
config = PyFileConfigLoader("nbgrader_config.py", path=os.getcwd()).load_config()
changed = sorted(key for key in {*before, *os.environ} if before.get(key) != os.environ.get(key))
print(json.dumps({"changed": changed, "startup_timeout": config.Execute.startup_timeout,
                  "sandbox": config.GuardedExecute.sandbox}))
"""


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under root, with its modification time and size."""
    return {str(path.relative_to(root)): (path.lstat().st_mtime_ns, path.lstat().st_size)
            for path in [root, *root.rglob("*")]}


@pytest.mark.grading
def test_loading_the_configuration_changes_nothing_on_disk_or_in_the_environment(tmp_path):
    """nbgrader loads nbgrader_config.py for every command (and the class grader once per worker): no
    kernelspec written, no temporary folder made, no environment variable set. (-B: Python's own bytecode
    cache is not the configuration's doing.)"""
    course = grading.make_course(tmp_path / "course")
    scratch_tmp = tmp_path / "tmp"
    scratch_tmp.mkdir()
    before = snapshot(course)
    result = subprocess.run([sys.executable, "-B", "-c", LOAD], cwd=course / "autograder", capture_output=True,
                            text=True, env={**os.environ, "TMPDIR": str(scratch_tmp)})
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.splitlines()[-1])
    assert snapshot(course) == before
    assert list(scratch_tmp.iterdir()) == []
    assert loaded == {"changed": [], "sandbox": True,
                      "startup_timeout": grading_environment.value("COURSE_GRADING_KERNEL_STARTUP_TIMEOUT")}


@pytest.mark.grading
def test_a_kernels_socket_folder_lives_exactly_as_long_as_the_kernel(tmp_path, monkeypatch):
    """The sandboxed kernel talks over Unix sockets in a folder made for it when it starts and removed
    when it stops; the kernel comes from the kernelspec grading_environment.py declares, installed nowhere."""
    import tempfile

    from autograder.plugins.guarded_execute import GuardedExecute

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "work").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from ipykernel.kernelapp import IPKernelApp\n"
        "app = IPKernelApp.instance()\n"
        "print(app.transport, app.ip)")])
    executor = GuardedExecute(extra_arguments=grading_environment.kernel_arguments(),
                              startup_timeout=int(grading_environment.value("COURSE_GRADING_KERNEL_STARTUP_TIMEOUT")))
    nb, _ = executor.preprocess(nb, {"metadata": {"path": str(tmp_path / "work")}})
    transport, ip = nb.cells[0].outputs[0].text.split()
    assert transport == "ipc" and Path(ip).parent.parent == tmp_path / "tmp"
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.grading
def test_the_notebook_time_limit_cuts_the_running_cell_short_and_skips_the_rest(tmp_path, monkeypatch):
    """COURSE_GRADING_NOTEBOOK_TIMEOUT bounds the whole notebook: the cell running when it is used up gets only
    what is left (the notebook's 12 s less the kernel's start, of its own 60), and the cells after it are not
    run; both are flagged. (A kernel slower to start than the whole limit leaves no cell run: the same verdict.)"""
    from autograder.cells import FLAGS
    from autograder.plugins.guarded_execute import GuardedExecute

    monkeypatch.setenv("COURSE_GRADING_NOTEBOOK_TIMEOUT", "12")
    (tmp_path / "work").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time\ntime.sleep(120)"),
                                         nbformat.v4.new_code_cell("print('never')")])
    executor = GuardedExecute(extra_arguments=grading_environment.kernel_arguments(), timeout=60,
                              startup_timeout=int(grading_environment.value("COURSE_GRADING_KERNEL_STARTUP_TIMEOUT")))
    started = time.monotonic()
    nb, resources = executor.preprocess(nb, {"metadata": {"path": str(tmp_path / "work")}})
    seen = f"outputs {[cell.outputs for cell in nb.cells]}, flags {resources.get(FLAGS)}"
    # The limit is 12 s and the cell sleeps 120 s: starting the kernel (2-4 s idle, about twice that at a load
    # of 4) and the limit stay far under 60 s, while a limit not applied would take the cell's 120 s.
    assert time.monotonic() - started < 60, f"the sleeping cell ran past the notebook's time limit: {seen}"
    assert [output.get("ename") for output in nb.cells[1].outputs] == ["NotebookTimeLimit"], seen
    assert any(flag.startswith("notebook time limit reached") for flag in resources[FLAGS]), seen


@pytest.mark.quick
def test_the_code_sent_to_a_remote_cluster_is_the_package_and_nothing_of_the_course(tmp_path, monkeypatch):
    """cluster.CourseCode packs the grading package by an allow-list: the package folder is also the course's
    autograder/ folder, and a student's hand-in (a .py file in submitted/), a graded notebook's folder or
    the catalog never leave the instructor's machine. The same code packs into the same bytes."""
    import io
    import zipfile

    from autograder.classgrader import cluster

    for name in ["course.py", "nbgrader_config.py", "course_directory.py", "submitted/ada/01-layernorm/evil.py",
                 "autograded/ada/01-layernorm/helper.py", "catalog/generate.py", "plugins/intake.py",
                 "sandbox/stubs/gptcourse/__init__.py", "report/page.py"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    monkeypatch.setattr(cluster, "PACKAGE", tmp_path)
    packed = cluster.CourseCode()
    names = zipfile.ZipFile(io.BytesIO(packed.data)).namelist()
    assert names == [f"{tmp_path.name}/{name}" for name in
                     ["course.py", "plugins/intake.py", "sandbox/stubs/gptcourse/__init__.py"]]
    assert cluster.CourseCode().digest == packed.digest


@pytest.mark.quick
def test_a_class_graders_sandbox_hides_the_instructors_course_as_well_as_the_copy_it_grades(tmp_path, monkeypatch):
    """A class grader's worker grades a copy of the course (its kit); the grading kernel's sandbox hides the
    instructor's own course too, named by the class grader in ORIGINAL_COURSE_VARIABLE."""
    from autograder.sandbox import mounts
    from autograder.grading_environment import ORIGINAL_COURSE_VARIABLE
    from autograder.plugins.guarded_execute import GuardedExecute
    from autograder.plugins.sandbox_kernels import hidden_courses

    original, copy = tmp_path / "course", tmp_path / "worker" / "course"
    original.mkdir()
    copy.mkdir(parents=True)
    monkeypatch.setenv(ORIGINAL_COURSE_VARIABLE, str(original))
    assert hidden_courses(GuardedExecute()) == [str(original)]       # on its own: no course being graded
    assert {str(original), str(copy)} <= set(mounts.masked_paths([str(copy), str(original)]))


GRADER_THEN_SLEEP = """
import sys, nbformat
from autograder import grading_environment
from autograder.plugins.guarded_execute import GuardedExecute
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time\\ntime.sleep(600)")])
GuardedExecute(extra_arguments=grading_environment.kernel_arguments(), timeout=600,
               startup_timeout=int(grading_environment.value("COURSE_GRADING_KERNEL_STARTUP_TIMEOUT"))
               ).preprocess(nb, {"metadata": {"path": sys.argv[1]}})
"""


@pytest.mark.grading
def test_a_sandbox_ends_when_its_grader_is_killed(tmp_path):
    """A grading worker killed outright (out of memory, say) leaves no kernel behind: its sandbox's launcher,
    bwrap, and every process inside are gone within seconds, even with a cell still running."""
    import psutil

    work = tmp_path / "work"
    work.mkdir()
    grader = subprocess.Popen([sys.executable, "-c", GRADER_THEN_SLEEP, str(work)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        sandbox: list[psutil.Process] = []
        deadline = time.monotonic() + 120

        def started(processes) -> bool:
            """bwrap and the kernel inside it: the launcher (a python process too) has run bwrap, which started
            the kernel (waiting for a python child alone once caught the launcher before that: a flaky test)."""
            try:
                commands = [(p.name(), " ".join(p.cmdline())) for p in processes]
            except psutil.Error:
                return False
            return (any(name == "bwrap" for name, _ in commands)
                    and any(name != "bwrap" and "ipykernel" in line for name, line in commands))

        while time.monotonic() < deadline and not started(sandbox):
            time.sleep(0.5)
            try:
                sandbox = psutil.Process(grader.pid).children(recursive=True)
            except psutil.Error:
                break
        assert started(sandbox), "the grader's kernel never started"
        time.sleep(2)                                         # the cell is sleeping now
        sandbox = psutil.Process(grader.pid).children(recursive=True)
    finally:
        grader.kill()
        grader.wait()
    gone, alive = psutil.wait_procs(sandbox, timeout=15)
    assert not alive, f"left running after the grader died: {[(p.pid, p.name()) for p in alive]}"


@pytest.mark.grading
def test_a_launcher_whose_grader_is_already_gone_starts_no_sandbox():
    """The race the parent-death signal cannot cover: the grader died while its launcher was starting. The
    launcher is told its grader's process id and stops before it does anything."""
    from autograder.sandbox import sandboxed_kernel

    result = subprocess.run([sys.executable, sandboxed_kernel.__file__, "/nonexistent.json", ""],
                            env={**os.environ, grading_environment.GRADER_PID_VARIABLE: "1"},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "the grader that started this kernel is gone" in result.stderr


@pytest.mark.grading
def test_the_class_grader_starts_from_a_course_copys_root_folder(tmp_path):
    """Run from a copy's root, `autograder` is the copy's folder of configuration (a namespace package before the
    installed one): the class grader failed there, importing a name of the package's __init__."""
    copy = grading.make_course(tmp_path / "course")
    result = subprocess.run([sys.executable, "-m", "autograder.classgrader", "--help"], cwd=copy,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
