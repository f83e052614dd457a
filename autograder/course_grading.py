"""nbgrader plugins that keep grading honest when a submission misbehaves. Loaded by nbgrader_config.py.

- Intake: runs first. Refuses an oversized notebook (graded as the unanswered release), drops flags a
  student wrote into the notebook (flags are the grader's), and repairs nbgrader metadata that would
  make nbgrader's own preprocessors raise (an empty or malformed record, a copied cell's duplicate id),
  so one student's notebook can never stop the class. Of the files handed in beside the notebook it
  keeps only those handins.py takes (within the limits, and shipped by the release), and notes the rest.
- RestoreFromRelease: before nbgrader's own sanitizing, every cell the release marks (answers, tests,
  locked text) gets its nbgrader metadata back from the release, so relabelled tests (points raised, a
  test turned into an answer) cannot confuse or crash nbgrader, and deleted test or locked cells are put
  back in place (nbgrader's own add_missing_cells fails when a deleted test follows a markdown cell).
  nbgrader's OverwriteCells then restores their source, hidden tests included, from the gradebook.
- GuardedExecute: runs the notebook in the sandbox (the kernel grading_environment.py declares, its
  sockets in a folder made when the kernel starts and removed when it stops) and decides each test
  cell's verdict itself.
  A test cell earns all or nothing, on whether it raised (the kernel's reply, not a displayed value:
  nbgrader would read a displayed number as partial credit). Before the first cell it takes the grading
  guard's fingerprint (kernel_startup.py) and compares every later one with it, outside the kernel:
  from the first change on, checks earn no points. It withholds any output that quotes hidden test
  code, caps how much output it keeps, enforces the notebook's total time, flags broken assignment
  rules, and reads the submission's cgroup (a process killed for memory, a fork refused). A kernel that
  dies no longer throws the submission away: earlier checks keep their points, later cells are marked
  as not run.
- RecordFlags: writes the flags (deaths, timeouts, tampering, restored tests) into the autograded
  notebook's metadata, where the per-check export and the instructor's summary read them.
- HideHiddenTests: the feedback a student receives shows which checks failed and their messages, but
  neither the hidden test code nor tracebacks that would quote it. (nbconvert's SanitizeHTML, configured
  after it, removes scripts and event handlers from outputs and markdown.)
- PerCheckExport: `nbgrader export --exporter=autograder.course_grading.PerCheckExport` writes one column per
  graded test cell plus the flags, so an instructor sees which misconception each student has. Every
  text cell is written so that a spreadsheet reads it as text, never as a formula.

The plugins take the course's folders from the nbgrader command running them (its CourseDirectory, set by
course_directory.py), and every limit from grading_environment.py.
"""

from __future__ import annotations

import ast
import csv
import json
import math
import re
import secrets
import shutil
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.coursedir import CourseDirectory
from nbgrader.plugins import ExportPlugin
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Bool, Dict, Unicode

from autograder import cgroups, grading_environment, handins
from autograder.grading_environment import value
from autograder.kernel_relay import KernelRelay

HERE = Path(__file__).resolve().parent

FLAGS = "course_grading"          # key of the grader's record in an autograded notebook's metadata
HIDDEN_REGION = re.compile(r"### BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", re.S)
WITHHELD = "[output withheld by the grader: it quoted hidden test code]"
# Shortest hidden-test line (spaces removed) whose appearance in an output counts as a quotation.
QUOTE_MIN = 24
STRING_LINE = re.compile(r"""^\(*[rRbBfFuU]{0,2}["']""")


