"""GuardedExecute: nbgrader's Execute, run in the grading sandbox and under the grader's own limits.

It starts the kernel grading_environment.py declares (sandboxed_kernel.py: bubblewrap, an allow-list root,
a cgroup for the whole submission), its sockets in a folder made when the kernel starts and removed when it
stops, every message it sends bounded by a relay (kernel_relay.py) before the grader holds it. It caps how
much output it keeps, enforces the notebook's total time, and reads the submission's cgroup (a process
killed for memory, a fork refused). A kernel that dies no longer throws the submission away: earlier checks
keep their points, later cells are marked as not run. What each test cell earns, and what is flagged, is
the Verdict's (verdict.py), which this executor asks the guard in the kernel for.
"""

from __future__ import annotations

import ast
import functools
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, Dict, List, Unicode

from autograder import grading_environment
from autograder.checker import session as checker_session
from autograder.cells import (
    add_condition, add_flag, course_directory, error_output, grade_id, is_test, nbgrader_record, notebook_flags,
    output_text,
)
from autograder.grading_environment import value
from autograder.limits import Limits
from autograder.plugins.checker_link import (GUARD_REPORT, CheckerLink, course_secret, dig, hand_in_key, is_given,
                                             runs_in_checker)
from autograder.plugins.sandbox_kernels import SandboxKernelSpecs, hidden_courses, per_process_condition
from autograder.plugins.verdict import Verdict
from autograder.plugins.withhold import hidden_lines
from autograder.sandbox import cgroups, kernel_ready
from autograder.sandbox.kernel_relay import KernelRelay

# Where the last notebook this process graded spent its time, in seconds: starting its kernel (a warm parent's
# start included), starting its checker (the same), its cells (the checks in the checker included) and the whole
# execution; the class grader's summary reports it per notebook, and `make bench` takes the grader's own share from it.
LAST_TIMES: dict[str, float] = {}


# The guard's reply: a fingerprint of its watch list (grading_environment.WATCHED) and the rules broken, 6.8 KB
# for assignment 1's master (measured). Nine times that, and nothing larger is parsed.
GUARD_REPLY_CHARS = 64 * 2**10
def execution_count(count):
    """A kernel's execution count as nbformat allows it: a non-negative integer, else none."""
    return count if isinstance(count, int) and not isinstance(count, bool) and 0 <= count < 2**31 else None


