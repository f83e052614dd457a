"""Runs in every grading kernel before the student's first cell (IPKernelApp.exec_files).

Seeds every random number generator (again right before the first cell), so that grading the same notebook twice
gives the same result, warm or cold,
and installs the grading guard `_course_guard`, which the grader (guarded_execute.GuardedExecute) asks,
before the first cell and after every cell, for a fingerprint of what the checks rely on.

The grader, not this module, decides whether anything changed: it keeps the first fingerprint (taken
before any student code ran) and compares each later one with it. Replacing the guard's functions
therefore does not switch it off; it changes the fingerprint. What the fingerprint covers:

- the functions and classes the tests call (builtins, torch, torch.nn.functional, NumPy's comparisons);
- how a cell is read and run: IPython's input and AST transformers, the compiler, `run_cell` and the
  kernel's execute handler, the display and exception hooks (a display hook can fake a partial score);
- what runs between the lines: trace and profile functions, PyTorch's function and dispatch modes
  (a mode can route a test's reference call to the student's code);
- the modules the tests import, and the notebook's names `torch` and `F`.

The watch list itself (which attributes of which modules, which shell methods, which modules and names) is
declared in grading_environment.py, beside the limits; the probes that need code are here.

Assignment rules: `setup()` can forbid functions (assignment 1 forbids PyTorch's own LayerNorm). A
forbidden function still works when a locked or test cell calls it, as a reference; called from the
student's code (directly, or through a module such as `nn.LayerNorm`) it raises `CourseRuleError`,
which the grader flags and which fails every check that uses that code.
"""



def _seed_everything():
    """Python's, NumPy's and PyTorch's generators at seed 0. Called as the kernel starts, and again by the guard's
    setup right before the first cell: between the two, IPython draws from Python's generator for each
    kernel_info request (a banner tip), and how many the client sends depends on timing."""
    import random

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


_seed_everything()


def _load_declared():
    """What to watch and which files make the checker's bridge, declared beside the limits in the package's
    grading_environment.py (made readable in the sandbox; IPython puts this file's folder, the package's sandbox/,
    first on sys.path while it runs). Loaded under a name of its own and taken out of sys.modules again: the
    notebook never sees it."""
    import importlib.util
    import os
    import sys

    spec = importlib.util.spec_from_file_location(
        "_course_declared", os.path.join(os.path.dirname(sys.path[0]), "grading_environment.py"))
    declared = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = declared                # a dataclass there looks its module up while it is made
    try:
        spec.loader.exec_module(declared)
    finally:
        sys.modules.pop(spec.name, None)
    return declared


