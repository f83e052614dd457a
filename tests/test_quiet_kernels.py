"""A notebook executed the way `make book` executes the lessons (tools.notebooks.execute_all, the pool that
tools.cache.execute_lessons runs) leaves a quiet stderr and no kernel behind (#42): the kernel talks to the
executor over IPC sockets in a private folder, not over unencrypted TCP ("Kernel is running over TCP without
encryption"), and is asked to shut down and waited for, not interrupted first ("KeyboardInterrupt caught in
kernel"). A kernel error must still reach stderr and the result."""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest

from tools.notebooks import execute_all

pytestmark = pytest.mark.lessons        # it executes notebooks (tests/markers.py)

# papermill asks the kernel for its kernel info once the cells have run and shuts the kernel down as soon
# as the reply arrives, while the kernel is still in that request's handler, where ipykernel lets SIGINT
# through as KeyboardInterrupt. On a loaded machine the kernel lingers there long enough for the
# interrupt that jupyter_client's shutdown_kernel sends first to land; this kernel lingers every time.
LINGER = '''\
import inspect, os, time
from ipykernel.kernelapp import IPKernelApp

kernel = get_ipython().kernel
kernel_info = kernel.shell_handlers["kernel_info_request"]

async def kernel_info_then_linger(*args):
    result = kernel_info(*args)
    if inspect.isawaitable(result):
        await result
    time.sleep(0.5)

kernel.shell_handlers["kernel_info_request"] = kernel_info_then_linger
print(os.getpid(), IPKernelApp.instance().connection_file)
'''


def notebook(path: Path, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def gone(pid: int, seconds: float = 5.0) -> bool:
    """True once `pid` has exited and been reaped (or is a zombie whose parent has not reaped it yet)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_a_notebook_runs_over_ipc_and_shuts_its_kernel_down_without_interrupting_it(tmp_path, capfd):
    source = notebook(tmp_path / "quiet.ipynb", LINGER, "print(6 * 7)")
    runs = execute_all([source], tmp_path / "out", workers=1, timeout=60, root=tmp_path)
    stderr = capfd.readouterr().err
    run = runs[source]
    assert run.error is None
    executed = nbformat.read(run.output, as_version=4)
    pid, connection_file = executed.cells[0].outputs[0]["text"].split()
    assert executed.cells[1].outputs[0]["text"] == "42\n"
    assert "KeyboardInterrupt caught in kernel" not in stderr
    assert "without encryption" not in stderr
    assert gone(int(pid)), f"the kernel (pid {pid}) is still running"
    # The kernel's sockets and connection file were in a private folder of their own, outside the
    # notebook's folder, short enough for a unix socket's path, and removed with the kernel.
    folder = Path(connection_file).parent
    assert folder.name.startswith("kernel-") and not folder.is_relative_to(tmp_path)
    assert len(os.fsencode(folder / "kernel-99999")) < 104
    assert not folder.exists(), f"left behind: {folder}"


def test_a_kernel_error_still_shows(tmp_path, capfd):
    """What the kernel itself writes to stderr still reaches it; a failing cell is still the run's error."""
    source = notebook(tmp_path / "loud.ipynb", "import sys\nprint('kernel says', file=sys.__stderr__, flush=True)",
                      "1 / 0")
    runs = execute_all([source], tmp_path / "out", workers=1, timeout=60, root=tmp_path)
    assert "kernel says" in capfd.readouterr().err
    assert "ZeroDivisionError" in runs[source].error
