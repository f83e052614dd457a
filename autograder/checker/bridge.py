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

import itertools
import socket
import struct
import types

import torch

try:
    from autograder.checker import tables
    from autograder.checker import reading
    from autograder.checker.unpacking import unpack
    from autograder.checker.values import (ClassSource, ConfigValue, DataclassValue, Handle, Library, ModuleState,
                                           Opaque, OptimizerState, TensorRef, pack, tensor_bytes)
except ImportError:       # in the grading kernel, where kernel_startup.py loads the checker's files beside this
    import _course_checker_tables as tables
    import _course_checker_reading as reading
    from _course_checker_unpacking import unpack
    from _course_checker_values import (ClassSource, ConfigValue, DataclassValue, Handle, Library, ModuleState,
                                        Opaque, OptimizerState, TensorRef, pack, tensor_bytes)

MOST_REQUEST_BYTES = 64 * 2**20
MOST_ITEMS = 10_000          # what a generator the student's code returns is turned into, at most
LENGTH = struct.Struct("!Q")  # each request and reply on the grader's line: its length, then its bytes
LINE_SUFFIX = "bridge"        # line.py's SUFFIX (the grader's side, which does not import PyTorch, cannot import this)
LINE_ACCEPT_SECONDS = 30      # the grader connects before it asks the kernel to serve: accept() returns at once
DEVICES = ("cpu", "meta")   # the default devices a check may set around a call (`with torch.device("meta")`)


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
            reply = {"raised": reading.describe_error(error)}
        try:
            reply["updates"] = self.updated()
            if op != "getattr":                              # anything else may have run the student's code
                reply["stale"] = self.stale()
            return pack(reply, self.keep, self.refer)
        except Exception as error:
            return pack({"raised": reading.describe_error(error)})

    def refer(self, tensor: torch.Tensor):
        """A parameter travels as a TensorRef: the checker mirrors it, and it stays the kernel's object."""
        if not isinstance(tensor, torch.nn.Parameter):
            return None
        number = self.tensor_numbers.get(id(tensor))
        if number is None or self.objects.get(number) is not tensor:
            number = next(self.numbers)
            self.objects[number] = tensor
            self.tensor_numbers[id(tensor)] = number
        self.stamps[number] = reading.stamp(tensor)
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
                if number in self.objects and reading.stamp(self.objects[number]) != was]

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
            return Handle(number, type(value).__name__, tuple(checks + reading.torch_bases(type(value)))[:20])
        return Opaque(type(value).__name__, reading.repr_short(value))

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
            self.stamps[value.number] = reading.stamp(target)
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
            return reading.notebook_dataclass(self.namespace, self.dataclasses, value.name, self.resolve(value.fields))
        if isinstance(value, ConfigValue):
            return reading.transformers_config(value.name, self.resolve(value.fields))
        if type(value) is list:
            return [self.resolve(item) for item in value]
        if type(value) is tuple:
            return tuple(self.resolve(item) for item in value)
        if type(value) is dict:
            return {key: self.resolve(item) for key, item in value.items()}
        return value

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
        before = {id(tensor): (path, tensor, tensor_bytes(tensor), reading.view(tensor))
                  for path, tensor in reading.tensors_in((args, kwargs)) if not isinstance(tensor, torch.nn.Parameter)}
        where = reading.argument_paths((args, kwargs))
        shapes = {path: (container, reading.contents(container))
                  for path, container in reading.objects_in((args, kwargs))
                  if len(path) >= 2 and type(container) in (list, dict)}
        device = message.get("device", "cpu")
        if device not in DEVICES:
            raise ValueError(f"a call on the device {str(device)[:40]!r}")
        if isinstance(message.get("rng"), torch.Tensor):     # the check's random state decides the student's draws
            torch.set_rng_state(message["rng"])
        with torch.set_grad_enabled(bool(message.get("grad"))), torch.device(device):
            result = target(*args, **kwargs)
        if not reading.reads_state(target):       # what the student's code computed is a value, never a live parameter,
            # unless it is a parameter of a module the check passed in (`param_groups(model)` returns model's own)
            given = {id(parameter) for module in reading.modules_in((args, kwargs))
                     for parameter in tables.parameters(module)}
            result = reading.without_parameters(result, given)
        changed = {reading.path_key(path): tensor.detach() for path, tensor, was, shape in before.values()
                   if tensor_bytes(tensor) != was or reading.view(tensor) != shape}       # t_() changes the view alone
        reshaped = {reading.path_key(path): reading.refer_to_arguments(type(container)(container), where)
                    for path, (container, was) in shapes.items() if reading.contents(container) != was}
        reply = {"result": reading.refer_to_arguments(result, where), "changed": changed, "reshaped": reshaped}
        outputs = [tensor for _, tensor in reading.tensors_in(result) if not isinstance(tensor, torch.nn.Parameter)]
        if message.get("grad") and any(tensor.requires_grad for tensor in outputs):
            inputs = [tensor for _, tensor in reading.tensors_in((args, kwargs))
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
        own = reading.torch_own(type(target), "__iter__")
        return {"value": items if own else reading.without_parameters(items, set())}

    def op_getitem(self, message) -> dict:
        target = self.objects[message["target"]]
        item = target[self.resolve(message["key"])]
        own = reading.torch_own(type(target), "__getitem__")
        return {"value": item if own else reading.without_parameters(item, set())}

    def stale(self) -> list:
        """The attributes the checker holds that the objects here store no longer (rebound, or a tensor, list or
        dict written in place): it asks for them again. Read as stored, so no code of the student's runs here."""
        changed = []
        for key, (was, _) in list(self.watched.items()):
            now = reading.fingerprint(reading.stored(self.objects[key[0]], key[1]), [])
            if now != was:
                changed.append(list(key))
                del self.watched[key]
        return changed

    def op_getattr(self, message) -> dict:
        target, name = self.objects[message["target"]], message["name"]
        value = reading.attribute(target, name)
        if not reading.held(target, name, value):
            return {"value": value, "held": False}
        alive: list = []
        self.watched[(message["target"], name)] = (reading.fingerprint(reading.stored(target, name), alive), alive)
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


