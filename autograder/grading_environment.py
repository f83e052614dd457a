"""The grading environment, declared in one place: what one graded submission may take from the machine
(the limits), what its kernel sees (the readable paths, everything else being absent; the environment
variables it keeps), how the
kernel starts (the sandbox's kernelspec) and what the tamper guard watches.

nbgrader_config.py, the grading plugins (intake.py, guarded_execute.py) and the sandbox launcher (sandboxed_kernel.py)
read it; so does the guard inside the sandboxed kernel (kernel_startup.py), for which this file is made
readable: it imports only the standard library. Importing it changes nothing, on disk or in the process's
environment. Each limit is a setting of the course's configuration (autograder/limits.py makes a trait of each,
`c.Limits.memory_gb = 8` in nbgrader_config.py, which hands them to use_limits below), and the grader page
renders its table from those settings when the site is built. The environment variable of a limit's name
overrides it for one run, set in the shell that runs `nbgrader autograde` or `python -m autograder.classgrader`.

The limits cover the whole submission, not one process: memory and processes are counted by a cgroup
that holds the kernel and everything it starts (where the machine lets the grader create cgroups; see
`cgroups.py`), and written files land in size-limited tmpfs folders that also count as memory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

# --- the limits ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limit:
    variable: str
    default: float
    unit: str
    what: str
    why: str

    @property
    def value(self) -> float:
        """The value this process applies: its variable's (an override for one run), else the course's
        configuration (c.Limits, autograder/limits.py, handed over by use_limits), else the default."""
        return overridden(self.variable, _configured.get(self.variable, self.default))


LIMITS = [
    Limit("COURSE_GRADING_CELL_TIMEOUT", 60, "s", "wall time for one cell",
          "every solution cell runs in well under a second; a hanging cell costs a minute, not the class"),
    Limit("COURSE_GRADING_NOTEBOOK_TIMEOUT", 300, "s", "wall time for the whole notebook",
          "a full master grades in under 15 s; many slow cells in a row still end within five minutes"),
    Limit("COURSE_GRADING_KERNEL_STARTUP_TIMEOUT", 180, "s", "wall time for a grading kernel to start",
          "starting a kernel imports PyTorch in the sandbox, which on a machine loaded by parallel grading takes "
          "well over nbclient's default of 60 s; a slow start is not the student's fault"),
    Limit("COURSE_GRADING_CPU_SECONDS", 300, "s", "CPU time of each process of the submission",
          "stops a busy loop that outlives the cell timeout (for example in a child process)"),
    Limit("COURSE_GRADING_MEMORY_GB", 4, "GB", "memory of the whole submission (children, /dev/shm and files included)",
          "the masters peak under 1 GB; 4 GB lets two kernels grade side by side on an 8 GB laptop"),
    Limit("COURSE_GRADING_PROCESSES", 256, "", "processes and threads of the whole submission",
          "a kernel and PyTorch's threads use a few dozen; a fork bomb stops here"),
    Limit("COURSE_GRADING_DISK_MB", 512, "MB", "files written (working folder and /tmp together)",
          "no assignment writes files; a runaway writer fills a private tmpfs, never the grader's disk"),
    Limit("COURSE_GRADING_OUTPUT_CELL_KB", 256, "KB", "output kept from one cell",
          "a screenful of debugging prints is a few KB; the rest is dropped with a visible note"),
    Limit("COURSE_GRADING_OUTPUT_NOTEBOOK_MB", 2, "MB", "output kept from the whole notebook",
          "keeps the grader's memory and every feedback page small, whatever a notebook prints"),
    Limit("COURSE_GRADING_NOTEBOOK_MB", 5, "MB", "size of a submitted notebook at intake",
          "the released notebooks are under 100 KB; a larger file is refused (graded as the release)"),
    Limit("COURSE_GRADING_HANDIN_FILES", 20, "", "files handed in beside the notebooks, counted at intake",
          "the releases ship only their notebooks; over the limit, none of the other files is read (flagged)"),
    Limit("COURSE_GRADING_HANDIN_MB", 20, "MB", "size of the files handed in beside the notebooks, at intake",
          "a student's notes are a few KB; over the limit, none of them is read (flagged). Files the release "
          "does not ship are never graded or copied to autograded/ in any case"),
    Limit("COURSE_GRADING_MESSAGE_MB", 8, "MB", "one message from the kernel, all its parts and buffers together",
          "a cell keeps 256 KB of output, so a bigger message holds nothing the notebook keeps; this passes a print "
          "flood's messages on to be truncated with a note, and drops a bigger message before the grader holds it"),
    Limit("COURSE_GRADING_MESSAGE_VALUES", 10000, "", "JSON values one message from the kernel decodes to",
          "a message's header, metadata and content hold a few dozen values (an output's text is one, however long); "
          "a few MB of `[], ` would decode to hundreds of MB, so the grader's memory is bounded by what it decodes"),
    Limit("COURSE_GRADING_MESSAGE_PARTS", 64, "", "parts of one message from the kernel, its buffers included",
          "a Jupyter message has seven parts plus its binary buffers, and the course's notebooks send none; "
          "hundreds of buffers would all be held by the grader"),
]
BY_NAME = {limit.variable: limit for limit in LIMITS}
PREFIX = "COURSE_GRADING_"          # every variable of the grading's, limits and settings alike


_configured: dict[str, float] = {}      # the course's configured limits, as nbgrader_config.py resolved them


def overridden(variable: str, configured: float) -> float:
    """A limit's variable, when it is set, else `configured`."""
    text = os.environ.get(variable)
    return float(text) if text not in (None, "") else configured