class GuardedExecute(CheckerLink, Execute):
    """nbgrader's Execute, with verdicts, limits and the tamper guard decided on the grader's side."""

    sandbox = Bool(True, help="Run every submission in the grading sandbox (sandboxed_kernel.py); "
                   "nbgrader_config.py turns it off where COURSE_GRADING_SANDBOX=0").tag(config=True)
    checked = List(Unicode(), default_value=[], help="Assignments whose test cells run in the checker "
                   "(autograder/checker/): a process beside the kernel that never runs a line of the student's "
                   "code and reaches the student's names only as values and handles. Names or patterns "
                   "(`*`: every assignment, one added later too)").tag(config=True)
    rules = Dict(default_value={}, help="Assignment -> rules: [{'functions': [dotted names], 'message': "
                 "what the rule asks}]; a forbidden function called from the student's code fails and is "
                 "flagged").tag(config=True)
    # Messages the grader's sockets queue before the kernel is made to wait: each is within the message limits
    # (kernel_relay.py), so this bounds what a flooding kernel can make the grader hold.
    receive_queue = 4

    # --- the notebook -------------------------------------------------------------------------------

    def preprocess(self, nb, resources, km=None):
        started = time.perf_counter()
        LAST_TIMES.clear()
        LAST_TIMES.update(kernel_start_s=0.0, checker_start_s=0.0, cells_s=0.0)
        # The limits as this run's whole configuration sets them (a command line's --Limits.memory_gb=8 too).
        grading_environment.use_limits(Limits(parent=self).configured())
        self._sockets = None
        self._relay = self._context = None
        self._died_in = None
        self._cell = None
        self._line, self._serving, self._line_failed = None, None, None      # a check's line to the kernel
        self._guard_reply = None                 # the guard's report that came back with a check's line
        self._lines = 0                          # lines opened so far: each check's token
        self._kernel_id = None
        self._specs = None
        self._deadline = time.monotonic() + value("COURSE_GRADING_NOTEBOOK_TIMEOUT")
        self.timeout_func = self.cell_timeout
        self._notebook_bytes = 0
        self.verdict = Verdict(hidden_lines(nb), self.ask_guard)
        self._assignment = resources.get("nbgrader", {}).get("assignment", "")
        # The cells whose code may call what a rule forbids (as a reference), by the name the kernel
        # compiles them under (ipykernel names a cell's code after a hash of its source).
        from ipykernel.compiler import get_tmp_hash_seed, murmur2_x86

        # Where the checks run in the checker, no cell in the kernel is the grader's: a rule holds for every cell
        # there (a code object forged to carry a given cell's name gains nothing).
        checked = self.sandbox and runs_in_checker(self._assignment, self.checked)
        self._grader_cells = [] if checked else [
            murmur2_x86(cell.source, get_tmp_hash_seed()) for cell in nb.cells
            if cell.cell_type == "code" and (is_test(cell) or nbgrader_record(cell).get("locked"))]
        # The checker's parent imports what the checks and given cells do slowly (transformers, for assignment
        # 4's reference GPT-2), once, instead of each notebook's checker.
        preloads = tuple(module for module in grading_environment.warm_imports(
            cell.source for cell in nb.cells if cell.cell_type == "code" and (is_test(cell) or is_given(cell)))
            if module not in grading_environment.WARM_IMPORTS)
        folder = resources.get("metadata", {}).get("path") or None      # where the kernel's files are copied from
        self._checker = (checker_session.Session(hand_in_key(nb, course_secret(self), folder),
                                                 checker_session.IMPORTS + preloads) if checked else None)
        if self._checker is not None:            # its parent imports PyTorch while the kernel starts
            self._checker.prepare()
        # What the kernel's warm parent has imported: what every kernel imports, and the slow imports of this
        # notebook's code (the checks' too, unless they run in the checker).
        self._warm_imports = grading_environment.warm_imports(
            cell.source for cell in nb.cells if cell.cell_type == "code" and not (checked and is_test(cell)))
        for flag in notebook_flags(nb):          # recorded while sanitizing, before this stage
            add_flag(resources, flag)
        try:
            nb, resources = super().preprocess(nb, resources, km)
        except Exception:
            if not self._died_in:
                raise
            # Shutting down a kernel that already died may fail; the notebook is complete regardless.
        finally:
            if self._checker is not None:
                checker, self._checker = self._checker, None
                checker.close()
                LAST_TIMES["checker_start_s"] = checker.start_seconds      # spent inside a cell: not the cells'
                LAST_TIMES["cells_s"] -= checker.start_seconds
            self.release_cgroup(resources)
            if self._relay:
                self._relay.close()
                self.flag_dropped_messages(resources, "a cell")
                self._relay = None
            if self._context:                    # the client's sockets are closed by now
                self._context.destroy(linger=0)
                self._context = None
            self.flag_cold_start(resources)
            if self._sockets:                    # the kernel has stopped: its sockets' folder goes too
                shutil.rmtree(self._sockets, ignore_errors=True)
                self._sockets = None
        for cell in nb.cells:
            if any(out.get("ename") == "CellTimeoutError" for out in cell.get("outputs", [])):
                add_flag(resources, f"timeout in {grade_id(cell) or 'an ungraded cell'}")
        if self._died_in:
            add_flag(resources, f"kernel died in {self._died_in}")
        LAST_TIMES["execute_s"] = time.perf_counter() - started
        return nb, resources

    def create_kernel_manager(self):
        """The sandbox's kernel (whatever kernelspec the notebook names), talking over Unix sockets, since
        the sandbox has no network, in a folder made for this kernel and removed when it stops (preprocess)."""
        if not self.sandbox:
            return super().create_kernel_manager()
        self._sockets = tempfile.mkdtemp(prefix="course-grading-")
        self._specs = specs = SandboxKernelSpecs(parent=self, courses=hidden_courses(self),
                                                 warm=grading_environment.warm_kernels(),
                                                 warm_imports=list(getattr(self, "_warm_imports", ())))
        self.km = self.kernel_manager_class(
            kernel_name=grading_environment.KERNEL_NAME, kernel_spec_manager=specs,
            transport="ipc", ip=str(Path(self._sockets) / "kernel"), config=self.config)
        return self.km

    async def async_start_new_kernel(self, **kwargs):
        started = time.perf_counter()            # the warm parent's start, on a process's first notebook, included
        await super().async_start_new_kernel(**kwargs)
        LAST_TIMES["kernel_start_s"] = LAST_TIMES.get("kernel_start_s", 0.0) + time.perf_counter() - started

    start_new_kernel = run_sync(async_start_new_kernel)

    async def async_start_new_kernel_client(self):
        """The client talks to the kernel through the relay that bounds every message (kernel_relay.py), on
        sockets that queue few of them: a flood is dropped before the grader holds it."""
        import zmq
        import zmq.asyncio

        self._relay = KernelRelay(self.km.get_connection_info(), int(value("COURSE_GRADING_MESSAGE_MB") * 2**20),
                                  int(value("COURSE_GRADING_MESSAGE_PARTS")), int(value("COURSE_GRADING_MESSAGE_VALUES")))
        self._context = context = zmq.asyncio.Context()
        context.setsockopt(zmq.MAXMSGSIZE, int(value("COURSE_GRADING_MESSAGE_MB") * 2**20))
        context.setsockopt(zmq.RCVHWM, self.receive_queue)
        # nbclient asks the kernel manager for a client without arguments; the manager's own client() takes
        # connection overrides, which send this one through the relay. It waits for the kernel without
        # jupyter_client's idle 0.2 s at the end (kernel_ready.py).
        client_of_manager = self.km.client

        def client(**kwargs):
            made = client_of_manager(**{**self._relay.client_connection, "context": context, **kwargs})
            made.wait_for_ready = functools.partial(kernel_ready.wait_for_ready, made)
            return made

        self.km.client = client
        started = time.perf_counter()
        client = await super().async_start_new_kernel_client()
        LAST_TIMES["kernel_start_s"] = LAST_TIMES.get("kernel_start_s", 0.0) + time.perf_counter() - started
        self._kernel_id = Path(self.km.connection_file).stem
        return client

    # nbclient binds the synchronous name to its own coroutine, so it is bound again to ours.
    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def flag_cold_start(self, resources) -> None:
        """A kernel meant to be warm that started cold: its warm parent could not start (said by the spec manager), or
        failed it (the launcher's note beside the sockets, sandboxed_kernel.cold_start_note). The sandbox is the
        same; the flag says the grading took the slower path, and why."""
        why = self._specs.cold_because if self._specs is not None else None
        if self._sockets and self._kernel_id:
            note = Path(self._sockets) / f"{self._kernel_id}.started-cold"
            try:
                with open(note, "rb") as handle:                 # written by the launcher, not the kernel
                    why = handle.read(500).decode(errors="replace")
            except OSError:
                pass
        if why:
            add_flag(resources, f"kernel started cold: {why}")

    def release_cgroup(self, resources) -> None:
        """Read what the submission's cgroup saw, then make sure nothing of it survives."""
        group = cgroups.find(self._kernel_id) if self._kernel_id else None
        if group is None:
            self.log.warning("no cgroup for kernel %s (limits were per process)", self._kernel_id)
            if self.sandbox and self._kernel_id:     # COURSE_GRADING_CGROUPS=optional let the kernel start
                if cgroups.available():              # this submission's alone: flagged
                    add_flag(resources, "limits per process only: no cgroup could be created for this submission"
                             + (", and as root its processes were not limited" if os.getuid() == 0 else ""))
                else:                                # the account's, for the whole run: said once, not a flag
                    add_condition(resources, per_process_condition())
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
        started = time.perf_counter()
        cell, resources = self.run_cell_guarded(cell, resources, index)
        LAST_TIMES["cells_s"] = LAST_TIMES.get("cells_s", 0.0) + time.perf_counter() - started
        if cell.cell_type == "code":
            # Execution counts come from the kernel: one that is not a number (a string of markup, say) would be
            # written unescaped into pages as the cell's prompt, or fail the notebook's validation.
            cell.execution_count = execution_count(cell.get("execution_count"))
            for out in cell.get("outputs", []):
                if "execution_count" in out:
                    out["execution_count"] = execution_count(out["execution_count"])
        return cell, resources

    def run_cell_guarded(self, cell, resources, index):
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
        self._cell = cell                # the guard's answers wait no longer than this cell may (cell_timeout)
        self._guard_reply = None
        try:
            if self.verdict.baseline is None:
                self.verdict.baseline = self.ask_guard(setup=True)
            if self._checker is not None and is_test(cell):
                self.run_check(cell)
            else:
                cell, resources = super().preprocess_cell(cell, resources, index)
                if self._checker is not None and is_given(cell):
                    self.give_checker(cell)
            self.flag_dropped_messages(resources, grade_id(cell) or "an ungraded cell", cell)
            self.verdict.withhold_quotations(cell, resources)
            self.verdict.flag_limits_and_rules(cell, resources)
            if is_test(cell):
                self.verdict.judge(cell, resources, checked=self._checker is not None)
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
        text = (f"the kernel sent {dropped} message(s) of more than {value('COURSE_GRADING_MESSAGE_PARTS'):g} parts, "
                f"{value('COURSE_GRADING_MESSAGE_MB'):g} MB or {value('COURSE_GRADING_MESSAGE_VALUES'):g} JSON values; "
                "the grader dropped them as they came in")
        add_flag(resources, f"message limit reached in {where}: {text}")
        if cell is not None:
            cell.outputs.append(NotebookNode(output_type="stream", name="stdout", text=f"\n[{text}]\n"))
        return True

    def ask_guard(self, setup: bool = False):
        """Ask the guard in the kernel (kernel_startup.py) for its fingerprint; None if it cannot answer. After a
        check, its report came back with the check's line (end_line), unless the line failed or timed out."""
        reply, self._guard_reply = (None, None) if setup else (self._guard_reply, None)
        if reply is None:
            if setup:
                rules = self.rules.get(self._assignment, [])
                expression = f"__import__('sys').modules['_course_guard'].setup({rules!r}, {self._grader_cells!r})"
            else:
                expression = GUARD_REPORT
            msg_id = self.kc.execute("", silent=True, store_history=False, user_expressions={"guard": expression})
            reply = self.wait_for_reply(msg_id, self._cell)
        result = dig(reply, "content", "user_expressions", "guard")
        if dig(result, "status") != "ok":
            return None
        text = dig(result, "data", "text/plain")
        # The reply is the kernel's text: its size is checked before it is parsed (literal_eval holds about
        # 500 bytes per byte of `0,`: an 8 MB reply took 4 GB of the grader's memory, outside every limit of
        # the submission's). An oversized reply is no answer, which the verdict counts as tampering.
        if not isinstance(text, str) or len(text) > GUARD_REPLY_CHARS:
            if isinstance(text, str):
                self.log.warning("the grading guard's reply is %d characters, over %d: not read", len(text),
                                 GUARD_REPLY_CHARS)
            return None
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, OverflowError):
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
        content = msg.get("content")
        if isinstance(content, dict) and "execution_count" in content:
            content["execution_count"] = execution_count(content["execution_count"])
        return super().process_message(msg, cell, cell_index)
