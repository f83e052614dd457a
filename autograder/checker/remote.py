"""The checker's side: the student's names as proxies that send values and get values back.

A check (a test cell of the master, visible and hidden parts alike) runs in the checker, a process that never runs
a line of the student's code. Each name the check uses that the notebook defines is looked up once through the
bridge (bridge.py, in the student's kernel): a plain value (a number, a string, a tensor, a container of these)
is copied in; a function, a class or another object stays in the kernel and is reached through a
`StudentObject`, whose calls send their arguments as values and whose attributes come back as values or as
further `StudentObject`s.

What comes back is rebuilt from bytes by a strict reader (values.py): a tensor is always a new, plain
`torch.Tensor` (never a subclass, so nothing of the student's can answer `allclose` or `.item()`), numbers
are numbers, and an object of any other type is an `Opaque` value that only says its type's name. An exception
the student's code raised comes back as its type's name and message and is raised again here as the nearest
built-in exception, so `except ValueError` in a check behaves as it would in the kernel.

Three things a check may rely on keep working across the boundary:

- **in-place changes**: the bridge reports each tensor argument whose bytes the call changed; the checker writes
  the new bytes into its own tensor, so "x is unchanged" checks see what the student's code did;
- **identity**: a function that returns one of its own arguments returns the checker's object (`result is x`);
- **autograd**: when grad mode is on and the result needs a gradient in the kernel, the result is attached to the
  checker's graph by `StudentCall` (a torch.autograd.Function): its backward sends the output gradients to the
  kernel, which runs autograd there (accumulating into the student's parameters' .grad, as in the kernel) and
  returns the gradients of the inputs.
"""

from __future__ import annotations

import builtins
import sys

import torch

from autograder.checker import unpacking, values
from autograder.checker.proxies import StudentNamespace, StudentObject
from autograder.checker.values import (ClassSource, ConfigValue, DataclassValue, Handle, Library, ModuleState, Opaque,
                                       OptimizerState, TensorRef)

HIDDEN_MARK = "### BEGIN HIDDEN TESTS"

MOST_REPLY_BYTES = 64 * 2**20


