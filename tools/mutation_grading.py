"""Grade the catalog's known submissions as nbgrader's autograde scores them, in one process per assignment.

Checking that each catalog bug loses exactly its points is mutation testing of the hidden tests: the code is
the course's own and trusted, so it needs neither the sandbox nor a fresh kernel, `import torch` and
nbgrader's passes for every variant (about 3.6 CPU-seconds each). This does what the engine
(autograder.classgrader.grade_class) does to a submission, in one Python process per assignment that imports torch once:

- the submitted notebook goes through the course's own sanitizing passes, as configured in the given
  course's nbgrader_config.py (nbgrader's ClearOutput, DeduplicateIds, OverwriteKernelspec, OverwriteCells
  and CheckCellMetadata, the course's RestoreFromRelease), against that course's release and gradebook; only
  Intake is left out, whose work is the hand-in's files and size (a catalog submission is one notebook of
  ours);
- each submission then runs in a fork of that process (so in a namespace and interpreter state of its own,
  as a fresh kernel would), in an IPython shell built like ipykernel's (its cell compiler, an in-memory
  history), after the grading kernel's own start-up file (kernel_startup.py: the seeds, the tamper guard);
- each cell's outputs are judged by the engine's own code (autograder.plugins.verdict.Verdict, which GuardedExecute
  uses too, with the assignment's rules from the course's nbgrader_config.py), stderr is dropped by
  nbgrader's IgnorePattern as the course configures it, and each test cell is scored by nbgrader's own
  determine_grade (what SaveAutoGrades records).

The result of each submission is what the tests read from the engine: its scores, grade id -> (score,
max_score), and an autograded notebook (the error each cell shows, its printed lines, the grader's flags).
tests/test_grading.py grades a sample of each assignment's catalog with the real engine in the same run
and asserts that both give identical scores, messages and flags.

    python -m tools.mutation_grading IN.json OUT.json     # what grade_known() runs, one per assignment
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from traitlets.config import LoggingConfigurable

from autograder.course import Course
from tools.course import COURSE, tool_env

Result = dict          # {"scores": {grade_id: [score, max_score]}, "notebook": the autograded notebook}


# --- the caller's side ------------------------------------------------------------------------------------

def grade_known(assignment: str, submissions: list, workers: int | None = None,
                course: Path | None = None) -> dict[str, tuple[dict, nbformat.NotebookNode]]:
    """Grade `submissions` (tools.grading.Submission, all of `assignment`) in one process: student ->
    (grade_id -> (score, max_score), the autograded notebook), graded as `course` grades them: its
    configuration, its master, release and gradebook (a course after generate_assignment; default this
    checkout's)."""
    with tempfile.TemporaryDirectory(prefix="mutation-grading-") as scratch:
        given, taken = Path(scratch) / "in.json", Path(scratch) / "out.json"
        given.write_text(json.dumps({"assignment": assignment, "workers": workers or os.cpu_count() or 1,
                                     "course": str(course or COURSE.root),
                                     "submissions": {s.student: s.notebook for s in submissions}}))
        # One thread per submission running side by side, as the engine gives each of its kernels.
        # Run in the scratch folder: whatever a notebook writes lands there, never in the checkout.
        env = tool_env({"PYTHONPATH": str(COURSE.root)}, threads=1)
        result = subprocess.run([sys.executable, "-m", "tools.mutation_grading", str(given), str(taken)],
                                cwd=scratch, env=env,
                                capture_output=True, text=True)
        if result.returncode:
            raise RuntimeError(f"grading {assignment}'s catalog in one process failed ({result.returncode}):\n"
                               f"{result.stdout[-5000:]}\n{result.stderr[-5000:]}")
        graded = json.loads(taken.read_text())
    return {student: ({cell: tuple(score) for cell, score in record["scores"].items()},
                      nbformat.from_dict(record["notebook"])) for student, record in graded.items()}


def verdict(scores: dict, notebook: nbformat.NotebookNode) -> dict:
    """Everything a test reads from one graded submission, to compare the two ways of grading it: each graded
    cell's score, the error it shows and whether it printed its 'passed: ' line; and the grader's flags."""
    from autograder.notebook import grade_id
    from tools import grading

    passed = {}
    for cell in notebook.cells:
        cell_id = grade_id(cell)
        if cell_id in scores:
            passed[cell_id] = any(out.output_type == "stream" and "passed: " in out.get("text", "")
                                  for out in cell.get("outputs", []))
    return {"scores": {cell: tuple(map(float, score)) for cell, score in scores.items()},
            "errors": {cell: grading.cell_error(notebook, cell) for cell in scores},
            "passed": passed, "flags": grading.grader_flags(notebook)}


# --- the grading process ------------------------------------------------------------------------------------

class Grader:
    """One assignment's grading process: everything shared by its submissions, prepared before the forks."""

    def __init__(self, assignment: str, course: Path):
        from IPython.core.displayhook import DisplayHook
        from IPython.core.interactiveshell import InteractiveShell
        from ipykernel.compiler import XCachingCompiler
        from traitlets.config import Config

        self.assignment = assignment
        self.course = Course(course)
        self.config = self.grading_config()
        self.rules = dict(self.config.GuardedExecute.get("rules", {})).get(assignment, [])
        # Checked assignments run their test cells in the checker's Checks, as GuardedExecute does, reaching the
        # notebook's names through the same bridge (here in this process: values still cross as bytes).
        from autograder.plugins.checker_link import runs_in_checker

        self.checked = runs_in_checker(assignment, self.config.GuardedExecute.get("checked", []))
        self.notebook = self.course.master_notebook(assignment).stem
        self.master = nbformat.read(self.course.master_notebook(assignment), as_version=4)
        from autograder import grading_environment
        from autograder.sandbox import mounts

        self.environment = grading_environment
        # The sandbox mounts a stand-in for the course's reference module; here the same file answers its import.
        sys.meta_path.insert(0, StandIn("gptcourse", mounts.STUB / "__init__.py"))
        sys.modules.pop("gptcourse", None)

        class Hook(DisplayHook):
            """A cell's value becomes its execute_result (kept for run()), never a printed Out[n]."""

            def write_output_prompt(self):
                pass

            def write_format_data(self, format_dict, md_dict=None):
                self.shell.last_result = format_dict

        class Shell(InteractiveShell):
            """IPython's shell as ipykernel runs it: errors and values become outputs, never printed text."""

            displayhook_class = Hook
            last_result = None

            # The verdict reads the exception itself (run_cell's result: its type and message), never a
            # formatted traceback, which costs IPython about 0.2 s per error (inspect.getmodule walks every
            # imported module for each frame): a variant that raises in 18 cells paid 3 s for nothing.
            def showtraceback(self, exc_tuple=None, filename=None, tb_offset=None, exception_only=False,
                              running_compiled_code=False):
                try:
                    self._get_exc_info(exc_tuple)          # sets sys.last_value etc., as IPython does
                except ValueError:
                    pass

            def showsyntaxerror(self, filename=None, running_compiled_code=False):
                pass

            def _format_exception_for_storage(self, exception, filename=None, running_compiled_code=False):
                return {"ename": type(exception).__name__, "evalue": str(exception), "traceback": []}

        # ipykernel's compiler names each cell's code after a hash of its source, which the guard's rules
        # use to tell the grader's cells from the student's.
        self.shell = Shell(config=Config({"HistoryManager": {"hist_file": ":memory:"}}),
                           compiler_class=XCachingCompiler)
        self.import_what_the_master_imports()

    def grading_config(self):
        """The course's nbgrader configuration, read as nbgrader reads it (without its trial sandbox: nothing
        runs in one here)."""
        saved = os.environ.get(self.environment_variable)
        os.environ[self.environment_variable] = "0"
        try:
            return self.course.grading_config()
        finally:
            if saved is None:
                os.environ.pop(self.environment_variable)
            else:
                os.environ[self.environment_variable] = saved

    @property
    def environment_variable(self) -> str:
        from autograder.grading_environment import SANDBOX_VARIABLE

        return SANDBOX_VARIABLE

    def import_what_the_master_imports(self) -> None:
        """Import here, once, every module that grading the master ends up importing, so that no fork pays
        for it again. Grading the master in a fork finds them all, the lazy ones too: the first optimizer
        imports torch._dynamo (about 2 s), `from transformers import GPT2LMHeadModel` loads GPT-2's modules
        (about 1.7 s). Only modules are shared; nothing of the master's run reaches this process."""
        pid, readable = forked(lambda: (self.run(self.prepared(self.master, "master")), sorted(sys.modules))[1])
        with os.fdopen(readable) as pipe:
            names = json.loads(pipe.read() or "[]")
        os.waitpid(pid, 0)
        if isinstance(names, dict):                        # it crashed: nothing to share, no harm done
            names = []
        private = {"__main__", "_course_guard"}
        for name in sorted(set(names) - set(sys.modules), key=lambda name: name.count(".")):
            if name.split(".")[0] in private or name.split(".")[0] == "gptcourse":
                continue
            try:
                importlib.import_module(name)
            except Exception:                              # noqa: BLE001 (a module that only imports in
                pass                                       # its own context: the fork imports it then)

    # --- what the sanitizing passes do ---------------------------------------------------------------------

    def prepared(self, submitted: nbformat.NotebookNode, student: str) -> nbformat.NotebookNode:
        """The notebook autograde executes: the submission through the course's configured sanitizing passes
        but Intake (the release's metadata back, deleted cells put back, test and locked cells' source from
        the gradebook, hidden tests included)."""
        from autograder.plugins.intake import Intake
        from autograder.classgrader.record import grading_pipeline, step_class

        passes = [step_class(step) for step in grading_pipeline(self.config, "sanitize_preprocessors")]
        converter = CatalogConverter(self.course.coursedir, config=self.config)
        resources = {"nbgrader": {"notebook": self.notebook, "assignment": self.assignment, "student": student,
                                  "db_url": self.course.db_url}}
        notebook = nbformat.from_dict(dict(submitted))
        for step in passes:
            if not issubclass(step, Intake):
                notebook, resources = step(config=self.config, parent=converter).preprocess(notebook, resources)
        return notebook

    # --- one submission, in a fork --------------------------------------------------------------------------

    def run(self, notebook: nbformat.NotebookNode) -> Result:
        """Execute and score one prepared notebook (called in the fork that grades it)."""
        from ipykernel.compiler import get_tmp_hash_seed, murmur2_x86
        from IPython.utils.capture import capture_output
        from nbformat.notebooknode import NotebookNode
        from nbgrader.preprocessors import IgnorePattern
        from nbgrader.utils import determine_grade

        from autograder.cells import FLAGS, error_output, grade_id, is_test, nbgrader_record
        from autograder.plugins.checker_link import is_given
        from autograder.plugins.verdict import Verdict
        from autograder.plugins.withhold import hidden_lines

        shell = self.shell
        shell.safe_execfile(str(self.environment.PACKAGE / self.environment.STARTUP_FILE), shell.user_ns,
                            raise_exceptions=True)
        grader_cells = [] if self.checked else [   # checked: no cell in the kernel is the grader's (GuardedExecute)
            murmur2_x86(cell.source, get_tmp_hash_seed()) for cell in notebook.cells
            if cell.cell_type == "code" and (is_test(cell) or nbgrader_record(cell).get("locked"))]
        guard = sys.modules["_course_guard"]
        # The verdict is the engine's own class, asking the guard in this process instead of in a kernel.
        verdict = Verdict(hidden_lines(notebook), ask_guard=guard.report)
        checks = None
        if self.checked:
            from autograder.checker.bridge import Bridge
            from autograder.checker.process import Checks, in_process
            from autograder.plugins.checker_link import hand_in_key

            bridge = Bridge(shell.user_ns)
            checks = Checks(in_process(bridge.serve), hand_in_key(notebook, self.course.grading_secret()))
        resources: dict = {}
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            if verdict.baseline is None:
                verdict.baseline = guard.setup(self.rules, grader_cells)
            if checks is not None and is_test(cell):
                bridge.new_check()                 # as the kernel's bridge does when a check's line opens
                outcome = checks.run("check", grade_id(cell) or "a test cell", cell.source)
                cell.outputs = ([NotebookNode(output_type="stream", name="stdout", text=outcome["stdout"])]
                                if outcome.get("stdout") else [])
                if not outcome["ok"]:
                    cell.outputs.append(error_output(outcome["ename"], outcome["evalue"]))
                cell.execution_count = None
                verdict.withhold_quotations(cell, resources)
                verdict.flag_limits_and_rules(cell, resources)
                verdict.judge(cell, resources, checked=True)
                continue
            shell.last_result = None
            with capture_output(stdout=True, stderr=True, display=True) as captured:
                result = shell.run_cell(cell.source, store_history=True)
            cell.execution_count = shell.execution_count - 1
            outputs = []
            if captured.stdout:
                outputs.append(NotebookNode(output_type="stream", name="stdout", text=captured.stdout))
            if captured.stderr:
                outputs.append(NotebookNode(output_type="stream", name="stderr", text=captured.stderr))
            for shown in captured.outputs:
                outputs.append(NotebookNode(output_type="display_data", data=shown.data, metadata=shown.metadata))
            if shell.last_result is not None:
                outputs.append(NotebookNode(output_type="execute_result", execution_count=cell.execution_count,
                                            data=shell.last_result, metadata={}))
            error = result.error_before_exec or result.error_in_exec
            if error is not None:
                outputs.append(error_output(type(error).__name__, str(error)[:2000]))
            cell.outputs = outputs
            if checks is not None and is_given(cell):
                checks.run("given", grade_id(cell) or "a given cell", cell.source)
            verdict.withhold_quotations(cell, resources)
            verdict.flag_limits_and_rules(cell, resources)
            if is_test(cell):
                verdict.judge(cell, resources)
        # stderr (PyTorch's warnings) never costs points: nbgrader's IgnorePattern, as the course configures it.
        notebook, resources = IgnorePattern(config=self.config).preprocess(notebook, resources)
        scores = {}
        for cell in notebook.cells:
            if nbgrader_record(cell).get("grade"):
                scores[grade_id(cell)] = determine_grade(cell)
        notebook.metadata[FLAGS] = {"flags": resources.get(FLAGS, [])}
        return {"scores": scores, "notebook": notebook}


class CatalogConverter(LoggingConfigurable):
    """Stands where nbgrader's Autograde converter stands for the passes it runs: their parent, holding the
    course's CourseDirectory (autograder.cells.course_directory finds it there)."""

    def __init__(self, coursedir, **kwargs):
        super().__init__(**kwargs)
        self.coursedir = coursedir


class StandIn:
    """An import finder that answers one module's import with a given file (the sandbox's stand-in)."""

    def __init__(self, name: str, path: Path):
        self.name, self.path = name, path

    def find_spec(self, name, path=None, target=None):
        import importlib.util

        return importlib.util.spec_from_file_location(name, self.path) if name == self.name else None


def forked(work) -> tuple[int, int]:
    """Start `work()` in a fork of this process: (pid, the pipe its JSON result comes back on; a crash comes
    back as {"crashed": traceback})."""
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # the child: work, write the result, leave at once
        os.close(readable)
        status = 0
        try:
            os.chdir(tempfile.mkdtemp(dir="."))    # files a notebook writes stay its own
            payload = json.dumps(work()).encode()
        except BaseException as error:             # noqa: BLE001 (reported to the parent, which raises)
            import traceback

            payload = json.dumps({"crashed": "".join(traceback.format_exception(error))}).encode()
            status = 1
        with os.fdopen(writable, "wb") as pipe:
            pipe.write(payload)
        os._exit(status)
    os.close(writable)
    return pid, readable


def grade_all(assignment: str, course: Path, submissions: dict[str, dict], workers: int) -> dict[str, Result]:
    """Each submission in a fork of one prepared process, `workers` at a time; a fork that outlives the
    notebook time limit is killed and reported."""
    grader = Grader(assignment, course)
    limit = grader.environment.value("COURSE_GRADING_NOTEBOOK_TIMEOUT")
    waiting = [(student, grader.prepared(nbformat.from_dict(notebook), student))
               for student, notebook in submissions.items()]
    running: dict[int, tuple[str, int, float, list[bytes]]] = {}       # fd -> student, pid, started, chunks
    results: dict[str, Result] = {}
    while waiting or running:
        while waiting and len(running) < workers:
            student, notebook = waiting.pop(0)
            pid, fd = forked(lambda: grader.run(notebook))
            running[fd] = (student, pid, time.monotonic(), [])
        ready, _, _ = select.select(list(running), [], [], 1.0)
        for fd in ready:
            chunk = os.read(fd, 1 << 20)
            if chunk:
                running[fd][3].append(chunk)
                continue
            student, pid, _, chunks = running.pop(fd)
            os.close(fd)
            os.waitpid(pid, 0)
            record = json.loads(b"".join(chunks) or b'{"crashed": "no result"}')
            if "crashed" in record:
                raise RuntimeError(f"grading {student} crashed:\n{record['crashed']}")
            results[student] = record
        for fd, (student, pid, started, _) in list(running.items()):
            if time.monotonic() - started > limit:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(fd)
                del running[fd]
                raise RuntimeError(f"grading {student} took over {limit:g} s")
    return {student: results[student] for student in submissions}


def main(given: str, taken: str) -> None:
    request = json.loads(Path(given).read_text())
    results = grade_all(request["assignment"], Path(request["course"]), request["submissions"], int(request["workers"]))
    Path(taken).write_text(json.dumps(results))


if __name__ == "__main__":
    main(*sys.argv[1:])