def use_limits(values: dict[str, float]) -> None:
    """Apply the course's configured limits in this process (nbgrader_config.py calls it as it loads:
    autograder/limits.py). A variable set in the environment still wins."""
    unknown = set(values) - set(BY_NAME)
    if unknown:
        raise ValueError(f"no such limit: {', '.join(sorted(unknown))}")
    _configured.clear()
    _configured.update(values)


def limit_variables() -> dict[str, str]:
    """Every limit as this process applies it, as environment variables: what a sandbox's launcher, a process
    of its own, is started with, so it applies the same numbers."""
    return {limit.variable: repr(limit.value) for limit in LIMITS}


def grading_variables() -> dict[str, str]:
    """The grading's variables set in this process's environment (what a limit or setting was changed to)."""
    return {name: text for name, text in os.environ.items() if name.startswith(PREFIX)}


def value(variable: str) -> float:
    return BY_NAME[variable].value


def handed_over(variable: str) -> str:
    """A variable one of the grading's processes sets for another it starts (the launcher's grader and warm parent,
    a worker's original course): this module is the one reader of the grading's variables."""
    if not variable.startswith(PREFIX):
        raise ValueError(f"{variable} is not one of the grading's variables")
    return os.environ.get(variable, "")


# --- the sandbox -----------------------------------------------------------------------------------------

SANDBOX_VARIABLE = "COURSE_GRADING_SANDBOX"


def sandbox_enabled() -> bool:
    """COURSE_GRADING_SANDBOX=0 grades without bubblewrap (only for a machine you trust the code on)."""
    return os.environ.get(SANDBOX_VARIABLE, "1") != "0"


CGROUPS_VARIABLE = "COURSE_GRADING_CGROUPS"


def cgroups_required() -> bool:
    """COURSE_GRADING_CGROUPS=required: a submission whose kernel cannot get a control group (cgroups.py) is not
    graded, with a message. `optional` (the default, so that grading works for a user without cgroup
    delegation): such a kernel gets per-process limits only, and the submission is flagged."""
    setting = os.environ.get(CGROUPS_VARIABLE, "optional")
    if setting not in ("required", "optional"):
        raise ValueError(f"{CGROUPS_VARIABLE} is {setting!r}; it must be 'required' or 'optional'")
    return setting == "required"