class Connection:
    """Requests to one bridge. `send(request bytes) -> reply bytes` is the transport (the grader's kernel client,
    or a bridge in this process in the unit tests)."""

    def __init__(self, send):
        self.send = send
        self.mirrors: dict[int, torch.Tensor] = {}      # the kernel's parameters, as the checker holds them
        self.mirror_numbers: dict[int, int] = {}        # id(mirror) -> its number in the kernel
        self.synced: dict[int, int] = {}                # number -> the mirror's _version when last in step
        self.objects: dict[int, StudentObject] = {}     # one proxy per kernel object: identity holds
        self.sent: dict[int, object] = {}               # number (negative) -> a module of the check's, sent
        self.sent_numbers: dict[int, int] = {}          # id(that module) -> its number
        self.classes: dict[str, type] = {}              # key -> a class of the check's, sent as its source
        self.class_keys: dict[int, str] = {}
        self.classes_source: dict[str, str] = {}
        self.next_number = -1
        self.own: set[int] = set()                      # numbers of the check's own parameters (of its modules)
        # The parameters whose values the check wrote, or made: they keep the check's values until the student's
        # code runs (a call). Reading a module's tables, setting its mode or reading an attribute changes no
        # value, so a reply to those that says otherwise is refused, and the check fails (a kernel could
        # otherwise zero the weights a check just drew, before the check computes its reference; a parameter
        # sharing memory with another, not tied as one Parameter, changes with the other's write).
        self.pinned: set[int] = set()
        self.table_methods: set[int] = set()            # handles of nn.Module's own methods (bridge.MODULE_METHODS)
        self.student_ran = False                        # whether the request being answered ran the student's code
        # (number, name) -> what the kernel answered for that attribute, held until the kernel says it changed: a
        # check reads attn.qkv.weight once per reference it computes, and each read would be a round trip.
        self.attributes: dict[tuple[int, str], object] = {}

    def new_check(self) -> None:
        """A check begins: what the checks before held of the kernel's parameters and attributes is forgotten (the
        bridge forgets it too, bridge.Bridge.new_check); a name the check reads is looked up again (Checks.run), and
        a parameter it reaches is mirrored anew. The modules an earlier check sent are forgotten too: a kernel that
        hands one back in a later check hands back an object of its own, never the checker's. The proxies of the
        student's objects stay, so identity holds across checks."""
        for held in (self.mirrors, self.mirror_numbers, self.synced, self.pinned, self.attributes, self.sent,
                     self.sent_numbers, self.own):
            held.clear()

    def request(self, student_code: bool = False, **message) -> dict:
        """One request to the bridge and its reply; `student_code`: a call that runs the student's code, after
        which the kernel's values of the parameters the check pinned are believed again."""
        changed = [TensorRef(number, mirror) for number, mirror in self.mirrors.items()
                   if mirror._version != self.synced[number]]
        if changed:                                     # a check wrote to a parameter it holds: the kernel's too
            message["writes"] = changed
            for ref in changed:
                self.synced[ref.number] = ref.tensor._version
                self.pinned.add(ref.number)
        self.student_ran = student_code
        if student_code:
            self.pinned.clear()
        reply = unpacking.unpack(self.send(values.pack(message, self.handle_of, self.refer)), MOST_REPLY_BYTES)
        if not isinstance(reply, dict):
            raise values.Refused("the bridge's reply is not one")
        if message.get("op") != "getattr":
            self.forget_attributes(reply.get("stale"))
        for ref in reply.get("updates") or ():          # the student's code changed parameters the checker holds
            if isinstance(ref, TensorRef):
                self.mirror(ref)
        if "raised" in reply:
            raise student_exception(reply["raised"])
        return reply

    def forget_attributes(self, stale) -> None:
        """Drop the attributes the kernel says changed since they were read; all of them when it does not say
        (a kernel that did not answer, a reply of another shape)."""
        keys = [tuple(key) for key in stale if type(key) is list and len(key) == 2] if type(stale) is list else None
        if keys is None or len(keys) != len(stale):
            self.attributes.clear()
            return
        for key in keys:
            self.attributes.pop(key, None)

    def refer(self, tensor: torch.Tensor):
        """A mirror travels as a reference to its kernel tensor; a Parameter the check made becomes one (the
        kernel makes its own from the value), so that `layer.bias = nn.Parameter(...)` works there too."""
        number = self.mirror_numbers.get(id(tensor))
        if number is None and isinstance(tensor, torch.nn.Parameter):
            number = self.own_mirror(tensor)
        return number

    def own_mirror(self, parameter: torch.nn.Parameter) -> int:
        number = self.allocate()
        self.mirrors[number], self.mirror_numbers[id(parameter)] = parameter, number
        self.own.add(number)
        self.pinned.add(number)
        self.synced[number] = parameter._version
        return number

    def mirror(self, ref: TensorRef) -> torch.Tensor:
        """The checker's one tensor for a parameter of the kernel's, brought in step with the value it arrived
        with."""
        new = ref.tensor
        held = self.mirrors.get(ref.number)
        if held is None:
            held = torch.nn.Parameter(new.detach(), requires_grad=new.requires_grad)
            self.mirrors[ref.number] = held
            self.mirror_numbers[id(held)] = ref.number
        else:
            if ref.number in self.pinned and not self.student_ran and not held.is_meta and (
                    held.shape != new.shape or held.dtype != new.dtype
                    or values.tensor_bytes(held) != values.tensor_bytes(new)):
                raise values.Refused(
                    f"a {list(held.shape)} parameter of your model no longer holds what the check set it to, though "
                    "none of your code was called: two parameters that share memory are not tied (tie weights by "
                    "assigning the Parameter itself, head.weight = token.weight, not its .data), or your module "
                    "changed it when the check only read it or set its mode")
            if ref.number not in self.pinned or self.student_ran:   # else the check's values, until the student's
                with torch.no_grad():                               # code runs
                    if held.shape == new.shape and held.dtype == new.dtype and held.device == new.device:
                        if not held.is_meta:
                            held.copy_(new)
                    elif ref.number in self.own:            # what the check built keeps what the check made it
                        raise values.Refused(
                            f"your code changed a tensor of the check's own model from {list(held.shape)} {held.dtype} "
                            f"to {list(new.shape)} {new.dtype}: it may change its values, never its shape or type")
                    else:
                        held.data = new.detach()
            if held.requires_grad != new.requires_grad:
                held.requires_grad_(new.requires_grad)
        held.grad = new.grad if held.requires_grad else None
        self.synced[ref.number] = held._version
        return held

    def handle_of(self, value):
        """The node for one of the check's values of no plain shape: the student's own object, a PyTorch
        function, a class or a module the check built, a dataclass instance; nothing else crosses."""
        if isinstance(value, StudentObject):
            return object.__getattribute__(value, "_handle")
        library = Library.of(value)
        if library is not None:
            return library
        if isinstance(value, type):
            return self.class_node(value)
        if isinstance(value, torch.nn.Module):
            return self.module_state(value)
        if isinstance(value, torch.optim.Optimizer):
            return self.optimizer_state(value)
        if is_transformers_config(value):             # before dataclasses: transformers 5 makes them dataclasses
            fields = {key: item for key, item in value.to_diff_dict().items()
                      if key not in ("transformers_version", "model_type")}
            return ConfigValue(type(value).__name__, fields)
        if hasattr(type(value), "__dataclass_fields__"):
            import dataclasses

            return DataclassValue(type(value).__name__, {field.name: getattr(value, field.name)
                                                         for field in dataclasses.fields(value)})
        raise TypeError(f"a {type(value).__name__} of the checker's cannot be sent to the student's code")

    def allocate(self) -> int:
        self.next_number -= 1
        return self.next_number + 1

    def class_node(self, kind: type):
        """A PyTorch class by its path, or a class of the check's visible part by its source (a class of a
        hidden part never leaves the checker: its source would be the student's to read)."""
        if kind.__module__.split(".")[0] == "torch":
            # where PyTorch defines it (torch.optim.sgd.SGD), or a package above that exports it (torch.optim.SGD:
            # torch.optim deletes its submodules' names)
            parts = kind.__module__.split(".")
            for end in range(len(parts), 0, -1):
                path = ".".join(parts[:end] + [kind.__qualname__])
                try:
                    if Library(path).resolve() is kind:
                        return Library(path)
                except (AttributeError, ValueError):
                    continue
            raise TypeError(f"the class {kind.__name__} cannot be sent to the student's code")
        if id(kind) in self.class_keys:
            key = self.class_keys[id(kind)]
            return ClassSource(key, kind.__name__, self.classes_source[key])
        import textwrap

        found = class_lines(kind)
        if found is None:
            raise TypeError(f"the class {kind.__name__} cannot be sent to the student's code")
        filename, first, lines, hidden = found
        if hidden is not None and first + len(lines) > hidden:
            raise TypeError(f"the class {kind.__name__} is defined in a hidden part: it stays in the checker")
        key = f"{kind.__qualname__}@{filename}:{first}"
        self.classes[key] = kind
        self.class_keys[id(kind)] = key
        self.classes_source[key] = textwrap.dedent("".join(lines))
        return ClassSource(key, kind.__name__, self.classes_source[key])

    def module_state(self, module: torch.nn.Module) -> ModuleState:
        """A module the check built, whole; its parameters become mirrors numbered here, so the check's own
        Parameter objects are the ones the student's code is given back (`p is model.weight`)."""
        number = self.sent_numbers.get(id(module))
        if number is None:
            number = self.allocate()
            self.sent[number], self.sent_numbers[id(module)] = module, number
        parameters = {}
        for name, parameter in module._parameters.items():
            if parameter is None:
                parameters[name] = None
                continue
            parameters[name] = TensorRef(self.refer(parameter), parameter)
        attributes = {name: item for name, item in vars(module).items()
                      if not name.startswith("_") and name != "training" and plain(item)}
        return ModuleState(number, self.class_node(type(module)), attributes, parameters,
                           {name: buffer for name, buffer in module._buffers.items() if buffer is not None},
                           dict(module._modules), module.training)

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> OptimizerState:
        """An optimizer the check built, before it has stepped (its state, momentum and moments, would not
        cross): its groups' parameters travel as mirrors, so the kernel's steps move the check's tensors."""
        if optimizer.state:
            raise TypeError("an optimizer that has already stepped cannot be sent to the student's code")
        number = self.sent_numbers.get(id(optimizer))
        if number is None:
            number = self.allocate()
            self.sent[number], self.sent_numbers[id(optimizer)] = optimizer, number
        groups = [{key: list(item) if key == "params" else item for key, item in group.items()
                   if key == "params" or plain(item) or isinstance(item, torch.Tensor)}
                  for group in optimizer.param_groups]
        return OptimizerState(number, self.class_node(type(optimizer)), groups)

    def call_context(self) -> dict:
        """What a call in the kernel runs under, as the check's own code would: grad mode, the default device,
        and the check's random state as it stands (a check that seeds, then calls the student's dropout, gets
        the masks its own reference drew after the same seed); the check's stream then moves on by one draw,
        so two calls in a row draw differently, and nothing the kernel does moves it further."""
        state = torch.get_rng_state()
        torch.randint(0, 2, (), device="cpu")
        return {"grad": torch.is_grad_enabled(), "device": str(torch.get_default_device()), "rng": state}

    def wrap(self, value):
        """A reply's value, with handles made into StudentObjects and parameters into their mirrors."""
        if isinstance(value, TensorRef):
            return self.mirror(value)
        if isinstance(value, Handle):
            if value.number in self.sent:                 # a module of the check's, come back: the check's own
                return self.sent[value.number]
            held = self.objects.get(value.number)
            if held is None:
                held = self.objects[value.number] = StudentObject(self, value)
            return held
        if type(value) is list:
            return [self.wrap(item) for item in value]
        if type(value) is tuple:
            return tuple(self.wrap(item) for item in value)
        if type(value) is dict:
            return {key: self.wrap(item) for key, item in value.items()}
        return value

    def namespace(self) -> "StudentNamespace":
        return StudentNamespace(self)

    def names(self, names: list[str]) -> dict:
        """The notebook's names among `names`, as the checker holds them (missing ones and modules left out)."""
        asked = set(names)
        found = self.request(op="lookup", names=sorted(asked))["names"]
        held = {}
        for name, entry in found.items() if isinstance(found, dict) else ():
            # Only the names asked for: the reply is the kernel's, and a name nobody asked for (a builtin's,
            # `globals`, the seed) would otherwise shadow the checker's own in the check's namespace.
            if name in asked and isinstance(entry, (list, tuple)) and len(entry) == 2 and entry[0] in ("value", "class"):
                held[name] = self.wrap(entry[1])
        return held


