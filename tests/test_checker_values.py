"""The checker's values (autograder/checker/): what crosses between the student's kernel and the checker is
plain data, rebuilt by a strict reader, whatever the student's side sends; and the student's functions,
classes and objects, reached through the bridge, behave in a check as they would in the kernel (values,
in-place changes, identity, exceptions, autograd through their code and into their parameters).

Here the bridge serves a namespace in this process, so that the semantics are tested quickly; the attacks
that need the student's side to be a real kernel are graded through the grader in tests/test_checker_grading.py."""

from __future__ import annotations

import collections
import json
import struct

import pytest
import torch

from autograder.checker import unpacking, values
from autograder.checker.bridge import Bridge
from autograder.checker.remote import Connection, StudentObject

pytestmark = pytest.mark.quick


def notebook(code: str) -> Connection:
    """A student's notebook, its names served by a bridge; the checker's connection to it."""
    namespace: dict = {}
    exec(compile(code, "<student>", "exec"), namespace)
    return Connection(Bridge(namespace).serve)


LAYERNORM = '''
import torch
def layernorm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta
'''


def test_every_value_shape_crosses_and_comes_back_equal():
    tree = {"a": (1, -2.5, float("nan"), float("inf"), None, True, "text", 2**70),
            "b": [torch.arange(6, dtype=torch.float64).reshape(2, 3), torch.zeros(0, 4), torch.tensor(3),
                  torch.tensor([True, False]), torch.ones(2, dtype=torch.bfloat16), torch.Size([2, 3]), torch.int64]}
    back = unpacking.unpack(values.pack(tree), 2**20)
    assert back["a"][:2] == (1, -2.5) and back["a"][2] != back["a"][2] and back["a"][3:] == (float("inf"), None, True,
                                                                                           "text", 2**70)
    for sent, got in zip(tree["b"][:5], back["b"][:5]):
        assert type(got) is torch.Tensor and got.dtype == sent.dtype and torch.equal(got, sent)
    assert back["b"][5] == torch.Size([2, 3]) and back["b"][6] is torch.int64


@pytest.mark.parametrize("damage", ["huge header", "deep header", "unknown dtype", "short buffer", "extra bytes",
                                    "bad shape", "unknown marker", "not json"])
def test_a_damaged_message_is_refused_never_half_read(damage):
    good = values.pack({"x": torch.ones(3)})
    (length,) = struct.unpack_from("<I", good)
    header = json.loads(good[4:4 + length])
    body = good[4 + length:]
    if damage == "huge header":
        header = {"$tuple": [[{"$dict": {}}] * 30_000]}
    elif damage == "deep header":
        header = json.loads("[" * 60 + "]" * 60)
    elif damage == "unknown dtype":
        header["$dict"]["x"]["$tensor"][0] = "object"
    elif damage == "short buffer":
        body = body[:-1]
    elif damage == "extra bytes":
        body = body + b"\0"
    elif damage == "bad shape":
        header["$dict"]["x"]["$tensor"][1] = [2**40]
    elif damage == "unknown marker":
        header = {"$eval": "__import__('os')"}
    encoded = json.dumps(header).encode() if damage != "not json" else b"{nope"
    with pytest.raises(values.Refused):
        unpacking.unpack(struct.pack("<I", len(encoded)) + encoded + body, 2**20)


def test_a_student_function_is_called_with_values_and_gives_plain_tensors():
    student = notebook(LAYERNORM)
    layernorm = student.names(["layernorm", "not_defined", "torch"])
    assert set(layernorm) == {"layernorm"}
    x = torch.randn(4, 6)
    got = layernorm["layernorm"](x, torch.ones(6), torch.zeros(6))
    assert type(got) is torch.Tensor and torch.allclose(got, torch.nn.functional.layer_norm(x, (6,)), atol=1e-5)


