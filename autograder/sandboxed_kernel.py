"""Start a grading kernel inside a bubblewrap sandbox (the kernelspec nbgrader_config.py writes).

    python sandboxed_kernel.py CONNECTION_FILE [IPYKERNEL ARGUMENTS...]

The kernel sees the whole file system read-only, with the grading folders (the gradebook, every
submission, the masters in solutions/) replaced by empty ones. It can write only to its own working
folder (the student's autograded copy) and a private scratch folder ($TMPDIR), and it has no network: it talks to nbgrader
over Unix sockets (ZeroMQ's ipc transport) in a folder bound into the sandbox.
"""

import json
import os
import sys

connection_file = os.path.abspath(sys.argv[1])
connection = json.load(open(connection_file))
hidden = [path for path in os.environ.get("COURSE_GRADING_HIDDEN", "").split(os.pathsep) if path]
readable = [path for path in os.environ.get("COURSE_GRADING_READABLE", "").split(os.pathsep) if path]

# /tmp stays visible read-only (the Python environment itself may live there); scratch space is a
# private tmpfs, announced through TMPDIR.
argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/dev/shm",
        "--setenv", "TMPDIR", "/dev/shm", "--setenv", "MPLCONFIGDIR", "/dev/shm"]
for path in hidden:                                   # the gradebook, submissions and masters
    argv += ["--tmpfs", path]
# Only the connection file itself: its folder may be /tmp, which holds other things (a scratch course).
for path in [*readable, connection_file]:             # e.g. kernel_startup.py, inside a hidden folder
    argv += ["--ro-bind", path, path]
writable = [os.getcwd()]                              # the student's own autograded copy
if connection.get("transport") == "ipc":              # a folder of its own, made by nbgrader_config.py
    writable.append(os.path.dirname(os.path.abspath(connection["ip"])))
for path in writable:
    argv += ["--bind", path, path]
argv += ["--unshare-net", "--cap-drop", "ALL", "--die-with-parent", "--",
         sys.executable, "-m", "ipykernel_launcher", "-f", connection_file, *sys.argv[2:]]
os.execvp("bwrap", argv)