def _install_guard(seed_everything, declared):
    import importlib
    import os
    import sys
    import threading
    import types

    ip = get_ipython()   # noqa: F821 (IPython provides it in exec_files)
    _id, _type, _getattr, _vars = id, type, getattr, vars
    watched = []          # (label, owner, attribute name)
    probes = []           # (label, function of no arguments)
    broken = []           # rule violations seen so far

    def owner_of(label):
        """The module or class a label of the watch list names; None if it cannot be imported."""
        try:
            return importlib.import_module(label)
        except ImportError:
            parent, _, name = label.rpartition(".")
            try:
                return _getattr(importlib.import_module(parent), name)
            except (ImportError, ValueError, AttributeError):
                return None

    def contents(namespace) -> list:
        """A namespace's names and the identity of what each holds (a dict's items too: tables.METHODS)."""
        found = []
        for key, value in sorted(_vars(namespace).items() if _type(namespace) is not dict else namespace.items()):
            found.append((key, _id(value), sorted((k, _id(v)) for k, v in value.items()) if _type(value) is dict
                          and key.isupper() else None))
        return found

    def bridge_fingerprint():
        """The bridge's modules, its class and its instance, as the checker's calls find them."""
        tokens = []
        for name in declared.BRIDGE_MODULES:
            module = sys.modules.get(name)
            tokens.append((name, _id(module), contents(module) if module is not None else None))
        served = _getattr(sys.modules.get("_course_bridge"), "serve_line", None)
        bridge = _getattr(_getattr(served, "func", None), "__self__", None)
        if bridge is not None:
            tokens.append(("instance", _id(_type(bridge)), contents(_type(bridge)),
                           sorted((key, _id(value) if callable(value) else None) for key, value in _vars(bridge).items())))
        return tokens

    for label, names in declared.WATCHED.items():
        owner = owner_of(label)
        for name in names if owner is not None else ():
            if hasattr(owner, name):
                watched.append((f"{label}.{name}", owner, name))
    for label, owner in (("shell", ip), ("kernel", getattr(ip, "kernel", None))):
        if owner is None:
            continue
        for name in declared.WATCHED_METHODS:
            if hasattr(_type(owner), name) or name in _vars(owner):
                # A method patched on the class, or shadowed on the instance.
                probes.append((f"{label}.{name}", lambda o=owner, n=name: (
                    _id(_getattr(_type(o), n, None)), _id(_vars(o).get(n)))))
    probes += [
        ("shell.input_transformers_cleanup", lambda: [_id(t) for t in ip.input_transformers_cleanup]),
        ("shell.input_transformers_post", lambda: [_id(t) for t in ip.input_transformers_post]),
        ("shell.input_transformer_manager", lambda: [
            _id(ip.input_transformer_manager),
            [_id(t) for t in ip.input_transformer_manager.cleanup_transforms],
            [_id(t) for t in ip.input_transformer_manager.line_transforms],
            [_id(t) for t in ip.input_transformer_manager.token_transformers]]),
        ("shell.ast_transformers", lambda: [_id(t) for t in ip.ast_transformers]),
        ("shell.displayhook", lambda: _id(ip.displayhook)),
        ("shell.display_pub", lambda: _id(ip.display_pub)),
        ("shell.custom_exceptions", lambda: repr(ip.custom_exceptions)),
        ("shell.compile", lambda: (_id(ip.compile), _id(_type(ip.compile).get_code_name))),
        ("kernel.shell_handlers", lambda: sorted((k, _id(v)) for k, v in ip.kernel.shell_handlers.items())),
        ("sys.settrace", lambda: _id(sys.gettrace())),
        ("sys.setprofile", lambda: _id(sys.getprofile())),
        ("threading.settrace", lambda: (_id(threading._trace_hook), _id(threading._profile_hook))),
        ("IPYKERNEL_CELL_NAME", lambda: os.environ.get("IPYKERNEL_CELL_NAME")),
        ("sys.modules", lambda: [(n, _id(sys.modules.get(n))) for n in declared.WATCHED_MODULES]),
        ("the guard", lambda: (_id(sys.modules.get("_course_guard")), _id(_getattr(sys.modules.get("_course_guard"), "report", None)))),
        ("the checker's bridge", bridge_fingerprint),
    ]
    modules = {}          # the notebook's names the locked setup cells bind -> the module each must stay
    for name, module in declared.NOTEBOOK_NAMES.items():
        try:
            modules[name] = importlib.import_module(module)
        except ImportError:
            pass
    try:
        import torch

        # A classmethod: compare the stored descriptor, not the bound method a lookup creates.
        probes.append(("torch.Tensor.__torch_function__", lambda: _id(_vars(torch.Tensor).get("__torch_function__"))))
        probes.append(("torch function modes", lambda: torch._C._len_torch_function_stack()))
        probes.append(("torch dispatch modes", lambda: torch._C._len_torch_dispatch_stack()))
        probes.append(("torch function enabled", lambda: torch._C._is_torch_function_enabled()))
    except (ImportError, AttributeError):
        pass
    user_ns = ip.user_ns
    user_ns_id = _id(user_ns)

    def fingerprint():
        """label -> token; the grader compares every later fingerprint with the first one."""
        tokens = {label: repr(_id(_getattr(owner, name, None))) for label, owner, name in watched}
        for label, probe in probes:
            try:
                tokens[label] = repr(probe())
            except Exception as error:          # a probe that fails is a change too
                tokens[label] = f"unreadable: {_type(error).__name__}"
        tokens["the notebook's namespace"] = repr(_id(ip.user_ns) == user_ns_id)
        for name, module in modules.items():
            tokens[f"the notebook's name {name!r}"] = repr(name not in user_ns or user_ns[name] is module)
        return tokens

    # --- assignment rules ------------------------------------------------------------------------------

    class CourseRuleError(Exception):
        pass

    CourseRuleError.__module__ = "builtins"      # shown as plain CourseRuleError in the notebook

    def resolve(path):
        owner_path, _, name = path.rpartition(".")
        owner = sys.modules.get(owner_path) or __import__(owner_path, fromlist=["_"])
        return owner, name

    cell_folder = os.path.dirname(ip.compile.get_code_name("", "", 0)) + os.sep
    grader_files = set()
    getframe = sys._getframe

    def from_student(depth=2):
        """True when the nearest notebook cell on the call stack is not one of the grader's own."""
        frame = getframe(depth)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(cell_folder) or filename.startswith("<ipython-input"):
                return filename not in grader_files
            frame = frame.f_back
        return False

    def forbid(paths, message):
        """Make each function in `paths` raise CourseRuleError when called from the student's code."""
        for path in paths:
            try:
                owner, name = resolve(path)
                original = _getattr(owner, name)
            except (ImportError, AttributeError):
                continue

            def guarded(*args, __original=original, __path=path, **kwargs):
                if from_student(2):
                    broken.append(__path)
                    raise CourseRuleError(f"course rule: {message} (your code called {__path})")
                return __original(*args, **kwargs)

            guarded.__name__ = _getattr(original, "__name__", name)
            guarded.__doc__ = _getattr(original, "__doc__", None)
            setattr(owner, name, guarded)

    hooks = []            # hooks the student's code installed, even ones it removed again

    def count(label, original, by_student=lambda *args: from_student(3)):
        def counted(*args, **kwargs):
            if by_student(*args):
                hooks.append(label)
            return original(*args, **kwargs)
        return counted

    for owner, name in ((sys, "settrace"), (sys, "setprofile"), (threading, "settrace"), (threading, "setprofile")):
        setattr(owner, name, count(f"{owner.__name__}.{name} called", getattr(owner, name)))
    try:
        import torch.overrides
        import torch.utils._python_dispatch as dispatch

        def student_mode(mode, *rest):
            """A mode whose hook was written in one of the student's cells. Where it is pushed from does
            not tell: PyTorch re-pushes a mode around each call it intercepts, and torch.compile pushes
            modes of its own, both from inside whatever code is running."""
            for name in ("__torch_function__", "__torch_dispatch__"):
                hook = _getattr(_type(mode), name, None)
                code = _getattr(hook, "__code__", None) or _getattr(_getattr(hook, "__func__", None), "__code__", None)
                filename = _getattr(code, "co_filename", "")
                if filename.startswith(cell_folder) and filename not in grader_files:
                    return True
            return False

        torch.overrides._push_on_torch_function_stack = count(
            "a torch function mode entered", torch.overrides._push_on_torch_function_stack, student_mode)
        dispatch._push_on_torch_dispatch_stack = count(
            "a torch dispatch mode entered", dispatch._push_on_torch_dispatch_stack, student_mode)
    except (ImportError, AttributeError):
        pass
    probes.append(("hooks installed by the notebook", lambda: sorted(set(hooks))))

    done = []

    def setup(rules=(), grader_cells=()):
        """Called once by the grader before the first cell: which cells are the grader's (locked and test
        cells, as the hashes ipykernel names their code after), the rules; returns the baseline."""
        if done:
            return {"setup": "called twice"}
        done.append(True)
        grader_files.update(f"{cell_folder}{number}.py" for number in grader_cells)
        for rule in rules:
            forbid(rule["functions"], rule["message"])
        seed_everything()
        return fingerprint()

    def report():
        return {"fingerprint": fingerprint(), "rules_broken": sorted(set(broken))}

    guard = types.ModuleType("_course_guard")
    guard.setup, guard.report = setup, report
    sys.modules["_course_guard"] = guard