def test_a_tensor_subclass_that_answers_comparisons_arrives_as_its_plain_values():
    """The student's zeros dressed as a subclass whose __torch_function__ says allclose is True: what crosses is
    the zeros' bytes, and the checker's allclose is the checker's."""
    student = notebook('''
import torch
class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.allclose):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})
def layernorm(x, gamma, beta, eps=1e-5):
    return torch.zeros_like(x).as_subclass(Liar)
''')
    got = student.names(["layernorm"])["layernorm"](torch.randn(3, 5), torch.ones(5), torch.zeros(5))
    assert type(got) is torch.Tensor and not torch.allclose(got, torch.ones(3, 5)) and got.abs().sum().item() == 0


def test_in_place_changes_and_returned_arguments_are_seen_by_the_check():
    student = notebook('''
def center(x):
    x -= x.mean(-1, keepdim=True)
    return x
def untouched(x):
    return x * 2
''')
    functions = student.names(["center", "untouched"])
    x = torch.arange(6.0).reshape(2, 3)
    kept = x.clone()
    assert functions["untouched"](x) is not x and torch.equal(x, kept)
    result = functions["center"](x)
    assert result is x and not torch.equal(x, kept) and torch.allclose(x.mean(-1), torch.zeros(2))


def test_lists_and_dicts_the_students_code_changes_in_place_change_in_the_check_too():
    """A converter that pops its input's keys, transposes a tensor in place or reorders a list (assignment 6's
    catalogued bugs) leaves the check's arguments as it would have left them in the kernel; what it writes into
    a tensor reaches that argument alone, never memory the check shares with it (issue 58's attacker round: a
    hand-in zeroed a state dict to zero the reference model the check ran after the call)."""
    student = notebook('''
def convert(state, order):
    out = {"w": state.pop("a").t_()}
    state["new"] = out["w"]
    order.reverse()
    return out
def wipe(state):
    for tensor in state.values():
        tensor.zero_()
''')
    convert, wipe = (student.names(["convert", "wipe"])[name] for name in ("convert", "wipe"))
    a, b = torch.arange(6.0).reshape(2, 3), torch.ones(2)
    state, order = collections.OrderedDict(a=a, b=b), [a, b]                # as state_dict() gives it
    out = convert(state, order)
    assert list(state) == ["b", "new"] and state["b"] is b and state["new"] is a and out["w"] is a
    assert a.shape == (3, 2) and torch.equal(a, torch.arange(6.0).reshape(2, 3).t())
    assert order[0] is b and order[1] is a
    shared = torch.nn.Linear(3, 3).weight      # a state dict's entry shares its memory with the parameter
    entry, kept = shared.detach(), shared.detach().clone()
    convert({"a": entry}, [])
    assert torch.equal(entry, kept.t()) and torch.equal(shared.detach(), kept)     # t_() views it anew, only it
    entry = shared.detach()
    wipe({"a": entry})       # a hand-in that zeroes its input to zero the reference the check computes after
    assert not entry.any() and torch.equal(shared.detach(), kept)    # the argument shows it, the model does not


def test_configurations_cross_as_their_fields_and_come_back_as_the_students_objects():
    """A check's own Config dataclass (assignment 5's block checks) reaches the student's code as an instance of
    the notebook's dataclass of that name where it has one with these fields, else of one made with them; a
    transformers configuration (assignment 6) as transformers' own class; the student's dataclass comes back as
    an object whose fields the check reads."""
    import dataclasses

    from transformers import GPT2Config

    student = notebook('''
from dataclasses import dataclass
@dataclass
class GPTConfig:
    width: int
    eps: float = 1e-5
def describe(cfg):
    return type(cfg).__name__, cfg.width, cfg.eps
def from_hf(hf):
    return GPTConfig(width=hf.n_embd, eps=hf.layer_norm_epsilon)
''')
    describe, from_hf = (student.names(["describe", "from_hf"])[name] for name in ("describe", "from_hf"))

    @dataclasses.dataclass
    class Config:
        width: int
        eps: float
        heads: int = 2

    assert describe(dataclasses.make_dataclass("GPTConfig", ["width", "eps"])(8, 1e-3)) == ("GPTConfig", 8, 1e-3)
    assert describe(Config(4, 1e-6)) == ("Config", 4, 1e-6)
    got = from_hf(GPT2Config(n_embd=12, n_layer=1, n_head=2, layer_norm_epsilon=1e-3))
    assert (got.width, got.eps, hasattr(got, "heads")) == (12, 1e-3, False)


