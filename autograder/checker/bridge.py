"""The student's side of the checker: runs in the student's kernel and answers the checker's requests with values.

The checker (remote.py) never holds an object of the student's: it asks this bridge to look a name up, call a
function, construct a class, read an attribute or run a backward pass, and gets back what values.py packs:
tensors as dtype, shape and bytes, plain numbers and strings, containers of these, and *handles* for the objects
that must stay here (a module the student's class built, a bound method, an optimizer). Everything here runs in
the process the student controls, so nothing here is trusted: the bridge can be replaced, and then its
answers are the student's answers, which the checker judges as values. It holds no test, no expected value
and no reference: a request carries only the arguments of one call.
"""

from __future__ import annotations

import inspect
import itertools
import socket
import struct
import types

import torch

try:
    from autograder.checker import tables
    from autograder.checker.values import (ArgumentRef, ClassSource, ConfigValue, DataclassValue, Handle, Library,
                                           ModuleState, Opaque, OptimizerState, TensorRef, pack, tensor_bytes,
                                           unpack)
except ImportError:       # in the grading kernel, where kernel_startup.py loads values.py and tables.py beside this
    import _course_checker_tables as tables
    from _course_checker_values import (ArgumentRef, ClassSource, ConfigValue, DataclassValue, Handle, Library,
                                        ModuleState, Opaque, OptimizerState, TensorRef, pack, tensor_bytes, unpack)

MOST_REQUEST_BYTES = 64 * 2**20
MOST_ITEMS = 10_000          # what a generator the student's code returns is turned into, at most
LENGTH = struct.Struct("!Q")  # each request and reply on the grader's line: its length, then its bytes
LINE_SUFFIX = "bridge"        # line.py's SUFFIX (the grader's side, which does not import PyTorch, cannot import this)
LINE_ACCEPT_SECONDS = 30      # the grader connects before it asks the kernel to serve: accept() returns at once


DEVICES = ("cpu", "meta")   # the default devices a check may set around a call (`with torch.device("meta")`)


def torch_bases(kind: type) -> list[str]:
    """The qualified names of the PyTorch classes a type derives from, nearest first: read from the type itself
    (tables.static_mro), never from what a metaclass answers for __mro__, __module__ or __qualname__."""
    names = [f"{tables.class_module(base)}.{tables.class_qualname(base)}" for base in tables.static_mro(kind)]
    return [name for name in names if name.startswith("torch.")][:20]


def stamp(tensor: torch.Tensor) -> tuple:
    """What changes when a tensor or its gradient is written in place or replaced."""
    grad = tensor.grad
    return (tensor._version, tensor.data_ptr() if not tensor.is_meta else id(tensor), tuple(tensor.shape),
            id(grad), grad._version if grad is not None else None)


# nn.Module's methods that read or set what a module holds: a check gets tables.py's, which read the module's own
# tables, whatever the student's class overrides (a parameters() that hides a layer from the check's
# randomization, a train() that zeroes the weights as eval() calls it).
MODULE_METHODS = frozenset(tables.METHODS)


NOT_STORED = object()


def attribute(target, name: str):
    """An attribute as the check reads it. Of a module: its parameters, buffers and submodules read from its own
    tables and nn.Module's methods bound to it, so no code of the student's class runs (a __getattr__ that zeroes
    the weights as the check reads them), from a module whose own attributes are what its tables hold
    (tables.refuse_shadows); never a tensor or a layer it keeps outside them, which a check's randomization,
    walking the tables, would never draw. Anything else as Python reads it."""
    if issubclass(type(target), torch.nn.Module):
        if name in MODULE_METHODS:
            return types.MethodType(tables.METHODS[name], target)
        tables.refuse_shadows(target)
        found = tables.member(target, name, NOT_STORED)
        if found is not NOT_STORED:
            return found
        if name in tables.TABLES:
            return tables.table(target, name)
        value = getattr(target, name)
        if tables.unregistered(value):
            raise AttributeError(
                f"your {type(target).__name__}'s `{name}` is a tensor or a layer the module does not register (it "
                "is not among its parameters, buffers or submodules): the checks read a module as PyTorch holds "
                f"it. Assign layers and nn.Parameters as plain attributes in __init__ (self.{name} = ...), so that "
                "PyTorch registers them.")
        return value
    return getattr(target, name)



