"""Runs in every grading kernel before the student's first cell (IPKernelApp.exec_files).

Limits what one submission can take from the grading machine, and seeds every random number
generator so that grading the same notebook twice gives the same result. The limits come from
nbgrader_config.py through environment variables.
"""

import os
import random
import resource

_memory = int(float(os.environ.get("COURSE_GRADING_MEMORY_GB", "4")) * 2**30)
_cpu = int(os.environ.get("COURSE_GRADING_CPU_SECONDS", "300"))
# Address space: a runaway allocation fails with a MemoryError/RuntimeError in the student's cell
# instead of pushing the machine into swap or the OOM killer.
resource.setrlimit(resource.RLIMIT_AS, (_memory, _memory))
# CPU time for the whole kernel: past it the kernel is killed, and the grader records that.
resource.setrlimit(resource.RLIMIT_CPU, (_cpu, _cpu))

random.seed(0)
try:
    import numpy

    numpy.random.seed(0)
except ImportError:
    pass
try:
    import torch

    torch.manual_seed(0)
except ImportError:
    pass

del os, random, resource, _memory, _cpu


def _install_guard():
    """Remember what the checks rely on, so the grader can tell when a submission replaced it.

    The grader calls `sys.modules["_course_guard"].tampered()` after every test cell; it lists the
    functions, classes and notebook names that no longer are what they were when the kernel started.
    """
    import builtins
    import sys
    import types

    watched = []

    def watch(label, owner, names):
        for name in names:
            if hasattr(owner, name):
                watched.append((f"{label}.{name}", owner, name, getattr(owner, name)))

    watch("builtins", builtins, [
        "isinstance", "issubclass", "type", "abs", "float", "int", "round", "len", "all", "any", "max",
        "min", "sum", "zip", "range", "list", "tuple", "dict", "set", "str", "repr", "getattr", "hasattr",
        "callable", "id", "AssertionError", "Exception", "ValueError", "TypeError", "RuntimeError",
        "NotImplementedError", "KeyError", "__import__",
    ])
    modules = {}
    try:
        import numpy
        import torch
        import torch.nn.functional as F

        modules.update(torch=torch, F=F)     # the names the assignments' locked setup cells bind
        # Not manual_seed: importing transformers legitimately wraps it.
        watch("torch", torch, ["allclose", "equal", "isclose", "tensor", "randn", "is_tensor",
                               "Tensor", "Generator", "testing", "nn"])
        watch("torch.testing", torch.testing, ["assert_close"])
        watch("torch.Tensor", torch.Tensor, ["__eq__", "__ne__", "__lt__", "__gt__", "__bool__", "__float__",
                                             "tolist", "item", "allclose", "equal", "abs", "max", "min",
                                             "isclose", "all", "any", "numpy", "detach", "clone"])
        watch("torch.nn.functional", F, ["layer_norm", "gelu", "scaled_dot_product_attention", "linear",
                                         "softmax", "dropout", "embedding"])
        watch("numpy", numpy, ["allclose", "array_equal", "isclose", "asarray", "array"])
        watch("numpy.testing", numpy.testing, ["assert_allclose", "assert_array_equal"])
    except ImportError:
        pass
    user_ns = get_ipython().user_ns   # noqa: F821 (IPython provides it in exec_files)
    _getattr = getattr

    def tampered():
        changed = [label for label, owner, name, original in watched if _getattr(owner, name, None) is not original]
        changed += [f"the notebook's name {name!r}" for name, module in modules.items()
                    if name in user_ns and user_ns[name] is not module]
        return changed

    guard = types.ModuleType("_course_guard")
    guard.tampered = tampered
    sys.modules["_course_guard"] = guard


_install_guard()
del _install_guard