def student_exception(described) -> BaseException:
    """The student's exception, raised here as its nearest built-in type with its own name and message."""
    if not isinstance(described, dict):
        return RuntimeError("the student's code raised an exception that cannot be described")
    name = str(described.get("type", "Exception"))[:200]
    message = str(described.get("message", ""))
    base = Exception
    for candidate in described.get("bases", []) if isinstance(described.get("bases"), list) else []:
        kind = getattr(builtins, str(candidate), None)
        if isinstance(kind, type) and issubclass(kind, Exception):
            base = kind
            break
    if getattr(builtins, name, None) is base:
        return base(message)
    return type(name if name.isidentifier() else "StudentError", (base,), {"__module__": "builtins"})(message)


def class_lines(kind: type):
    """(file, first line, the class statement's lines, the line its file's hidden part starts at) of a class the
    check defined, found from one of its methods' code in the check's source (which Checks.run keeps in
    linecache); None if it has none."""
    import ast
    import linecache

    codes = [item.__code__ for item in vars(kind).values() if hasattr(item, "__code__")]
    if not codes:
        return None
    filename = codes[0].co_filename
    whole = linecache.getlines(filename)
    try:
        tree = ast.parse("".join(whole))
    except SyntaxError:
        return None
    inside = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == kind.__name__
              and node.lineno <= codes[0].co_firstlineno <= node.end_lineno]
    if not inside:
        return None
    node = min(inside, key=lambda candidate: candidate.end_lineno - candidate.lineno)
    first = min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])
    hidden = next((number for number, line in enumerate(whole, 1) if HIDDEN_MARK in line), None)
    return filename, first, whole[first - 1:node.end_lineno], hidden


def is_transformers_config(value) -> bool:
    """A configuration of transformers' own (looked up without importing transformers where no check has)."""
    transformers = sys.modules.get("transformers")
    return transformers is not None and isinstance(value, transformers.PretrainedConfig) \
        and type(value).__module__.startswith("transformers.")


def plain(value) -> bool:
    """A value that crosses as itself (a module's public attribute: its sizes, eps, p)."""
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype)):
        return True
    return type(value) in (tuple, list) and len(value) <= 64 and all(plain(item) for item in value)


__all__ = ["Connection", "StudentObject", "Opaque", "student_exception"]