def stored(target, name: str):
    """What the object holds under `name`, read without running any code of its class: a module's tables, the
    object's own __dict__, its class's function (inspect.getattr_static); NOT_STORED where only code could say
    (a property, a __getattr__)."""
    if issubclass(type(target), torch.nn.Module):
        found = tables.member(target, name, NOT_STORED)
        if found is not NOT_STORED:
            return found
    try:
        found = inspect.getattr_static(target, name, NOT_STORED)
    except Exception:                     # noqa: BLE001  (an object whose very layout is odd: nothing is held)
        return NOT_STORED
    return NOT_STORED if hasattr(type(found), "__get__") and not isinstance(found, types.FunctionType) else found


def held(target, name: str, value) -> bool:
    """Whether what the check read is what the object stores (or its class's method bound to it), so that the
    checker may hold it until the object stores something else: never a property's or a __getattr__'s result,
    which could differ at each read."""
    if issubclass(type(target), torch.nn.Module) and name in MODULE_METHODS:
        return True                       # tables.py's, bound to the module (attribute): the same at every read
    found = stored(target, name)
    if found is NOT_STORED:
        return False
    if type(value) is types.MethodType:
        return value.__self__ is target and value.__func__ is found
    return value is found


def fingerprint(value, alive: list, depth: int = 0):
    """What changes when an attribute is rebound or what it holds is written in place: identity, a tensor's
    stamp (a parameter's values reach the checker's mirror anyway), a container's items (a large or deep one
    never compares equal, so the checker never holds it). Every object whose id it holds goes into `alive`: kept
    with the fingerprint, none of them can be freed and its id reused by the value that replaced it."""
    alive.append(value)
    kind = type(value)
    if issubclass(kind, torch.nn.Parameter):
        return ("parameter", id(value))
    if kind is not torch.Tensor and issubclass(kind, torch.Tensor):
        return ("unheld", object())           # a subclass's attributes may be its own code: read afresh each time
    if kind is torch.Tensor:
        return ("tensor", id(value), stamp(value))
    if kind is types.MethodType:              # a bound method is a new object at every read
        alive += (value.__self__, value.__func__)
        return ("method", id(value.__self__), id(value.__func__))
    if kind in (list, tuple, dict):
        if depth >= 3 or len(value) > 1000:
            return ("unheld", object())
        items = value.items() if kind is dict else enumerate(value)
        alive += value.keys() if kind is dict else ()
        return (kind.__name__, id(value),       # keys by identity: comparing them would call their __eq__
                tuple((key if type(key) in (str, int) else id(key), fingerprint(item, alive, depth + 1))
                      for key, item in items))
    return ("object", id(value))


def receive_exactly(connection: socket.socket, size: int) -> bytes | None:
    """`size` bytes from the connection, or None if it closes first."""
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        count = connection.recv_into(view[got:])
        if count == 0:
            return None
        got += count
    return bytes(buffer)


def describe_error(error: BaseException) -> dict:
    """An exception as the checker re-raises it: its type's name, the names of the built-in exceptions it
    derives from, and its message."""
    builtin = [tables.class_qualname(kind) for kind in tables.static_mro(type(error))
               if tables.class_module(kind) == "builtins" and issubclass(kind, BaseException)]
    return {"type": type(error).__name__[:200], "bases": builtin[:20], "message": str(error)[:4000]}