CGROUP_PARENT_VARIABLE = "COURSE_GRADING_CGROUP_PARENT"


def cgroup_parent() -> str | None:
    """COURSE_GRADING_CGROUP_PARENT: the control group an admin delegated to the grading account, as a path from
    the hierarchy's root (`/course-grader`, or a systemd unit's `/system.slice/course-grader.service`); each
    kernel's group is made below it. Unset (the default), below the cgroup the grader runs in, which is only
    writable where the grader is root or its own cgroup is delegated. The instructors' page says how an admin
    delegates one; `python -m autograder.sandbox.preflight` checks it."""
    setting = os.environ.get(CGROUP_PARENT_VARIABLE, "")
    if not setting:
        return None
    parts = setting.split("/")
    if not setting.startswith("/") or any(part in ("", ".", "..") for part in parts[1:]):
        raise ValueError(f"{CGROUP_PARENT_VARIABLE} is {setting!r}; it must be a cgroup path such as /course-grader")
    return setting


KERNELS_VARIABLE = "COURSE_GRADING_KERNELS"


def warm_kernels() -> bool:
    """COURSE_GRADING_KERNELS=warm (the default): each grading kernel is forked from a warm parent that has imported
    WARM_IMPORTS (kernel_zygote.py, warm_kernels.py) into a sandbox built for it as for a cold one. `cold`: each
    kernel is a new Python started in its sandbox, importing everything itself (the reference; 3 CPU-seconds more
    per notebook)."""
    setting = os.environ.get(KERNELS_VARIABLE, "warm")
    if setting not in ("warm", "cold"):
        raise ValueError(f"{KERNELS_VARIABLE} is {setting!r}; it must be 'warm' or 'cold'")
    return setting == "warm"


# What the warm parent imports before it forks any kernel: what every grading kernel has imported by its first cell
# (ipykernel, IPython and its debugger, the start-up file's PyTorch and NumPy), and what every assignment's notebook
# imports (torch.nn.functional). Measured: a kernel forked from it imports nothing more before its first cell.
WARM_IMPORTS = ("torch", "torch.nn", "torch.nn.functional", "numpy", "numpy.random", "numpy.testing",
                "ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.zmqshell", "ipykernel.debugger",
                "IPython.core.interactiveshell", "IPython.core.debugger", "IPython.core.completerlib",
                "IPython.extensions.storemagic", "sqlite3", "tornado.platform.asyncio", "tornado.queues")
