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
import types

import torch

try:
    from autograder.checker.values import (ArgumentRef, Handle, Library, Opaque, TensorRef, pack, tensor_bytes,
                                           unpack)
except ImportError:       # in the grading kernel, where kernel_startup.py loads values.py beside this file
    from _course_checker_values import ArgumentRef, Handle, Library, Opaque, TensorRef, pack, tensor_bytes, unpack

MOST_REQUEST_BYTES = 64 * 2**20
MOST_ITEMS = 10_000          # what a generator the student's code returns is turned into, at most


DEVICES = ("cpu", "meta")   # the default devices a check may set around a call (`with torch.device("meta")`)


def torch_bases(kind: type) -> list[str]:
    """The qualified names of the PyTorch classes a type derives from, nearest first."""
    return [f"{base.__module__}.{base.__qualname__}" for base in kind.__mro__
            if base.__module__.startswith("torch.")][:20]


def stamp(tensor: torch.Tensor) -> tuple:
    """What changes when a tensor or its gradient is written in place or replaced."""
    grad = tensor.grad
    return (tensor._version, tensor.data_ptr() if not tensor.is_meta else id(tensor), tuple(tensor.shape),
            id(grad), grad._version if grad is not None else None)


def describe_error(error: BaseException) -> dict:
    """An exception as the checker re-raises it: its type's name, the names of the built-in exceptions it
    derives from, and its message."""
    builtin = [kind.__name__ for kind in type(error).__mro__
               if kind.__module__ == "builtins" and issubclass(kind, BaseException)]
    return {"type": type(error).__name__[:200], "bases": builtin[:20], "message": str(error)[:4000]}


class Bridge:
    """Answers one checker for one notebook: `serve(request bytes) -> reply bytes`."""

    def __init__(self, namespace: dict):
        self.namespace = namespace
        self.objects: dict[int, object] = {}
        self.numbers = itertools.count(1)
        self.graphs: dict[int, tuple[list, list]] = {}       # call number -> (inputs, outputs) for backward
        self.tensor_numbers: dict[int, int] = {}             # id(parameter) -> its number
        self.stamps: dict[int, tuple] = {}                   # number -> the parameter's stamp when last sent

    # --- the wire ----------------------------------------------------------------------------------------

    def serve(self, request: bytes) -> bytes:
        try:
            message = unpack(request, MOST_REQUEST_BYTES, strict=False)
            for ref in message.get("writes") or ():          # the check changed parameters it holds: here too
                self.resolve(ref)
            reply = getattr(self, f"op_{message['op']}")(message)
        except Exception as error:                           # the student's code raised, or the request was bad
            reply = {"raised": describe_error(error)}
        try:
            reply["updates"] = self.updated()
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

    def updated(self) -> list:
        """The parameters the checker mirrors that changed here since they were last sent (their new values)."""
        return [self.objects[number] for number, was in list(self.stamps.items())
                if number in self.objects and stamp(self.objects[number]) != was]

    def serve_text(self, request: str) -> str:
        """serve() for the grader's kernel client, which sends code and reads text: base64 both ways."""
        import base64

        return base64.b64encode(self.serve(base64.b64decode(request))).decode("ascii")

    def keep(self, value):
        """A value that does not cross: kept here behind a handle (objects), or known by its type (the rest)."""
        if isinstance(value, (types.GeneratorType, map, filter, zip, enumerate, range, type({}.keys()),
                              type({}.values()), type({}.items()))):
            return list(itertools.islice(value, MOST_ITEMS))
        if isinstance(value, (types.FunctionType, types.MethodType, types.BuiltinFunctionType, type,
                              torch.nn.Module, torch.optim.Optimizer)) or callable(value):
            number = next(self.numbers)
            self.objects[number] = value
            kind = value if isinstance(value, type) else type(value)
            return Handle(number, type(value).__name__ if not isinstance(value, type) else value.__name__,
                          tuple(torch_bases(kind)) if not isinstance(value, type) else ())
        return Opaque(type(value).__name__, repr_short(value))

    def resolve(self, value):
        """Handles in a request back into the objects they name."""
        if isinstance(value, Handle):
            return self.objects[value.number]
        if isinstance(value, TensorRef):                     # the kernel's own tensor, with the checker's value
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
        if type(value) is list:
            return [self.resolve(item) for item in value]
        if type(value) is tuple:
            return tuple(self.resolve(item) for item in value)
        if type(value) is dict:
            return {key: self.resolve(item) for key, item in value.items()}
        return value

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
        before = {path: tensor_bytes(tensor) for path, tensor in tensors_in((args, kwargs))
                  if not isinstance(tensor, torch.nn.Parameter)}
        device = message.get("device", "cpu")
        if device not in DEVICES:
            raise ValueError(f"a call on the device {str(device)[:40]!r}")
        if type(message.get("seed")) is int:                 # the check's random stream decides the student's draws
            torch.manual_seed(message["seed"])
        with torch.set_grad_enabled(bool(message.get("grad"))), torch.device(device):
            result = target(*args, **kwargs)
        changed = {path_key(path): tensor.detach() for path, tensor in tensors_in((args, kwargs))
                   if not isinstance(tensor, torch.nn.Parameter) and tensor_bytes(tensor) != before.get(path)}
        reply = {"result": refer_to_arguments(result, (args, kwargs)), "changed": changed}
        outputs = [tensor for _, tensor in tensors_in(result)]
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

    def op_getattr(self, message) -> dict:
        return {"value": getattr(self.objects[message["target"]], message["name"])}

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
        if pairs:
            torch.autograd.backward([output for output, _ in pairs], [grad for _, grad in pairs])
        return {"grads": [tensor.grad for tensor in inputs]}

    def op_release(self, message) -> dict:
        for number in message["handles"]:
            self.objects.pop(number, None)
        return {}


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


def refer_to_arguments(result, arguments):
    """The result, with each of the call's own argument objects replaced by a reference to it."""
    where = {id(value): path for path, value in objects_in(arguments) if len(path) >= 2}

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


def objects_in(tree, path=()):
    yield path, tree
    if type(tree) in (list, tuple):
        for index, item in enumerate(tree):
            yield from objects_in(item, (*path, index))
    elif type(tree) is dict:
        for key, item in tree.items():
            yield from objects_in(item, (*path, key))