def _install_bridge(bridge_files):
    """The student's side of the checker (checker/bridge.py): the grader's calls of the student's code for a check
    arrive on a socket of their own beside the kernel's (sandbox/bridge_line.py), served by `_course_bridge.serve_line`,
    which the grader runs for each check; values go back. Loaded from its files, in the order `bridge_files`
    (grading_environment.BRIDGE_FILES) names them (the grading package is not importable in the sandbox); it holds
    no test and decides nothing."""
    import functools
    import importlib.util
    import os
    import socket
    import sys
    import types

    from ipykernel.kernelapp import IPKernelApp

    # IPython runs this file with its folder (the package's sandbox/) first on sys.path (safe_execfile).
    package = os.path.dirname(sys.path[0])
    for name, file in bridge_files:
        spec = importlib.util.spec_from_file_location(name, os.path.join(package, file))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    bridge = sys.modules["_course_checker_bridge"].Bridge(get_ipython().user_ns)   # noqa: F821
    served = types.ModuleType("_course_bridge")
    app = IPKernelApp.instance()
    if app.transport == "ipc":           # in the sandbox: the line's socket beside the kernel's (sandbox/bridge_line.py)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(f"{app.ip}-{sys.modules['_course_checker_bridge'].LINE_SUFFIX}")
        listener.listen(8)
        served.serve_line = functools.partial(bridge.serve_line, listener)
    sys.modules["_course_bridge"] = served


_declared = _load_declared()
_install_guard(_seed_everything, _declared)
_install_bridge(_declared.BRIDGE_FILES)
del _load_declared, _declared, _install_guard, _seed_everything, _install_bridge