class Bridge:
    """Answers one checker for one notebook: `serve(request bytes) -> reply bytes`."""

    def __init__(self, namespace: dict):
        self.namespace = namespace
        self.objects: dict[int, object] = {}
        self.numbers = itertools.count(1)
        self.graphs: dict[int, tuple[list, list]] = {}       # call number -> (inputs, outputs) for backward
        self.tensor_numbers: dict[int, int] = {}             # id(parameter) -> its number
        self.object_numbers: dict[int, int] = {}             # id(object kept here) -> its number
        self.classes: dict[str, type] = {}                   # a check's class, by its key, defined here once
        self.class_keys: dict[int, str] = {}                 # id(such a class) -> its key
        self.stamps: dict[int, tuple] = {}                   # number -> the parameter's stamp when last sent
        self.dataclasses: dict[tuple, type] = {}             # (name, fields) -> a dataclass made for a check's
        self.watched: dict[tuple, tuple] = {}                # (number, name) -> the attribute's fingerprint and value
        #                                                      when the checker read it (it holds it until told)

    # --- the wire ----------------------------------------------------------------------------------------

    def serve(self, request: bytes) -> bytes:
        op = None
        try:
            message = unpack(request, MOST_REQUEST_BYTES, strict=False)
            op = message["op"]
            for ref in message.get("writes") or ():          # the check changed parameters it holds: here too
                self.resolve(ref)
            reply = getattr(self, f"op_{op}")(message)
        except Exception as error:                           # the student's code raised, or the request was bad
            reply = {"raised": describe_error(error)}
        try:
            reply["updates"] = self.updated()
            if op != "getattr":                              # anything else may have run the student's code
                reply["stale"] = self.stale()
            return pack(reply, self.keep, self.refer)
        except Exception as error:
            return pack({"raised": describe_error(error)})

    def refer(self, tensor: torch.Tensor):
        """A parameter travels as a TensorRef: the checker mirrors it, and it stays the kernel's object."""
        if not isinstance(tensor, torch.nn.Parameter):
            return None
        number = self.tensor_numbers.get(id(tensor))
        if number is None or self.objects.get(number) is not tensor:
            number = next(self.numbers)
            self.objects[number] = tensor
            self.tensor_numbers[id(tensor)] = number
        self.stamps[number] = stamp(tensor)
        return number

    def new_check(self) -> None:
        """A check begins: the parameters and attributes the checker held for the checks before are forgotten here,
        as the checker forgets them (remote.Connection.new_check), so that each request compares only what this
        check holds (a notebook's checks held thousands of parameters by its last check: most of its time went
        into stamping them after every request)."""
        self.stamps.clear()
        self.watched.clear()
        # The checker's own objects (negative numbers: the modules, optimizers and parameters a check built) end
        # with their check: a checker started afresh after a timeout numbers its objects from -1 again, and must
        # not be handed a module an earlier check built under the same number.
        for number in [number for number in self.objects if number < 0]:
            del self.objects[number]
        for numbers in (self.object_numbers, self.tensor_numbers):
            for key in [key for key, number in numbers.items() if number < 0]:
                del numbers[key]

    def updated(self) -> list:
        """The parameters the checker mirrors that changed here since they were last sent (their new values)."""
        return [self.objects[number] for number, was in list(self.stamps.items())
                if number in self.objects and stamp(self.objects[number]) != was]

    def serve_line(self, listener: socket.socket, token: str) -> None:
        """serve() on the grader's line (sandbox/bridge_line.py): the connection that opens with this check's token (an
        older one left waiting, by a check whose serving never began, is closed unread), then a request and its
        reply at a time, each its length and its bytes, until the grader closes it (the check has ended)."""
        listener.settimeout(LINE_ACCEPT_SECONDS)
        while True:
            connection, _ = listener.accept()
            connection.settimeout(LINE_ACCEPT_SECONDS)
            if receive_exactly(connection, len(token) // 2) == bytes.fromhex(token):
                break
            connection.close()
        self.new_check()
        with connection:
            connection.settimeout(None)
            while (header := receive_exactly(connection, LENGTH.size)) is not None:
                (size,) = LENGTH.unpack(header)
                request = receive_exactly(connection, size) if size <= MOST_REQUEST_BYTES else None
                if request is None:
                    return
                reply = self.serve(request)
                connection.sendall(LENGTH.pack(len(reply)) + reply)

    def keep(self, value):
        """A value that does not cross: kept here behind a handle (objects), or known by its type (the rest)."""
        if isinstance(value, (types.GeneratorType, map, filter, zip, enumerate, range, type({}.keys()),
                              type({}.values()), type({}.items()))):
            return list(itertools.islice(value, MOST_ITEMS))
        if isinstance(value, (types.FunctionType, types.MethodType, types.BuiltinFunctionType, type,
                              torch.nn.Module, torch.optim.Optimizer)) or callable(value) \
                or hasattr(type(value), "__dataclass_fields__"):     # a config the student's code returned
            number = self.object_numbers.get(id(value))
            if number is None or self.objects.get(number) is not value:      # one number per object: identity
                number = next(self.numbers)
                self.objects[number] = value
                self.object_numbers[id(value)] = number
            if isinstance(value, type):
                return Handle(number, value.__name__, ())
            checks = [f"course:{self.class_keys[id(kind)]}" for kind in tables.static_mro(type(value))
                      if id(kind) in self.class_keys]
            return Handle(number, type(value).__name__, tuple(checks + torch_bases(type(value)))[:20])
        return Opaque(type(value).__name__, repr_short(value))

    def resolve(self, value):
        """Handles in a request back into the objects they name."""
        if isinstance(value, Handle):
            return self.objects[value.number]
        if isinstance(value, TensorRef):                     # the kernel's own tensor, with the checker's value
            if value.number < 0 and value.number not in self.objects:     # a parameter the check made
                parameter = torch.nn.Parameter(value.tensor.detach().clone(), requires_grad=value.tensor.requires_grad)
                self.objects[value.number] = parameter
                self.tensor_numbers[id(parameter)] = value.number
            target = self.objects[value.number]
            if not isinstance(target, torch.Tensor):
                raise TypeError("a tensor reference names something else")
            with torch.no_grad():
                if target.shape == value.tensor.shape and target.dtype == value.tensor.dtype:
                    if not target.is_meta:
                        target.copy_(value.tensor)
                else:
                    target.data = value.tensor.detach().clone()
            grad = value.tensor.grad
            target.grad = grad if grad is not None and target.requires_grad else None
            self.stamps[value.number] = stamp(target)
            return target
        if isinstance(value, Library):
            return value.resolve()
        if isinstance(value, ClassSource):
            return self.define(value)
        if isinstance(value, ModuleState):
            return self.build(value)
        if isinstance(value, OptimizerState):
            return self.build_optimizer(value)
        if isinstance(value, DataclassValue):
            return self.dataclass(value.name, self.resolve(value.fields))
        if isinstance(value, ConfigValue):
            import transformers

            kind = getattr(transformers, value.name, None) if value.name.isidentifier() else None
            if not (isinstance(kind, type) and issubclass(kind, transformers.PretrainedConfig)):
                raise TypeError(f"transformers has no configuration {value.name[:100]!r}")
            return kind(**self.resolve(value.fields))
        if type(value) is list:
            return [self.resolve(item) for item in value]
        if type(value) is tuple:
            return tuple(self.resolve(item) for item in value)
        if type(value) is dict:
            return {key: self.resolve(item) for key, item in value.items()}
        return value

    def dataclass(self, name: str, fields: dict):
        """An instance of the notebook's dataclass of that name (the release's GPTConfig), or, where the notebook
        has none with these fields (a check's own Config of the same fields), of one made with them."""
        import dataclasses

        if not (name.isidentifier() and type(fields) is dict and all(key.isidentifier() for key in fields)):
            raise TypeError("a dataclass's name and fields are names")
        kind = self.namespace.get(name)
        if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)
                and set(fields) <= {field.name for field in dataclasses.fields(kind)}):
            kind = self.dataclasses.get((name, tuple(fields)))
            if kind is None:
                kind = self.dataclasses[name, tuple(fields)] = dataclasses.make_dataclass(name, list(fields))
        return kind(**fields)

    def define(self, shipped: ClassSource) -> type:
        """A check's class, defined once beside the notebook (its names are the notebook's, read when the class
        was sent; nothing is bound in the notebook itself)."""
        if shipped.key not in self.classes:
            scope = dict(self.namespace)
            exec(compile(shipped.source, f"<check's {shipped.name}>", "exec"), scope)
            kind = scope[shipped.name]
            self.classes[shipped.key] = kind
            self.class_keys[id(kind)] = shipped.key
        return self.classes[shipped.key]

    def build(self, state: ModuleState) -> torch.nn.Module:
        """A module a check built, made here once per number (later sends bring its parameters' values)."""
        existing = self.objects.get(state.number)
        if isinstance(existing, torch.nn.Module):
            for ref in state.parameters.values():
                self.resolve(ref)
            return existing
        kind = self.resolve(state.kind)
        if not (isinstance(kind, type) and issubclass(kind, torch.nn.Module)):
            raise TypeError("a module's class is not one")
        module = kind.__new__(kind)
        torch.nn.Module.__init__(module)
        for name, item in state.attributes.items():
            module.__dict__[name] = self.resolve(item)
        for name, ref in state.parameters.items():
            if ref is None:
                module._parameters[name] = None
                continue
            module._parameters[name] = self.resolve(ref)
        for name, tensor in state.buffers.items():
            module._buffers[name] = tensor
        for name, child in state.children.items():
            module._modules[name] = self.resolve(child) if child is not None else None
        module.training = bool(state.training)
        self.objects[state.number] = module
        self.object_numbers[id(module)] = state.number
        return module

    def build_optimizer(self, state: OptimizerState) -> torch.optim.Optimizer:
        """An optimizer a check built, made here once per number over the kernel's tensors its groups name;
        a later send brings its groups' settings, and its state (momentum, moments) stays here, as the
        student's steps left it."""
        groups = self.resolve(state.groups)
        if type(groups) is not list or not all(type(group) is dict and type(group.get("params")) is list
                                               for group in groups):
            raise TypeError("an optimizer's groups are not")
        existing = self.objects.get(state.number)
        if isinstance(existing, torch.optim.Optimizer) and len(existing.param_groups) == len(groups):
            for held, sent in zip(existing.param_groups, groups):
                held.update({key: item for key, item in sent.items() if key != "params"})
            return existing
        kind = self.resolve(state.kind)
        if not (isinstance(kind, type) and issubclass(kind, torch.optim.Optimizer)):
            raise TypeError("an optimizer's class is not one")
        optimizer = kind(groups)
        self.objects[state.number] = optimizer
        self.object_numbers[id(optimizer)] = state.number
        return optimizer

    # --- requests ------------------------------------------------------------------------------------------

    def op_lookup(self, message) -> dict:
        """What each name is in the notebook: a value, an object behind a handle, a module, or missing."""
        found = {}
        for name in message["names"]:
            if name not in self.namespace:
                found[name] = ("missing", None)
                continue
            value = self.namespace[name]
            if isinstance(value, types.ModuleType):
                found[name] = ("module", value.__name__)
            elif isinstance(value, type):
                found[name] = ("class", self.keep(value))
            else:
                found[name] = ("value", value)
        return {"names": found}

    def op_call(self, message) -> dict:
        target = self.objects[message["target"]]
        args, kwargs = self.resolve(message["args"]), self.resolve(message["kwargs"])
        # What the call may change in place, by identity (a list the student pops shifts the paths after it):
        # its argument tensors' values and its lists' and dicts' contents.
        before = {id(tensor): (path, tensor, tensor_bytes(tensor), view(tensor))
                  for path, tensor in tensors_in((args, kwargs)) if not isinstance(tensor, torch.nn.Parameter)}
        where = argument_paths((args, kwargs))
        shapes = {path: (container, contents(container)) for path, container in objects_in((args, kwargs))
                  if len(path) >= 2 and type(container) in (list, dict)}
        device = message.get("device", "cpu")
        if device not in DEVICES:
            raise ValueError(f"a call on the device {str(device)[:40]!r}")
        if isinstance(message.get("rng"), torch.Tensor):     # the check's random state decides the student's draws
            torch.set_rng_state(message["rng"])
        with torch.set_grad_enabled(bool(message.get("grad"))), torch.device(device):
            result = target(*args, **kwargs)
        if not reads_state(target):       # what the student's code computed is a value, never a live parameter,
            # unless it is a parameter of a module the check passed in (`param_groups(model)` returns model's own)
            given = {id(parameter) for module in modules_in((args, kwargs)) for parameter in tables.parameters(module)}
            result = without_parameters(result, given)
        changed = {path_key(path): tensor.detach() for path, tensor, was, shape in before.values()
                   if tensor_bytes(tensor) != was or view(tensor) != shape}       # t_() changes the view alone
        reshaped = {path_key(path): refer_to_arguments(type(container)(container), where)
                    for path, (container, was) in shapes.items() if contents(container) != was}
        reply = {"result": refer_to_arguments(result, where), "changed": changed, "reshaped": reshaped}
        outputs = [tensor for _, tensor in tensors_in(result) if not isinstance(tensor, torch.nn.Parameter)]
        if message.get("grad") and any(tensor.requires_grad for tensor in outputs):
            inputs = [tensor for _, tensor in tensors_in((args, kwargs))
                      if tensor.requires_grad and not isinstance(tensor, torch.nn.Parameter)]
            number = next(self.numbers)
            self.graphs[number] = (inputs, outputs)
            reply["graph"] = number
        return reply

    def op_assign(self, message) -> dict:
        """A check sets a name of the notebook (for example a reference GELU in place of the student's, while it
        tests a part that uses it); the value is the checker's: a plain value, a handle or a PyTorch function."""
        self.namespace[str(message["name"])] = self.resolve(message["value"])
        return {}

    def op_delete(self, message) -> dict:
        self.namespace.pop(str(message["name"]), None)
        return {}

    def op_len(self, message) -> dict:
        return {"value": len(self.objects[message["target"]])}

    def op_items(self, message) -> dict:
        """What iterating over an object gives (a ModuleList's blocks, a dict's keys), at most MOST_ITEMS."""
        target = self.objects[message["target"]]
        items = list(itertools.islice(iter(target), MOST_ITEMS))
        return {"value": items if torch_own(type(target), "__iter__") else without_parameters(items, set())}

    def op_getitem(self, message) -> dict:
        target = self.objects[message["target"]]
        item = target[self.resolve(message["key"])]
        return {"value": item if torch_own(type(target), "__getitem__") else without_parameters(item, set())}

    def stale(self) -> list:
        """The attributes the checker holds that the objects here store no longer (rebound, or a tensor, list or
        dict written in place): it asks for them again. Read as stored, so no code of the student's runs here."""
        changed = []
        for key, (was, _) in list(self.watched.items()):
            now = fingerprint(stored(self.objects[key[0]], key[1]), [])
            if now != was:
                changed.append(list(key))
                del self.watched[key]
        return changed

    def op_getattr(self, message) -> dict:
        target, name = self.objects[message["target"]], message["name"]
        value = attribute(target, name)
        if not held(target, name, value):
            return {"value": value, "held": False}
        alive: list = []
        self.watched[(message["target"], name)] = (fingerprint(stored(target, name), alive), alive)
        return {"value": value, "held": True}

    def op_setattr(self, message) -> dict:
        setattr(self.objects[message["target"]], message["name"], self.resolve(message["value"]))
        return {}

    def op_backward(self, message) -> dict:
        """The gradients of one earlier call's inputs, given the gradients of its outputs (autograd here, as it
        would have run had the check called the function in this kernel: parameters' .grad accumulate too)."""
        inputs, outputs = self.graphs.pop(message["graph"])
        pairs = [(output, grad) for output, grad in zip(outputs, message["grads"])
                 if grad is not None and output.requires_grad]
        for tensor in inputs:
            tensor.grad = None
        for output, grad in pairs:
            if grad.shape != output.shape:      # what backward(outputs, grads) refuses, said as it says it
                raise RuntimeError(f"Mismatch in shape: grad_output has a shape of {grad.shape} and output has a "
                                   f"shape of {output.shape}")
        if pairs:
            # One scalar's backward, the sum of each output times its gradient: each output gets exactly its
            # gradient (1 times it), as backward(outputs, grads) gives, without what PyTorch imports the first time
            # a gradient is given explicitly (SymPy: 0.4 s of every notebook whose checks take a backward). The
            # products are recorded whatever grad mode the caller left on (the fast path's checker shares this one).
            with torch.enable_grad():
                total = sum((output * grad).sum() for output, grad in pairs)
            torch.autograd.backward(total)
        return {"grads": [tensor.grad for tensor in inputs]}

    def op_release(self, message) -> dict:
        for number in message["handles"]:
            self.objects.pop(number, None)
        return {}