def error_output(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def notebook_flags(nb: NotebookNode) -> list[str]:
    return list(nb.metadata.get(FLAGS, {}).get("flags", []))


def add_flag(resources: dict, flag: str) -> None:
    flags = resources.setdefault(FLAGS, [])
    if flag not in flags:
        flags.append(flag)


def nbgrader_record(cell: NotebookNode) -> dict:
    record = cell.get("metadata", {}).get("nbgrader", {})
    return record if isinstance(record, dict) else {}


def grade_id(cell: NotebookNode) -> str | None:
    cell_id = nbgrader_record(cell).get("grade_id")
    return cell_id if isinstance(cell_id, str) and cell_id else None


def is_test(cell: NotebookNode) -> bool:
    record = nbgrader_record(cell)
    return bool(record.get("grade")) and not record.get("solution")


def course_directory(preprocessor) -> CourseDirectory:
    """nbgrader's CourseDirectory of the converter running this preprocessor (nbconvert makes each
    preprocessor with its exporter as parent, nbgrader each exporter with its converter as parent), so
    the folders are the ones the command itself uses: course_directory.py's, and the command line's."""
    parent = preprocessor.parent
    while parent is not None:
        coursedir = getattr(parent, "coursedir", None)
        if isinstance(coursedir, CourseDirectory):
            return coursedir
        parent = parent.parent
    raise RuntimeError(f"{type(preprocessor).__name__} runs only inside an nbgrader converter (no CourseDirectory)")


def release_notebook(preprocessor, resources: dict) -> NotebookNode:
    """The released notebook this submission started from (the course's release folder, exercises/)."""
    coursedir, info = course_directory(preprocessor), resources["nbgrader"]
    folder = coursedir.format_path(coursedir.release_directory, ".", info["assignment"])
    return nbformat.read(Path(folder) / f"{info['notebook']}.ipynb", as_version=4)


class Intake(NbGraderPreprocessor):
    """First of all: size, forged flags, and nbgrader metadata that nbgrader itself would choke on."""

    def preprocess(self, nb, resources):
        flags = []
        size = len(nbformat.writes(nb).encode())
        limit = value("COURSE_GRADING_NOTEBOOK_MB") * 2**20
        if size > limit:
            release = release_notebook(self, resources)
            nb.cells = release.cells
            flags.append(f"refused at intake: the notebook is {size / 2**20:.1f} MB, over the limit of "
                         f"{limit / 2**20:g} MB; graded as the unanswered release")
        # Flags are written by the grader only: whatever the student put there is dropped.
        nb.metadata.pop(FLAGS, None)
        nb.metadata.pop("widgets", None)
        seen_ids, seen_cell_ids = set(), set()
        for cell in nb.cells:
            cell.metadata.pop(FLAGS, None)
            if "nbgrader" in cell.metadata:
                record = cell.metadata["nbgrader"]
                cell_id = grade_id(cell)
                if cell_id is None or not isinstance(record, dict):
                    del cell.metadata["nbgrader"]          # empty or malformed: an ordinary cell
                elif cell_id in seen_ids:
                    del cell.metadata["nbgrader"]          # a copied cell: the first one keeps the id
                    flags.append(f"a copy of cell {cell_id} was graded as an ordinary cell")
                else:
                    seen_ids.add(cell_id)
            if cell.get("id") in seen_cell_ids:            # a copied cell's nbformat id
                cell["id"] = secrets.token_hex(4)
            seen_cell_ids.add(cell.get("id"))
        handed_in = self.take_handed_in_files(resources)
        if handed_in:
            nb.cells.insert(0, nbformat.v4.new_markdown_cell(handins.note(handed_in)))
        flags += handed_in
        if flags:
            nb.metadata[FLAGS] = {"flags": flags}          # read back by GuardedExecute
        return nb, resources

    def take_handed_in_files(self, resources) -> list[str]:
        """Apply handins.py's rule: remove from the autograded folder (the kernel's working folder, which nbgrader
        filled with every file handed in) what is not taken; returns the flags."""
        coursedir, info = course_directory(self), resources["nbgrader"]
        found = handins.survey(Path(coursedir.format_path(coursedir.submitted_directory, info["student"], info["assignment"])),
                               Path(coursedir.format_path(coursedir.release_directory, ".", info["assignment"])))
        graded = Path(coursedir.format_path(coursedir.autograded_directory, info["student"], info["assignment"]))
        source = Path(coursedir.format_path(coursedir.source_directory, ".", info["assignment"]))
        for name in [*found.left_out, handins.MANIFEST]:
            path = graded / name
            # nbgrader copies the master's own files after the student's: those stay.
            if (path.is_file() or path.is_symlink()) and not (source / name).exists():
                path.unlink()
        return found.flags()


class RestoreFromRelease(NbGraderPreprocessor):
    """Put the release's nbgrader cells back: their metadata always, deleted ones whole."""

    def preprocess(self, nb, resources):
        release = release_notebook(self, resources)
        released = {grade_id(cell): cell for cell in release.cells if grade_id(cell)}
        flags = notebook_flags(nb)

        kept = []
        for cell in nb.cells:
            cell_id = grade_id(cell)
            if cell_id in released:
                original = released[cell_id]
                if cell.cell_type != original.cell_type:
                    cell = nbformat.from_dict(dict(original))        # a test turned into markdown, say
                cell.metadata["nbgrader"] = dict(original.metadata["nbgrader"])
                for key in ("editable", "deletable"):
                    cell.metadata.pop(key, None)
                    if key in original.metadata:
                        cell.metadata[key] = original.metadata[key]
            elif "nbgrader" in cell.metadata:
                cell.metadata.pop("nbgrader")                         # a label the release never gave
            kept.append(cell)

        present = {grade_id(cell) for cell in kept}
        previous = None
        for cell_id, original in released.items():
            if cell_id not in present:
                position = 0 if previous is None else [grade_id(c) for c in kept].index(previous) + 1
                kept.insert(position, nbformat.from_dict(dict(original)))
                present.add(cell_id)
                if original.metadata["nbgrader"].get("grade") and not original.metadata["nbgrader"].get("solution"):
                    flags.append(f"test cell {cell_id} was deleted and has been restored")
            previous = cell_id
        nb.cells = kept
        if flags:
            nb.metadata[FLAGS] = {"flags": flags}
        return nb, resources


def hidden_lines(nb: NotebookNode) -> set[str]:
    """Every line of hidden test code long enough to recognise, with its spaces removed."""
    lines = set()
    for cell in nb.cells:
        if cell.cell_type == "code" and is_test(cell):
            for region in HIDDEN_REGION.findall(cell.source):
                for line in region.splitlines():
                    squeezed = re.sub(r"\s+", "", line)
                    # A line that is only a string (part of a check's message) is meant to be shown.
                    if len(squeezed) >= QUOTE_MIN and not squeezed.startswith("#") and not STRING_LINE.match(squeezed):
                        lines.add(squeezed)
    return lines


def quotes_hidden(text: str, hidden: set[str]) -> bool:
    """Whether `text` quotes a line of hidden test code (`hidden`, from hidden_lines), whatever its spacing."""
    squeezed = re.sub(r"\s+", "", text)
    return any(line in squeezed for line in hidden)


def output_text(output: NotebookNode) -> str:
    """What an output shows a student. An error's traceback is left out: it quotes the failing test's
    code by design, and the feedback never shows it (HideHiddenTests)."""
    if output.output_type == "stream":
        return output.get("text", "")
    if output.output_type == "error":
        return f"{output.get('ename', '')}: {output.get('evalue', '')}"
    return "\n".join(str(data) if isinstance(data, str) else json.dumps(data)
                     for data in output.get("data", {}).values())


class SandboxKernelSpecs(KernelSpecManager):
    """Jupyter's kernelspecs, plus the grading sandbox's (grading_environment.KERNELSPEC). That one is
    declared, not installed: its {resource_dir} is this package's folder, and the launcher is told the
    graded course's root (to hide it), so no kernelspec is written anywhere."""

    course = Unicode("", help="the graded course's root folder, hidden in the sandbox ('' outside nbgrader)")

    def get_kernel_spec(self, kernel_name):
        if kernel_name == grading_environment.KERNEL_NAME:
            spec = dict(grading_environment.KERNELSPEC)
            spec["argv"] = [*spec["argv"], self.course]
            return self.kernel_spec_class(resource_dir=str(HERE), name=kernel_name, **spec)
        return super().get_kernel_spec(kernel_name)


class GuardedExecute(Execute):
    """nbgrader's Execute, with verdicts, limits and the tamper guard decided on the grader's side."""

    sandbox = Bool(True, help="Run every submission in the grading sandbox (sandboxed_kernel.py); "
                   "nbgrader_config.py turns it off where COURSE_GRADING_SANDBOX=0").tag(config=True)
    rules = Dict(default_value={}, help="Assignment -> rules: [{'functions': [dotted names], 'message': "
                 "what the rule asks}]; a forbidden function called from the student's code fails and is "
                 "flagged").tag(config=True)
    # Messages the grader's sockets queue before the kernel is made to wait: each is within the message limits
    # (kernel_relay.py), so this bounds what a flooding kernel can make the grader hold.
    receive_queue = 4

    # --- the notebook -------------------------------------------------------------------------------

    def preprocess(self, nb, resources, km=None):
        self._sockets = None
        self._relay = self._context = None
        self._died_in = None
        self._tampered: list[str] = []
        self._baseline = None
        self._kernel_id = None
        self._deadline = time.monotonic() + value("COURSE_GRADING_NOTEBOOK_TIMEOUT")
        self.timeout_func = self.cell_timeout
        self._notebook_bytes = 0
        self._hidden = hidden_lines(nb)
        self._assignment = resources.get("nbgrader", {}).get("assignment", "")
        # The cells whose code may call what a rule forbids (as a reference), by the name the kernel
        # compiles them under (ipykernel names a cell's code after a hash of its source).
        from ipykernel.compiler import get_tmp_hash_seed, murmur2_x86

        self._grader_cells = [murmur2_x86(cell.source, get_tmp_hash_seed()) for cell in nb.cells
                              if cell.cell_type == "code" and (is_test(cell) or nbgrader_record(cell).get("locked"))]
        for flag in notebook_flags(nb):          # recorded while sanitizing, before this stage
            add_flag(resources, flag)
        try:
            nb, resources = super().preprocess(nb, resources, km)
        except Exception:
            if not self._died_in:
                raise
            # Shutting down a kernel that already died may fail; the notebook is complete regardless.
        finally:
            self.release_cgroup(resources)
            if self._relay:
                self._relay.close()
                self.flag_dropped_messages(resources, "a cell")
                self._relay = None
            if self._context:                    # the client's sockets are closed by now
                self._context.destroy(linger=0)
                self._context = None
            if self._sockets:                    # the kernel has stopped: its sockets' folder goes too
                shutil.rmtree(self._sockets, ignore_errors=True)
                self._sockets = None
        for cell in nb.cells:
            if any(out.get("ename") == "CellTimeoutError" for out in cell.get("outputs", [])):
                add_flag(resources, f"timeout in {grade_id(cell) or 'an ungraded cell'}")
        if self._died_in:
            add_flag(resources, f"kernel died in {self._died_in}")
        return nb, resources

    def create_kernel_manager(self):
        """The sandbox's kernel (whatever kernelspec the notebook names), talking over Unix sockets, since
        the sandbox has no network, in a folder made for this kernel and removed when it stops (preprocess)."""
        if not self.sandbox:
            return super().create_kernel_manager()
        self._sockets = tempfile.mkdtemp(prefix="course-grading-")
        try:
            course = course_directory(self).root
        except RuntimeError:                     # run on its own (the tests), not by an nbgrader converter
            course = ""
        specs = SandboxKernelSpecs(parent=self, course=course)
        self.km = self.kernel_manager_class(
            kernel_name=grading_environment.KERNEL_NAME, kernel_spec_manager=specs,
            transport="ipc", ip=str(Path(self._sockets) / "kernel"), config=self.config)
        return self.km

    async def async_start_new_kernel_client(self):
        """The client talks to the kernel through the relay that bounds every message (kernel_relay.py), on
        sockets that queue few of them: a flood is dropped before the grader holds it."""
        import zmq
        import zmq.asyncio

        self._relay = KernelRelay(self.km.get_connection_info(), int(value("COURSE_GRADING_MESSAGE_MB") * 2**20),
                                  int(value("COURSE_GRADING_MESSAGE_PARTS")))
        self._context = context = zmq.asyncio.Context()
        context.setsockopt(zmq.MAXMSGSIZE, int(value("COURSE_GRADING_MESSAGE_MB") * 2**20))
        context.setsockopt(zmq.RCVHWM, self.receive_queue)
        # nbclient asks the kernel manager for a client without arguments; the manager's own client() takes
        # connection overrides, which send this one through the relay.
        client_of_manager = self.km.client
        self.km.client = lambda **kwargs: client_of_manager(**{**self._relay.client_connection,
                                                               "context": context, **kwargs})
        client = await super().async_start_new_kernel_client()
        self._kernel_id = Path(self.km.connection_file).stem
        return client

    # nbclient binds the synchronous name to its own coroutine, so it is bound again to ours.
    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def release_cgroup(self, resources) -> None:
        """Read what the submission's cgroup saw, then make sure nothing of it survives."""
        group = cgroups.find(self._kernel_id) if self._kernel_id else None
        if group is None:
            self.log.warning("no cgroup for kernel %s (limits were per process)", self._kernel_id)
            if self.sandbox and self._kernel_id:     # COURSE_GRADING_CGROUPS=optional let the kernel start
                add_flag(resources, "limits per process only: no cgroup could be created for this submission")
            return
        events = group.events()
        group.remove()
        self.log.info("cgroup of kernel %s: %s", self._kernel_id, events)
        if events["oom_kill"]:
            add_flag(resources, f"memory limit reached ({value('COURSE_GRADING_MEMORY_GB'):g} GB for the whole "
                                "submission): a process was killed")
        if events["pids_max"]:
            add_flag(resources, f"process limit reached ({value('COURSE_GRADING_PROCESSES'):g} processes and "
                                "threads): a new one was refused")

    def cell_timeout(self, cell) -> int:
        """A cell's time limit (nbclient's `timeout_func` hook): its own, cut to what the notebook has left,
        rounded up, so that a cell stopped by it ends past the deadline and the next cell is not started."""
        remaining = max(1, math.ceil(self._deadline - time.monotonic()))
        return remaining if not self.timeout or self.timeout < 0 else min(self.timeout, remaining)

    # --- one cell -----------------------------------------------------------------------------------

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        if self._died_in:
            cell.outputs = [error_output("KernelDied", f"not run: the kernel died earlier, in {self._died_in}")]
            return cell, resources
        if time.monotonic() >= self._deadline:
            add_flag(resources, f"notebook time limit reached ({value('COURSE_GRADING_NOTEBOOK_TIMEOUT'):g} s)")
            cell.outputs = [error_output("NotebookTimeLimit", "not run: the notebook used up its time limit")]
            return cell, resources
        self._cell_bytes, self._cell_truncated = 0, False
        try:
            if self._baseline is None:
                self._baseline = self.ask_guard(setup=True)
            cell, resources = super().preprocess_cell(cell, resources, index)
            self.flag_dropped_messages(resources, grade_id(cell) or "an ungraded cell", cell)
            self.withhold_quotations(cell, resources)
            self.flag_limits_and_rules(cell, resources)
            if is_test(cell):
                self.judge(cell, resources)
        except (DeadKernelError, CellTimeoutError, TimeoutError) as error:
            # A dead kernel, or one too broken to answer (for example after patching builtins).
            self._died_in = grade_id(cell) or f"cell {index}"
            cause = "stopped responding" if isinstance(error, TimeoutError) else "died"
            if self.flag_dropped_messages(resources, self._died_in, cell):
                # The grader was still reading past the dropped messages when it stopped waiting.
                reason = "while it flooded the grader with messages over the limits"
            else:
                reason = ("(for example os._exit, a crash in native code, or the grader's memory or CPU-time "
                          "limit)")
            cell.outputs.append(error_output(
                "KernelDied", f"the Python kernel {cause} while running this cell {reason}; later cells were not run"))
            return cell, resources
        return cell, resources

    def flag_dropped_messages(self, resources, where: str, cell=None) -> bool:
        """Say so when the relay dropped messages over the limits: a flag, and a note in the cell."""
        dropped = self._relay.dropped() if self._relay else 0
        if not dropped:
            return False
        text = (f"the kernel sent {dropped} message(s) of more than {value('COURSE_GRADING_MESSAGE_PARTS'):g} parts "
                f"or {value('COURSE_GRADING_MESSAGE_MB'):g} MB; the grader dropped them as they came in")
        add_flag(resources, f"message limit reached in {where}: {text}")
        if cell is not None:
            cell.outputs.append(NotebookNode(output_type="stream", name="stdout", text=f"\n[{text}]\n"))
        return True

    def judge(self, cell, resources) -> None:
        """All or nothing: nbgrader reads a displayed number in a test cell as partial credit, so a
        displayed value becomes an ordinary display; and no check counts once the guard saw a change."""
        for output in cell.outputs:
            if output.output_type == "execute_result":
                output.output_type = "display_data"
                output.pop("execution_count", None)
                add_flag(resources, "a test cell displayed a value, which nbgrader would have read as a partial "
                                    "score; test cells score all or nothing")
        if not self._tampered:
            report = self.ask_guard()
            self._tampered = self.changes(report)
            already = any(flag.startswith("rule broken") for flag in resources.get(FLAGS, []))
            for rule in report.get("rules_broken", []) if isinstance(report, dict) and not already else []:
                add_flag(resources, f"rule broken: your code called {rule}, which this assignment forbids")
            if self._tampered:
                add_flag(resources, f"tampering detected after {grade_id(cell)}: {', '.join(self._tampered)}")
        if self._tampered:
            cell.outputs.append(error_output(
                "GradingIntegrityError", "code in this notebook changed what the checks rely on "
                f"({', '.join(self._tampered)}); checks from here on earn no points"))

    def changes(self, report) -> list[str]:
        baseline = self._baseline if isinstance(self._baseline, dict) else None
        current = report.get("fingerprint") if isinstance(report, dict) else None
        if baseline is None:
            return ["the grading guard (it did not answer before the first cell)"]
        if not isinstance(current, dict):
            return ["the grading guard itself"]
        return [label for label, token in baseline.items() if current.get(label) != token] or \
            [label for label in current if label not in baseline]

    def ask_guard(self, setup: bool = False):
        """Ask the guard in the kernel (kernel_startup.py) for its fingerprint; None if it cannot answer."""
        if setup:
            rules = self.rules.get(self._assignment, [])
            expression = f"__import__('sys').modules['_course_guard'].setup({rules!r}, {self._grader_cells!r})"
        else:
            expression = "__import__('sys').modules['_course_guard'].report()"
        msg_id = self.kc.execute("", silent=True, store_history=False, user_expressions={"guard": expression})
        reply = self.wait_for_reply(msg_id)
        result = (reply or {}).get("content", {}).get("user_expressions", {}).get("guard", {})
        if result.get("status") != "ok":
            return None
        try:
            return ast.literal_eval(result["data"]["text/plain"])
        except (ValueError, SyntaxError, KeyError, MemoryError, RecursionError):
            return None

    # --- outputs --------------------------------------------------------------------------------------

    def output(self, outs, msg, display_id, cell_index):
        """Keep at most the cell's and the notebook's share of output; errors are always kept (short)."""
        out = super().output(outs, msg, display_id, cell_index)
        if out is None:
            return out
        if out.output_type == "error":
            out.evalue = str(out.get("evalue", ""))[:2000]
            out.traceback = [line[:2000] for line in out.get("traceback", [])[:50]]
            return out
        size = len(output_text(out).encode())
        cell_limit = value("COURSE_GRADING_OUTPUT_CELL_KB") * 2**10
        notebook_limit = value("COURSE_GRADING_OUTPUT_NOTEBOOK_MB") * 2**20
        if self._cell_bytes + size > cell_limit or self._notebook_bytes + size > notebook_limit:
            outs.remove(out)
            if not self._cell_truncated:
                self._cell_truncated = True
                outs.append(NotebookNode(output_type="stream", name="stdout", text=(
                    f"\n[output truncated by the grader: a cell keeps {cell_limit / 2**10:g} KB and a notebook "
                    f"{notebook_limit / 2**20:g} MB of output]\n")))
            return None
        self._cell_bytes += size
        self._notebook_bytes += size
        return out

    def handle_comm_msg(self, outs, msg, cell_index):
        """Widgets are not graded, and an Output widget could capture a test cell's outputs."""

    def process_message(self, msg, cell, cell_index):
        if msg.get("msg_type") == "update_display_data":
            return None              # rewriting an earlier output (for example a test cell's) is not allowed
        return super().process_message(msg, cell, cell_index)

    def withhold_quotations(self, cell, resources) -> None:
        """Replace outputs that quote hidden test code (a stream may be split over several outputs,
        so the cell's printed text is also checked as a whole)."""
        if not self._hidden:
            return
        printed = "".join(output_text(o) for o in cell.outputs if o.output_type != "error")
        quoted = [o for o in cell.outputs if quotes_hidden(output_text(o), self._hidden)]
        if not quoted and not quotes_hidden(printed, self._hidden):
            return
        add_flag(resources, f"an output of {grade_id(cell) or 'an ungraded cell'} quoted hidden test code and was withheld")
        kept = [error_output(o.get("ename", "Error"), WITHHELD) if o in quoted else o
                for o in cell.outputs if o.output_type == "error"]
        cell.outputs = [NotebookNode(output_type="stream", name="stdout", text=WITHHELD + "\n"), *kept]

    def flag_limits_and_rules(self, cell, resources) -> None:
        where = grade_id(cell) or "an ungraded cell"
        for output in cell.outputs:
            text = output_text(output)
            if output.get("ename") == "CourseRuleError":
                rule = str(output.get("evalue", "")).removeprefix("course rule: ")
                add_flag(resources, f"rule broken: {rule}"[:300])
            if "No space left on device" in text or "File too large" in text:
                add_flag(resources, f"disk limit reached in {where} ({value('COURSE_GRADING_DISK_MB'):g} MB of files)")
            if "output truncated by the grader" in text:
                add_flag(resources, "output limit reached: some output was not kept")


class RecordFlags(NbGraderPreprocessor):
    """Store the grading flags in the autograded notebook (after nbgrader has cleared its metadata)."""

    def preprocess(self, nb, resources):
        nb.metadata[FLAGS] = {"flags": resources.get(FLAGS, [])}
        return nb, resources


class HideHiddenTests(NbGraderPreprocessor):
    """Strip hidden test code and tracebacks from feedback; keep each check's message."""

    enabled = Bool(True, help="Hide hidden tests in feedback (turn off to release them after the due date)").tag(config=True)
    placeholder = Unicode("# (hidden checks ran here; any message they raised is shown below)").tag(config=True)

    def preprocess(self, nb, resources):
        self._hidden = hidden_lines(nb) if self.enabled else set()
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if not self.enabled or cell.cell_type != "code":
            return cell, resources
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                output.traceback = [f"{output.ename}: {output.evalue}"]
            # A second line of defence: GuardedExecute already withheld such outputs while grading.
            if quotes_hidden(output_text(output), self._hidden):
                output.clear()
                output.update(output_type="stream", name="stdout", text=WITHHELD + "\n")
        if is_test(cell):
            cell.source = HIDDEN_REGION.sub(self.placeholder, cell.source)
        return cell, resources


def spreadsheet_safe(value):
    """A spreadsheet treats a cell that starts with = + - @ (or a tab or carriage return) as a formula."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


class PerCheckExport(ExportPlugin):
    """One row per student and notebook, one column per graded cell, plus the grading flags."""

    def export(self, gradebook):
        path = Path(self.to or "checks.csv")
        rows, columns = [], []
        for assignment in gradebook.assignments:
            for notebook in assignment.notebooks:
                for cell in notebook.grade_cells:
                    column = f"{assignment.name}/{notebook.name}/{cell.name}"
                    if column not in columns:
                        columns.append(column)
            for submission in assignment.submissions:
                for submitted in submission.notebooks:
                    row = {"student_id": submission.student.id, "assignment": assignment.name,
                           "notebook": submitted.name, "score": submitted.score, "max_score": submitted.max_score}
                    for grade in submitted.grades:
                        row[f"{assignment.name}/{submitted.name}/{grade.name}"] = grade.score
                    row["flags"] = "; ".join(self.flags(submission.student.id, assignment.name, submitted.name))
                    rows.append(row)
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, ["student_id", "assignment", "notebook", "score", "max_score",
                                             *columns, "flags"])
            writer.writeheader()
            writer.writerows({key: spreadsheet_safe(cell) for key, cell in row.items()} for row in rows)
        self.log.info("Wrote per-check grades of %d submissions to %s", len(rows), path)

    def flags(self, student: str, assignment: str, notebook: str) -> list[str]:
        """The autograded notebook's flags (the course's folders, from the export command's CourseDirectory)."""
        coursedir = course_directory(self)
        path = Path(coursedir.format_path(coursedir.autograded_directory, student, assignment)) / f"{notebook}.ipynb"
        if path.is_file() and not path.is_symlink():
            return notebook_flags(nbformat.read(path, as_version=4))
        handed_in = Path(coursedir.format_path(coursedir.submitted_directory, student, assignment))
        expected = handed_in / f"{notebook}.ipynb"
        others = sorted(p.name for p in handed_in.glob("*.ipynb") if p != expected)
        if not expected.exists():
            return [f"not autograded: no {notebook}.ipynb was submitted"
                    + (f" (found {', '.join(others)}: renamed?)" if others else "")]
        return [f"not autograded: {notebook}.ipynb is not a readable notebook (see the autograde log)"]