def test_an_optimizer_the_check_built_steps_the_checks_module_in_the_kernel():
    """Assignment 5's train_step(model, optimizer, ...): the check's module and its optimizer (momentum, here)
    are built in the kernel once, their state kept there across calls, and each step moves the check's own
    parameters exactly as the same steps run in one process do."""
    import copy

    import torch.nn.functional as F

    student = notebook('''
import torch
import torch.nn.functional as F
from torch import nn                       # the check's class is defined beside the notebook, with its names
def train_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()
''')
    classes = """
import torch
from torch import nn
class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(3, 2)
    def forward(self, x):
        return torch.tanh(self.layer(x))
"""
    import linecache

    linecache.cache["<check>"] = (len(classes), None, classes.splitlines(True), "<check>")   # as the checker has it
    namespace: dict = {}
    exec(compile(classes, "<check>", "exec"), namespace)
    train_step = student.names(["train_step"])["train_step"]
    torch.manual_seed(0)
    model, x, y = namespace["Small"](), torch.randn(4, 3), torch.randn(4, 2)
    reference = copy.deepcopy(model)
    ours = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    theirs = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        theirs.zero_grad()
        want = F.mse_loss(reference(x), y)
        want.backward()
        theirs.step()
        assert train_step(model, ours, x, y) == pytest.approx(want.item(), abs=1e-6)
    for mine, expected in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(mine, expected, atol=1e-6)
    with pytest.raises(TypeError, match="already stepped"):
        train_step(reference, theirs, x, y)


def test_a_module_of_the_checks_holding_the_students_walks_them_as_pytorch_does():
    """A check's GPT of the student's blocks: named_parameters(), modules() and train() reach into the student's
    modules in the kernel (PyTorch's walk passes a set, which does not cross, so the walk is answered here)."""
    student = notebook(MLP)
    mlp = student.names(["MLP"])["MLP"](4)
    holder = torch.nn.ModuleList([torch.nn.Linear(4, 4), mlp])
    names = [name for name, _ in holder.named_parameters()]
    assert names == ["0.weight", "0.bias", *(f"1.{name}" for name, _ in mlp.named_parameters())]
    assert all(parameter is mirror for parameter, mirror in zip(list(holder.parameters())[2:], mlp.parameters()))
    assert sum(isinstance(module, torch.nn.Linear) for module in holder.modules()) == 4      # up, down, head
    holder.eval()
    assert mlp.training is False


def test_the_students_exceptions_are_raised_again_as_their_built_in_kind():
    student = notebook('''
class ShapeError(ValueError):
    pass
def stub(x):
    raise NotImplementedError()
def strict(x):
    raise ShapeError("x must be 2-d")
''')
    functions = student.names(["stub", "strict"])
    with pytest.raises(NotImplementedError):
        functions["stub"](1)
    with pytest.raises(ValueError, match="x must be 2-d") as raised:
        functions["strict"](torch.ones(2))
    assert type(raised.value).__name__ == "ShapeError"