def reads_state(target) -> bool:
    """A module's reading method (tables.py's `parameters`, `named_parameters`, `state_dict`...) or an optimizer's:
    the parameters it returns are the kernel's own, and cross as references; anything else the student wrote."""
    if type(target) is not types.MethodType:
        return False
    function = target.__func__
    return any(function is own for own in tables.METHODS.values()) or \
        str(getattr(function, "__module__", "")).startswith("torch.")


def torch_own(kind: type, method: str) -> bool:
    """Whether a class's method is PyTorch's (a ModuleList's indexing), not one the student wrote."""
    return str(getattr(getattr(kind, method, None), "__module__", "")).startswith("torch.")


def without_parameters(tree, given: set):
    """`tree` with each parameter not in `given` replaced by a copy of its value (a result, not a module's state)."""
    if isinstance(tree, torch.nn.Parameter):
        return tree if id(tree) in given else tree.detach().clone().requires_grad_(tree.requires_grad)
    if type(tree) is list:
        return [without_parameters(item, given) for item in tree]
    if type(tree) is tuple:
        return tuple(without_parameters(item, given) for item in tree)
    if type(tree) is dict:
        return {key: without_parameters(item, given) for key, item in tree.items()}
    return tree


def modules_in(tree):
    if isinstance(tree, torch.nn.Module):
        yield tree
    elif type(tree) in (list, tuple):
        for item in tree:
            yield from modules_in(item)
    elif type(tree) is dict:
        for item in tree.values():
            yield from modules_in(item)