# What a notebook's code may use that takes far longer than its cell should: `transformers` (2.4 s of assignment
# 4's test_forward_matches_reference and of assignment 6's setup cell), and PyTorch's optimizers, whose first use
# imports PyTorch's compiler (torch._dynamo, with SymPy: 1.5 s of assignment 5's kernel and as much of its checker).
# A notebook whose code imports such a package (or, for the optimizers, names one) gets its kernel from a warm
# parent that has imported those modules too (warm_imports); the others keep the lighter parent, so a grading process
# that never grades such a notebook never pays the import (measured: importing the compiler in every parent cost the
# test suite's 01-only grading runs 45 s more than it saved).
WARM_PRELOADS = {
    "transformers": ("transformers", "transformers.utils.logging", "transformers.models.gpt2.configuration_gpt2",
                     "transformers.models.gpt2.modeling_gpt2"),
    "torch.optim": ("torch._dynamo",),
}
_IMPORTED_PACKAGE = re.compile(r"^[ \t]*(?:from|import)[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)
# What a notebook uses without importing it: an optimizer (`torch.optim.SGD(...)`, `optimizer.step()`).
_USED = {"torch.optim": re.compile(r"\boptim(?:izer)?\b")}


def warm_imports(sources) -> tuple[str, ...]:
    """What the warm parent of a notebook whose code cells are `sources` imports: WARM_IMPORTS, and the WARM_PRELOADS
    of every package a line of the code imports (`import transformers`, `from transformers import ...`, indented
    in a function too) or, for the optimizers, that the code names."""
    sources = list(sources)
    packages = {name for source in sources for name in _IMPORTED_PACKAGE.findall(source)}
    packages |= {name for name, sign in _USED.items() if any(sign.search(source) for source in sources)}
    return WARM_IMPORTS + tuple(module for package, modules in WARM_PRELOADS.items() if package in packages
                                for module in modules)


# The warm parent's socket, given to the launcher in the kernelspec's environment when the kernel is to be warm.
WARM_PARENT_VARIABLE = "COURSE_GRADING_WARM_PARENT"


# The kernel every submission runs in, as a Jupyter kernelspec. It is not installed anywhere: the grader
# hands it to the kernel manager (plugins/sandbox_kernels.SandboxKernelSpecs), with {resource_dir} the package's
# sandbox/ folder and the graded course's root added as the launcher's second argument (the launcher hides it), so
# nothing is written to disk. The launcher runs as a script, loading its own package from the folder it lies
# in; the submission's folder is never on its import path.
KERNEL_NAME = "course-sandbox"
KERNELSPEC = {
    "argv": ["python", "{resource_dir}/sandboxed_kernel.py", "{connection_file}"],
    "display_name": "Python 3 (grading sandbox)",
    "language": "python",
    # bwrap does not pass SIGINT on to the kernel, so a timed-out cell is interrupted by a message.
    "interrupt_mode": "message",
}

# The grader's process id, which it gives the sandbox's launcher (the kernelspec's environment): the launcher
# ends the sandbox with it (sandboxed_kernel.die_with_grader).
GRADER_PID_VARIABLE = "COURSE_GRADING_GRADER_PID"

# Run in the kernel before the student's first cell: seeds and the tamper guard.
STARTUP_FILE = "sandbox/kernel_startup.py"

# Environment passed into the sandbox; everything else (tokens, the grader's paths) stays outside.
KEPT_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                    "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONHASHSEED")


PACKAGE = Path(__file__).resolve().parent       # the grading package, wherever the graded course lies


def kernel_arguments() -> list[str]:
    """What every grading kernel is started with: no history file, and the start-up file."""
    return ["--HistoryManager.hist_file=:memory:",
            f"--IPKernelApp.exec_files={[str(PACKAGE / STARTUP_FILE)]}"]


# What the kernel's file system holds: it is built from nothing (sandboxed_kernel.base_argv), so a path is
# visible only if it is named here, or is the Python environment the kernel runs (found where it lives).
# The system's programs and libraries, read-only (where /bin or /lib is a link into /usr, the link is made):
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The few files of /etc a Python process reads: the dynamic loader's cache and configuration, the time zone.
# /etc/passwd and /etc/group are written for the sandbox (its users only, with the working folder as home).
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives",
                "/etc/fonts",       # fontconfig's configuration, which Matplotlib's image writers load
                # PyTorch's cpuinfo reads how many processors there are from here (it complains without it)
                "/sys/devices/system/cpu")


# The student's side of the checker (checker/bridge.py and the files it imports), which the start-up file loads in
# this order, each under its name here (the grading package is not importable in the sandbox).
BRIDGE_FILES = (("_course_checker_values", "checker/values.py"), ("_course_checker_unpacking", "checker/unpacking.py"),
                ("_course_checker_tables", "checker/tables.py"), ("_course_checker_reading", "checker/reading.py"),
                ("_course_checker_bridge", "checker/bridge.py"))


def readable_paths() -> list[str]:
    """The grading package's only files the kernel may read (read-only): the start-up file, this file, which
    the guard reads its watch list from, and the checker's bridge, which answers the checks' calls."""
    return [str(PACKAGE / STARTUP_FILE), str(PACKAGE / Path(__file__).name),
            *(str(PACKAGE / file) for _, file in BRIDGE_FILES)]


