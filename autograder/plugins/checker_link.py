"""What GuardedExecute does for an assignment whose checks run in the checker (autograder/checker/): a given cell
run there too, a test cell run there instead of in the kernel, and each of the check's calls of the student's
code carried to the kernel's bridge on a line of its own (sandbox/bridge_line.py). The hidden inputs' key is made here
from the hand-in, so that what the kernel can read of it is what a resubmission changes."""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import os
import time
from pathlib import Path

from jupyter_core.utils import run_sync
from nbformat.notebooknode import NotebookNode

from autograder.cells import course_directory, error_output, grade_id, is_test, nbgrader_record
from autograder.sandbox import bridge_line as line
from autograder.checker import process as checker_process
from autograder.checker import session as checker_session
from autograder.grading_environment import value


def no_answer(message: str) -> bytes:
    """A reply, in the checker's format (checker/values.py's pack, which imports PyTorch: the grader's process
    does not, it would take 3 s and 300 MB), that raises RuntimeError(message) in the check."""
    import json
    import struct

    raised = {"type": "RuntimeError", "bases": ["RuntimeError"], "message": message}
    header = json.dumps({"$dict": {"raised": {"$dict": raised}}}, separators=(",", ":")).encode()
    return struct.pack("<I", len(header)) + header


CHECK_OUTPUT_CHARS = 256 * 2**10      # what a check printed, or its message: the checker's own cap, kept here too


def checker_text(value, most: int) -> str:
    """A string of the checker's outcome as the notebook may hold it: cut to `most` characters, and valid UTF-8
    (a student's exception message crosses whole, and a lone surrogate in it would fail the notebook's writing)."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return text[:most].encode("utf-8", "replace").decode("utf-8")


def dig(value, *keys):
    """value[key][key]..., or None where a level is not a dict: a kernel's reply has whatever shape it chose."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def hand_in_key(nb, secret: bytes, folder: str | None = None) -> bytes:
    """What the checker's hidden inputs are drawn from: the course's secret and what the hand-in gives the kernel
    (its answers and any cell the student added, and the files beside the notebook the kernel can read), so that
    a regrade meets the same inputs, any change of an answer, in a cell or a file, meets new ones, and no one
    without the secret can tell which."""
    digest = hmac.new(secret, digestmod="sha256")
    for cell in nb.cells:
        if cell.cell_type == "code" and not is_test(cell) and not nbgrader_record(cell).get("locked"):
            digest.update(hashlib.sha256(cell.source.encode("utf-8", "surrogatepass")).digest())
    if folder:
        from autograder.sandbox.mounts import copy_budget, handed_in

        for path, fd in handed_in(folder, copy_budget()):
            file = hashlib.sha256(path.encode("utf-8", "surrogateescape"))
            if fd is not None:
                with os.fdopen(fd, "rb") as handle:
                    while chunk := handle.read(2**20):
                        file.update(chunk)
            digest.update(file.digest())
    return digest.digest()


def course_secret(preprocessor) -> bytes:
    """The graded course's secret (autograder.course.Course.grading_secret); none outside nbgrader."""
    from autograder.course import Course

    try:
        root = course_directory(preprocessor).root
    except RuntimeError:
        return b""
    return Course(Path(root)).grading_secret()


def is_given(cell) -> bool:
    """A locked code cell of the release that is neither a test nor an answer: setup and given code."""
    record = nbgrader_record(cell)
    return cell.cell_type == "code" and bool(record.get("locked")) and not is_test(cell) and not record.get("solution")


GUARD_REPORT = "__import__('sys').modules['_course_guard'].report()"     # the expression asking it


def runs_in_checker(assignment: str, checked) -> bool:
    """Whether `assignment`'s test cells run in the checker: GuardedExecute.checked names it or a pattern matches it
    (the course's `*`, so that an assignment added later is checked there without a line of configuration)."""
    return any(fnmatch.fnmatchcase(assignment, pattern) for pattern in checked)