def test_gradients_flow_back_through_the_students_function():
    layernorm = notebook(LAYERNORM).names(["layernorm"])["layernorm"]
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    gamma = torch.randn(5, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(3, 5, dtype=torch.float64)
    (layernorm(x, gamma, torch.zeros(5, dtype=torch.float64)) * upstream).sum().backward()
    mine_x, mine_gamma = x.detach().clone().requires_grad_(True), gamma.detach().clone().requires_grad_(True)
    (torch.nn.functional.layer_norm(mine_x, (5,), mine_gamma) * upstream).sum().backward()
    assert torch.allclose(x.grad, mine_x.grad) and torch.allclose(gamma.grad, mine_gamma.grad)
    with torch.no_grad():
        assert not layernorm(x, gamma, torch.zeros(5, dtype=torch.float64)).requires_grad


def test_a_students_module_stays_in_the_kernel_and_trains_there():
    student = notebook('''
import torch
from torch import nn
class Tiny(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)
    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))
''')
    Tiny = student.names(["Tiny"])["Tiny"]
    torch.manual_seed(0)
    model = Tiny(4)
    assert isinstance(model, StudentObject)
    parameters = list(model.parameters())
    assert [tuple(p.shape) for p in parameters] == [(8, 4), (8,), (4, 8), (4,)]
    assert sum(p.numel() for p in parameters) == 76
    assert set(model.state_dict()) == {"up.weight", "up.bias", "down.weight", "down.bias"}
    x = torch.randn(2, 4)
    model(x).pow(2).sum().backward()                  # no checker tensor needs a gradient: the kernel's do
    grad = model.up.weight.grad
    assert type(grad) is torch.Tensor and grad.shape == (8, 4) and grad.abs().sum() > 0
    assert model.training is True
    model.eval()
    assert model.training is False


MLP = '''
import torch
from torch import nn
def gelu_tanh(x):
    return x * 0                      # Part 1 left wrong: a check of the MLP swaps it for a reference
class MLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.head = nn.Linear(width, width, bias=False)
        self.head.weight = self.down.weight if width == 4 * width else self.head.weight
    def forward(self, x):
        return self.down(gelu_tanh(self.up(x)))
'''


def test_a_modules_parameters_are_mirrored_written_back_and_kept_in_step():
    """A parameter crosses as one mirror per kernel tensor: the check's in-place writes reach the kernel before
    the next call, the kernel's changes (an optimizer's step, a backward's .grad) reach the mirror after it."""
    student = notebook(MLP)
    names = student.names(["MLP", "gelu_tanh"])
    mlp = names["MLP"](3)
    up, down = mlp.up, mlp.down
    assert up.weight is mlp.up.weight and isinstance(up.weight, torch.nn.Parameter)
    with torch.no_grad():
        for p in down.parameters():
            p.zero_()
        down.bias += 1.5
    assert torch.equal(mlp(torch.randn(2, 3)), torch.full((2, 3), 1.5))     # the kernel's down was written
    student.namespace()["gelu_tanh"] = __import__("functools").partial(torch.nn.functional.gelu, approximate="tanh")
    loss = mlp(torch.randn(4, 3)).sum()
    loss.backward()
    assert torch.equal(down.bias.grad, torch.full((3,), 4.0))               # autograd ran in the kernel
    optimizer = student.names(["torch"]).get("torch")                        # modules are never sent
    assert optimizer is None
    before = up.weight.detach().clone()
    with torch.no_grad():                        # (a write through .data has its own version: checks use no_grad)
        mlp.up.weight.mul_(2)                                                # a write the kernel sees next
    assert torch.equal(mlp.up.weight, 2 * before)


def test_an_attribute_is_asked_of_the_kernel_once_until_the_kernel_says_it_changed():
    """A check that computes its references reads layer.weight once per formula: the kernel is asked once, and
    asked again only after the student's code rebound the attribute or wrote what it holds in place."""
    student = notebook(MLP + "\ndef swap_up(mlp):\n    mlp.up = torch.nn.Linear(3, 12)\n"
                             "def tag(mlp):\n    mlp.tags.append('seen')\n"
                             "def rescale(mlp):\n    mlp.scale = None\n    mlp.scale = float('0.7')\n")
    asked = collections.Counter()
    send = student.send
    student.send = lambda request: asked.update(["request"]) or send(request)
    names = student.names(["MLP", "swap_up", "tag", "rescale"])
    mlp = names["MLP"](3)
    mlp.tags = []
    asked.clear()
    first = [mlp.up.weight for _ in range(5)]
    assert asked["request"] == 2 and all(weight is first[0] for weight in first)      # mlp.up, then its weight
    mlp(torch.randn(2, 3))
    assert mlp.up.weight is first[0] and asked["request"] == 3                         # the call alone
    names["swap_up"](mlp)
    assert mlp.up.weight is not first[0] and asked["request"] == 6                     # the call, then both again
    assert mlp.tags == []
    names["tag"](mlp)
    assert mlp.tags == ["seen"]                                                        # written in place: asked anew
    mlp.up = first_up = mlp.down
    assert mlp.up is first_up
    mlp.scale = float("0.5")
    assert mlp.scale == 0.5
    names["rescale"](mlp)              # the old float freed, the new one at its address: still seen as new
    assert mlp.scale == 0.7


SNEAKY = '''
import torch
from torch import nn
class Sneaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(3, 3)
    def parameters(self, recurse=True):       # hides its layer from whoever iterates it
        return iter(())
class Answering(Sneaky):
    def __getattr__(self, name):              # runs on every read of a submodule or parameter, in plain Python
        value = super().__getattr__(name)
        with torch.no_grad():
            for p in super().parameters():
                p.zero_()
        return value
'''


def test_a_students_module_is_read_as_pytorch_holds_it_running_none_of_its_classs_code():
    """A check reads a module's submodules and parameters from its own tables, and its parameters() and the like
    are nn.Module's: a class that hides its weights from parameters() changes nothing of what the check sees. A
    class whose own code answers its attributes (a __getattr__ that zeroes the weights as they are read, or hands
    the forward another layer than the one the check drew) is refused, by name, at the first read."""
    made = notebook(SNEAKY).names(["Sneaky", "Answering"])
    sneaky = made["Sneaky"]()
    weight = sneaky.up.weight
    assert weight.abs().sum() > 0 and len(list(sneaky.parameters())) == 2
    with torch.no_grad():
        for p in sneaky.parameters():
            p.fill_(0.5)
    assert torch.equal(sneaky.up.weight, torch.full((3, 3), 0.5))
    answering = made["Answering"]()
    with pytest.raises(TypeError, match="your Answering overrides __getattr__"):
        answering.up


OUTSIDE_THE_TABLES = '''
import torch
from torch import nn
class Unregistered(nn.Module):                # up's weight moved out of its table: randomization never draws it
    def __init__(self):
        super().__init__()
        self.heads = 4
        self.up = nn.Linear(3, 3)
        self.up.__dict__["weight"] = self.up._parameters.pop("weight").detach() * 0.001
        self.blocks = [nn.Linear(3, 3)]       # a plain list: PyTorch registers none of it
class Shadowed(nn.Module):                    # registered, and another layer in __dict__ that self.up reads
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(3, 3)
        self.__dict__["up"] = nn.Linear(3, 3)
class Classy(nn.Module):                      # a class attribute of a table's name is found before the table
    up = nn.Linear(3, 3)
    def __init__(self):
        super().__init__()
        self._modules["up"] = nn.Linear(3, 3)  # add_module would refuse the name
'''


def test_a_weight_or_a_layer_past_the_modules_tables_is_refused_by_name():
    """What a module keeps outside PyTorch's tables (a weight moved into __dict__, layers in a plain list) is never
    drawn by a check that walks its parameters, so the check may not read it either; a name held both in a table
    and where Python's lookup finds it first is refused at any read of that module, so the forward cannot compute
    with another layer than the one the check drew. Plain values are read as they are."""
    made = notebook(OUTSIDE_THE_TABLES).names(["Unregistered", "Shadowed", "Classy"])
    unregistered = made["Unregistered"]()
    assert unregistered.heads == 4 and unregistered.up.bias.shape == (3,)
    with pytest.raises(AttributeError, match="your Linear's `weight` is a tensor or a layer the module does not register"):
        unregistered.up.weight
    assert getattr(unregistered.up, "weight", None) is None
    with pytest.raises(AttributeError, match="your Unregistered's `blocks`"):
        unregistered.blocks
    for name, where in (("Shadowed", "its __dict__"), ("Classy", r"its class \(Classy\.up\)")):
        module = made[name]()
        with pytest.raises(TypeError, match=f"your {name} holds `up` twice, in PyTorch's table of its modules and in {where}"):
            module.up
        with pytest.raises(TypeError, match=f"your {name} holds `up` twice"):
            list(module.named_parameters())


TOLD = '''
import torch
from torch import nn
class Told(type):                             # answers __mro__ without PyTorch's classes, zeroing what it can reach
    @property
    def __mro__(cls):
        for instance in list(cls.__dict__.get("made", ())):
            with torch.no_grad():
                for p in instance._parameters.values():
                    p.zero_()
        return (cls, object)
class Hidden(nn.Linear, metaclass=Told):
    made = []
    def __init__(self):
        super().__init__(3, 3)
        Hidden.made.append(self)
'''


def test_a_metaclass_cannot_hide_nn_module_from_the_checker_or_run_in_its_reads():
    """The kernel's side reads a class through type's own descriptors (its real MRO), never through what a
    metaclass answers: the module is an nn.Linear to the check, and reading or setting its mode runs no code of
    the student's, so the values the check drew are still there after eval()."""
    hidden = notebook(TOLD).names(["Hidden"])["Hidden"]()
    assert isinstance(hidden, torch.nn.Linear)
    with torch.no_grad():
        for p in hidden.parameters():
            p.fill_(0.5)
    hidden.eval()
    assert hidden.training is False
    assert torch.equal(hidden.weight, torch.full((3, 3), 0.5)) and torch.equal(hidden.bias, torch.full((3,), 0.5))


MODE_TRICKS = '''
import torch
from torch import nn
class Tricky(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(3, 3)
        self.down = nn.Linear(3, 3)
    def train(self, mode=True):               # PyTorch's eval() calls it: zero the weights the check just drew
        with torch.no_grad():
            for p in self.up.parameters():
                p.zero_()
        return super().train(mode)
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):   # PyTorch's named_parameters walks it
        yield prefix, self
        yield "up", self.up                   # down left out: it would keep its own initial values
    def forward(self, x):
        return self.down(self.up(x))
'''


def test_setting_a_modules_mode_or_listing_its_parameters_runs_none_of_its_classs_code():
    """PyTorch's own eval() calls the module's train(), its named_parameters() walks the module's named_modules():
    a class that overrides those would run between a check's randomization and its reference. The check's are
    tables.py's: every parameter listed, the mode set, the weights the check drew kept."""
    tricky = notebook(MODE_TRICKS).names(["Tricky"])["Tricky"]()
    names = [name for name, _ in tricky.named_parameters()]
    assert names == ["up.weight", "up.bias", "down.weight", "down.bias"]
    with torch.no_grad():
        for p in tricky.parameters():
            p.fill_(0.5)
    tricky.eval()
    assert tricky.training is False and tricky.up.training is False
    assert torch.equal(tricky.up.weight, torch.full((3, 3), 0.5))


HIDDEN_TABLE = '''
import torch
from torch import nn
class Table(dict):                            # PyTorch reads it as a dict; its own items() hides the weight
    def items(self):
        return [(key, value) for key, value in dict.items(self) if key != "weight"]
    def __iter__(self):
        return iter([key for key in dict.keys(self) if key != "weight"])
class Hiding(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(3, 3)
        self.qkv.__dict__["_parameters"] = Table(self.qkv.__dict__["_parameters"])
'''


def test_a_table_of_a_dict_subclass_is_read_as_the_dict_pytorch_holds():
    """A module whose parameter table is a dict subclass with its own items() would be empty, or short, to a
    reader that trusts its methods: the check reads it by dict's own, and the hidden weight is drawn too."""
    hiding = notebook(HIDDEN_TABLE).names(["Hiding"])["Hiding"]()
    assert [name for name, _ in hiding.named_parameters()] == ["qkv.weight", "qkv.bias"]


def test_a_parameter_the_check_wrote_keeps_its_values_until_the_students_code_runs():
    """A kernel's reply may say anything of its parameters (the bridge is the student's to replace): a reply to a
    read that says a parameter the check wrote holds something else is refused (the check fails), and the check
    keeps its values, until a call of the student's code."""
    namespace: dict = {}
    exec(compile(MLP, "<student>", "exec"), namespace)
    bridge = Bridge(namespace)
    reported = bridge.updated

    def zeroed():                             # the student's replacement: every parameter reported as zeros
        with torch.no_grad():
            for kept in list(bridge.objects.values()):
                if isinstance(kept, torch.nn.Parameter):
                    kept.zero_()
        return reported()

    bridge.updated = zeroed
    mlp = Connection(bridge.serve).names(["MLP"])["MLP"](3)
    weight = mlp.up.weight
    with torch.no_grad():
        weight.fill_(0.5)
    with pytest.raises(values.Refused, match="no longer holds what the check set it to"):
        mlp.eval()                                                        # no code of the student's was called
    assert torch.equal(weight, torch.full_like(weight, 0.5))              # the check's values, whatever was said
    mlp(torch.randn(2, 3))
    assert torch.equal(mlp.up.weight, torch.zeros_like(weight))           # the student's code ran: the kernel's


def test_a_check_s_own_parameter_keeps_its_shape_and_type_whatever_the_students_code_does():
    """The student's code may change the values of a tensor of a module the check built (an optimizer's step), but
    a tensor reshaped in the kernel would make the check's own expectations the student's: refused."""
    student = notebook("import torch\ndef groups(model):\n    for p in model.parameters():\n"
                       "        p.data = p.data.reshape(1, -1)\n    return [list(model.parameters())]\n")
    model = torch.nn.Linear(3, 2)
    with pytest.raises(values.Refused, match="shape or type"):
        student.names(["groups"])["groups"](model)
    assert tuple(model.weight.shape) == (2, 3) and tuple(model.bias.shape) == (2,)


def test_the_checks_namespace_swaps_reach_the_notebook_and_are_undone():
    student = notebook(MLP)
    names = student.namespace()
    yours = names.get("gelu_tanh")
    assert "gelu_tanh" in names and "nothing_here" not in names and names.get("nothing_here", 7) == 7
    names["gelu_tanh"] = torch.tanh
    assert torch.equal(student.names(["gelu_tanh"])["gelu_tanh"](torch.ones(2)), torch.tanh(torch.ones(2)))
    names["gelu_tanh"] = yours
    assert torch.equal(student.names(["gelu_tanh"])["gelu_tanh"](torch.ones(2)), torch.zeros(2))
    del names["gelu_tanh"]
    assert "gelu_tanh" not in names
    with pytest.raises(TypeError, match="cannot be sent"):
        names["gelu_tanh"] = lambda x: x                # the checker's own code never runs in the kernel


def test_calls_run_under_the_checks_device_seed_and_class_checks():
    """`with torch.device("meta")` around a construction builds it there (no bytes cross); the student's random
    draws follow the check's seed, so a check seeded alike sees the same module; isinstance against PyTorch's
    classes is answered as in the kernel."""
    student = notebook(MLP)
    build = student.names(["MLP"])["MLP"]
    with torch.device("meta"):
        big = build(768)
    assert sum(p.numel() for p in big.parameters()) == 8 * 768**2 + 5 * 768 + 768**2
    assert all(p.is_meta for p in big.parameters())
    torch.manual_seed(3)
    first = build(4).up.weight.detach().clone()
    torch.manual_seed(3)
    assert torch.equal(build(4).up.weight, first)
    assert not torch.equal(build(4).up.weight, first)
    mlp = build(2)
    assert isinstance(mlp, torch.nn.Module) and isinstance(mlp.up, torch.nn.Linear)
    assert not isinstance(mlp.up, torch.nn.LayerNorm) and not isinstance(build, torch.nn.Module)


def test_a_tensor_reference_or_library_path_from_the_kernel_is_read_strictly():
    ref = unpacking.unpack(values.pack({"p": values.TensorRef(4, torch.ones(2))}), 2**20)["p"]
    assert isinstance(ref, values.TensorRef) and ref.number == 4 and torch.equal(ref.tensor, torch.ones(2))

    def raw(header) -> bytes:
        text = json.dumps(header).encode()
        return struct.pack("<I", len(text)) + text

    for forged in ({"$ref": [1, {"$opaque": ["x", ""]}]}, {"$ref": [1, 2]}, {"$ref": ["1", {"$meta": ["float32", [2], False]}]},
                   {"$library": ["torch.tanh", [], {}]}, {"$meta": ["float32", [2**40], False]}):
        with pytest.raises(values.Refused):
            unpacking.unpack(raw(forged), 2**20)
    with pytest.raises(ValueError, match="not a PyTorch function"):
        values.Library("os.system").resolve()
    assert values.Library.of(lambda x: x) is None and values.Library.of(print) is None


LIVE_RESULT = '''
import torch
from torch import nn
kept = []
def forward(x):
    out = nn.Parameter(x * 0)
    kept.append(out)
    return out
def later():
    with torch.no_grad():
        for out in kept:
            out.fill_(7.0)
'''


def test_what_the_students_code_returns_is_a_value_never_a_live_parameter():
    """A parameter the student's function returns (not one of a module the check passed in) arrives as a copy:
    nothing the kernel does afterwards moves a result the check holds."""
    student = notebook(LIVE_RESULT)
    names = student.names(["forward", "later"])
    got = names["forward"](torch.ones(3))
    names["later"]()
    assert torch.equal(got, torch.zeros(3)) and not isinstance(got, torch.nn.Parameter)


def test_a_handle_that_claims_a_tensor_class_is_not_taken_for_one():
    """The kernel names a handle's PyTorch bases: only module and optimizer classes are believed (a proxy taken
    for a Tensor would have PyTorch's C++ read it as one)."""
    from autograder.checker.remote import StudentObject

    connection = notebook("def f():\n    return 1\n")
    claimed = StudentObject(connection, values.Handle(1, "Tensor", ("torch._tensor.Tensor", "torch.nn.modules.module.Module")))
    assert not isinstance(claimed, torch.Tensor) and isinstance(claimed, torch.nn.Module)
    only_tensor = StudentObject(connection, values.Handle(2, "Tensor", ("torch._tensor.Tensor",)))
    assert not isinstance(only_tensor, torch.Tensor)


def test_a_modules_length_items_and_indexing_cross_as_the_kernel_gives_them():
    """len(), iteration and indexing of a student's object (a ModuleList of blocks) are asked of the kernel;
    PyTorch's own containers give their modules and parameters, a class the student wrote gives values."""
    student = notebook('''
import torch
from torch import nn
stack = nn.ModuleList(nn.Linear(2, 2) for _ in range(3))
class Odd(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(2))
    def __getitem__(self, index):
        return self.w
odd = Odd()
''')
    names = student.names(["stack", "odd"])
    stack = names["stack"]
    assert len(stack) == 3 and len(list(stack)) == 3
    assert stack[1] is list(stack)[1] and isinstance(stack[1], torch.nn.Linear)
    assert stack[0].weight is stack[0].weight
    assert not isinstance(names["odd"][0], torch.nn.Parameter)        # the student's __getitem__: a value