# Set by the class grader on its workers, which grade a copy of the course: the instructor's own course folder,
# which the sandbox hides as well (plugins/sandbox_kernels.hidden_courses).
ORIGINAL_COURSE_VARIABLE = "COURSE_GRADING_ORIGINAL_COURSE"


def never_readable(courses: list[str]) -> list[str]:
    """Folders that stay empty in the kernel even where one lies inside a readable path (a course kept under
    /usr/local, say): the `courses` (the graded one and, under the class grader, the instructor's original:
    their gradebooks, masters and submissions), the checkout the course's reference module is installed from
    (with `make`, the grading package's too: its .git, its masters) and the homes. Only the Python environment
    is mounted back inside them."""
    import importlib.util

    paths = [str(Path(course).resolve()) for course in courses]
    reference = importlib.util.find_spec("gptcourse")
    if reference is not None and reference.submodule_search_locations:
        paths.append(str(Path(list(reference.submodule_search_locations)[0]).resolve().parent))
    return [*paths, os.path.expanduser("~"), "/home", "/root"]


# --- what the tamper guard watches (kernel_startup.py) --------------------------------------------------
# The guard fingerprints each attribute below (its object's identity) before the first cell and after every
# cell; the grader compares the fingerprints. An owner that cannot be imported is skipped.

WATCHED = {
    "builtins": ["isinstance", "issubclass", "type", "abs", "float", "int", "round", "len", "all", "any", "max",
                 "min", "sum", "zip", "range", "list", "tuple", "dict", "set", "str", "repr", "getattr", "hasattr",
                 "callable", "id", "AssertionError", "Exception", "BaseException", "ValueError", "TypeError",
                 "RuntimeError", "NotImplementedError", "KeyError", "__import__", "__build_class__", "compile",
                 "exec", "eval", "print", "object", "super", "iter", "next", "sorted", "enumerate"],
    "sys": ["displayhook", "excepthook", "breakpointhook"],
    # Not manual_seed: importing transformers legitimately wraps it.
    "torch": ["allclose", "equal", "isclose", "tensor", "randn", "is_tensor", "Tensor", "Generator", "testing",
              "nn", "zeros", "ones"],
    "torch.testing": ["assert_close"],
    "torch.Tensor": ["__eq__", "__ne__", "__lt__", "__gt__", "__bool__", "__float__", "tolist", "item", "allclose",
                     "equal", "abs", "max", "min", "isclose", "all", "any", "numpy", "detach", "clone"],
    "torch.nn.functional": ["layer_norm", "gelu", "scaled_dot_product_attention", "linear", "softmax", "dropout",
                            "embedding", "cross_entropy"],
    "numpy": ["allclose", "array_equal", "isclose", "asarray", "array"],
    "numpy.testing": ["assert_allclose", "assert_array_equal"],
}
# Methods of IPython's shell and of the kernel that read and run a cell: patched on the class or shadowed
# on the instance, either is a change.
WATCHED_METHODS = ("run_cell", "run_cell_async", "run_ast_nodes", "run_code", "transform_cell", "transform_ast",
                   "showtraceback", "_showtraceback", "showsyntaxerror", "user_expressions", "do_execute",
                   "execute_request", "should_run_async", "_run_cell", "run_line_magic")
# Modules the tests import: replacing one in sys.modules is a change.
WATCHED_MODULES = ("builtins", "sys", "torch", "torch.nn.functional", "numpy", "_course_guard")
# The checker's bridge in the kernel (BRIDGE_FILES): what it reports of the student's objects (which parameters a
# module has, which objects are one) is the kernel's word, which values alone cannot check; a change to these
# modules, the bridge's class or its instance is flagged.
BRIDGE_MODULES = ("_course_bridge", *(name for name, _ in BRIDGE_FILES))
# The names the assignments' locked setup cells bind, and the modules they must stay.
NOTEBOOK_NAMES = {"torch": "torch", "F": "torch.nn.functional"}