def repr_short(value) -> str:
    try:
        return repr(value)[:200]
    except Exception:
        return "?"


def tensors_in(tree, path=()):
    """(path, tensor) for every tensor in a tree of containers, in a fixed order."""
    if isinstance(tree, torch.Tensor):
        yield path, tree
    elif type(tree) in (list, tuple):
        for index, item in enumerate(tree):
            yield from tensors_in(item, (*path, index))
    elif type(tree) is dict:
        for key, item in tree.items():
            yield from tensors_in(item, (*path, key))


def path_key(path) -> str:
    return "/".join(map(str, path))


def argument_paths(arguments) -> dict:
    """Where each object of a call's arguments is, by identity (read before the call: the check's side has the
    arguments as they were)."""
    return {id(value): path for path, value in objects_in(arguments) if len(path) >= 2}


def refer_to_arguments(result, where: dict):
    """The result, with each of the call's own argument objects replaced by a reference to it."""

    def walk(value):
        if id(value) in where and not isinstance(value, (int, float, str, bool, type(None))):
            return ArgumentRef(where[id(value)])
        if type(value) is list:
            return [walk(item) for item in value]
        if type(value) is tuple:
            return tuple(walk(item) for item in value)
        if type(value) is dict:
            return {key: walk(item) for key, item in value.items()}
        return value

    return walk(result)


def view(tensor: torch.Tensor) -> tuple:
    return tuple(tensor.shape), tuple(tensor.stride()), tensor.storage_offset(), tensor.dtype


def contents(container) -> tuple:
    """What a list or dict holds, by identity: a call that adds, removes, replaces or reorders changes it."""
    if type(container) is dict:
        return tuple((key, id(value)) for key, value in container.items())
    return tuple(id(value) for value in container)


def objects_in(tree, path=()):
    yield path, tree
    if type(tree) in (list, tuple):
        for index, item in enumerate(tree):
            yield from objects_in(item, (*path, index))
    elif type(tree) is dict:
        for key, item in tree.items():
            yield from objects_in(item, (*path, key))