class CheckerLink:
    """GuardedExecute's part for the checker: its `_checker` (a checker_session.Session for this notebook, None where
    the checks run in the kernel), and the line each check's calls travel on."""

    def give_checker(self, cell) -> None:
        """A given (locked) cell runs in the checker too: the checks use what it defines, never the kernel's."""
        try:
            outcome = self._checker.run("given", f"given cell {grade_id(cell) or ''}", cell.source, self.bridge_call,
                                        self.cell_timeout(cell))
        except checker_session.CheckerTimeout:
            outcome = {"ok": False, "ename": "CellTimeoutError", "evalue": "the given cell ran too long in the checker"}
        finally:
            self.end_line()
        if not outcome.get("ok"):
            self.log.warning("a given cell failed in the checker: %s: %s", checker_text(outcome.get("ename"), 200),
                             checker_text(outcome.get("evalue"), 2000))

    def run_check(self, cell) -> None:
        """A test cell, run in the checker: its outputs are what the check printed and, if it failed, the check's
        own message; the student's kernel only answered its calls."""
        try:
            outcome = self._checker.run("check", grade_id(cell) or "a test cell", cell.source, self.bridge_call,
                                        self.cell_timeout(cell))
        except checker_session.CheckerTimeout as timeout:
            outcome = {"ok": False, "ename": "CellTimeoutError", "evalue": str(timeout), "stdout": ""}
        finally:
            self.end_line()
        outputs = []
        printed = checker_text(outcome.get("stdout"), CHECK_OUTPUT_CHARS)
        if printed:
            outputs.append(NotebookNode(output_type="stream", name="stdout", text=printed))
        if not outcome.get("ok"):
            outputs.append(error_output(checker_text(outcome.get("ename") or "Error", 200),
                                        checker_text(outcome.get("evalue"), CHECK_OUTPUT_CHARS)))
        cell.outputs = outputs
        cell.execution_count = None

    def bridge_call(self, request: bytes) -> bytes:
        """One request of a check to the student's side (checker/bridge.py in the kernel), on this check's line
        (sandbox/bridge_line.py): its reply, whatever the kernel answers, as bytes for the checker's strict reader."""
        if self._line is None:
            if self._line_failed:
                return no_answer(f"your notebook's kernel did not answer the check ({self._line_failed})")
            self.open_line()
            if self._line is None:
                return no_answer(f"your notebook's kernel did not answer the check ({self._line_failed})")
        timeout = self.cell_timeout(self._cell)
        try:
            return self._line.call(request, time.monotonic() + timeout, self.serving)
        except TimeoutError:
            self.end_line(interrupted=True)
            run_sync(self._async_handle_timeout)(timeout, self._cell)      # interrupts the kernel (nbgrader's setting)
            raise checker_session.CheckerTimeout("the student's code ran past the cell's time limit") from None
        except (line.LineClosed, ValueError) as error:
            self.end_line()
            run_sync(self._async_check_alive)()           # a kernel that died: DeadKernelError, as for a cell
            self._line_failed = str(error)[:200]
            return no_answer(f"your notebook's kernel did not answer the check ({self._line_failed})")

    def open_line(self) -> None:
        """Connect to the kernel's bridge and ask the kernel to serve this check's calls on it."""
        where = line.path(self.km.get_connection_info()) if self.sandbox and self.km else None
        try:
            if where is None:
                raise OSError("no line to the kernel")
            # No larger than the checker's child reads whole (a frame over its limit ends the child).
            self._lines += 1
            self._line = line.Line(where, min(int(value("COURSE_GRADING_MESSAGE_MB") * 2**20), checker_process.MOST_FRAME),
                                   self._lines)
        except OSError as error:
            self._line_failed = f"no line to the kernel: {error.strerror or error}"[:200]
            return
        # The guard's report comes back with the reply, taken as soon as the line closes (ipykernel evaluates a
        # request's user expressions after its code): the verdict's question after the check costs no request.
        self._serving = self.kc.execute(
            f"__import__('sys').modules['_course_bridge'].serve_line({self._line.token.hex()!r})", silent=True,
            store_history=False, user_expressions={"guard": GUARD_REPORT})

    def serving(self) -> bool:
        """Whether the kernel still runs the execute request serving the line (its reply has not come)."""
        return self._serving is not None and not run_sync(self._async_served)()

    async def _async_served(self) -> bool:
        while await self.kc.shell_channel.msg_ready():
            reply = await self.kc.shell_channel.get_msg(timeout=0)
            if dig(reply, "parent_header", "msg_id") == self._serving:
                self._serving = None
                return True
        return False

    def end_line(self, interrupted: bool = False) -> None:
        """Close this check's line; the kernel's serve_line returns, and its reply is awaited (with the cell's
        time: a kernel that does not stop serving is interrupted, as a cell would be). After a timeout, which
        interrupted the kernel already, its reply is left to be skipped as a stale one."""
        self._line_failed = None
        if self._line is not None:
            self._line.close()
            self._line = None
        serving, self._serving = self._serving, None
        if serving is not None and not interrupted:
            reply = self.wait_for_reply(serving, self._cell)
            # Kept only where the line ended as the bridge ends it (an error there evaluates no expression).
            if isinstance(dig(reply, "content", "user_expressions", "guard"), dict):
                self._guard_reply = reply
