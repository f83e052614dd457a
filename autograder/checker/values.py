"""What crosses between the checker and the student's kernel: plain values, packed as bytes, never objects.

A message is a tree of None, booleans, integers, floats, strings, tuples, lists, dicts with string keys and
`torch.Tensor`s, plus two markers the two sides agree on: a *handle* (an object that stays in the student's
kernel, named by a number) and an *opaque* value (anything else the student's code returned, known to the
checker only by its type's name and a short text). It is packed as one JSON header followed by the tensors'
raw bytes:

    [4 bytes: header length][header: JSON][buffer 0][buffer 1]...

A tensor travels as its dtype, shape and bytes (never a subclass, a view or shared storage: it is rebuilt
from the bytes on the other side as a new, plain tensor). Here: the markers and the writer (`pack`); the reader,
strict since the student's side writes whatever it likes, is unpacking.py.

This module imports only the standard library and PyTorch: the bridge loads it in the student's kernel, the
checker in its own process.
"""

from __future__ import annotations

import json
import math
import struct

import torch

# dtype names both sides may use, and nothing else (torch.dtype objects are not sent: their names are).
DTYPES = {str(dtype).removeprefix("torch."): dtype for dtype in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)}
ELEMENT_BYTES = {name: torch.empty((), dtype=dtype).element_size() for name, dtype in DTYPES.items()}
MOST_DIMENSIONS = 8
MOST_STRING = 100_000          # characters of one string (an error message, a name)
MOST_INTEGER = 2**63


class Refused(Exception):
    """A message that is not one: its reader says why."""


class Handle:
    """An object that stays in the student's kernel: its number there, its type's name and the PyTorch classes
    its type derives from (their qualified names, so that `isinstance(handle, nn.Module)` can be answered)."""

    __slots__ = ("number", "type_name", "bases")

    def __init__(self, number: int, type_name: str, bases: tuple = ()):
        self.number, self.type_name, self.bases = number, type_name, tuple(bases)

    def __repr__(self) -> str:
        return f"<{self.type_name} in the student's kernel #{self.number}>"


class Opaque:
    """A value of a type that does not cross (a NumPy array, a generator, an object of the student's class that
    is not a module): its type's name and a short text. The checker's messages name the type, as a check run in
    the kernel would."""

    __slots__ = ("type_name", "text")

    def __init__(self, type_name: str, text: str):
        self.type_name, self.text = type_name, text

    def __repr__(self) -> str:
        return f"<{self.type_name}: {self.text}>"


class TensorRef:
    """A tensor that lives in the student's kernel as part of an object (a module's parameter): its number there
    and its current value. The checker keeps one mirror per number, so identity holds (`head.weight is
    token.weight`), writes the mirror back when a check changes it, and updates it when the kernel does."""

    __slots__ = ("number", "tensor")

    def __init__(self, number: int, tensor):
        self.number, self.tensor = number, tensor


class Library:
    """A PyTorch function by its path from `torch` (with arguments bound, as functools.partial binds them): what
    a check can put into the student's namespace, for example a reference GELU in place of the student's."""

    __slots__ = ("path", "args", "kwargs")

    def __init__(self, path: str, args: tuple = (), kwargs: dict | None = None):
        self.path, self.args, self.kwargs = path, tuple(args), dict(kwargs or {})

    def resolve(self):
        import functools

        parts = self.path.split(".")
        if parts[0] != "torch" or not all(part.isidentifier() for part in parts):
            raise ValueError(f"not a PyTorch function: {self.path[:100]}")
        target = torch
        for part in parts[1:]:
            target = getattr(target, part)
        if not callable(target):
            raise ValueError(f"not a PyTorch function: {self.path[:100]}")
        return functools.partial(target, *self.args, **self.kwargs) if self.args or self.kwargs else target

    @staticmethod
    def of(function):
        """The Library that names a PyTorch function (or a functools.partial of one), or None."""
        import functools

        args, kwargs = (), {}
        if isinstance(function, functools.partial):
            function, args, kwargs = function.func, function.args, function.keywords
        module, name = getattr(function, "__module__", None) or "", getattr(function, "__qualname__", "")
        short = getattr(function, "__name__", "")
        if not all(isinstance(part, str) and part for part in (name, short)):
            return None
        # Where PyTorch says the function lives, else the two namespaces its builtins are reached by.
        for path in ([f"{module}.{name}"] if str(module).startswith("torch") else []) + \
                [f"torch.{short}", f"torch.nn.functional.{short}"]:
            try:
                if Library(path).resolve() is function:
                    return Library(path, args, kwargs)
            except (AttributeError, ValueError):
                continue
        return None


class ClassSource:
    """A class a check defines in its visible part (a stand-in attention the student's block is built with),
    sent as its source for the kernel to define beside the notebook: `key` names it on both sides."""

    __slots__ = ("key", "name", "source")

    def __init__(self, key: str, name: str, source: str):
        self.key, self.name, self.source = key, name, source


class ModuleState:
    """A module a check built (of PyTorch's classes or a ClassSource), sent whole: its class, public plain
    attributes, parameters (TensorRefs, numbered by the checker, negative), buffers and children. The kernel
    builds it once per number, so the same module sent twice is the same object there."""

    __slots__ = ("number", "kind", "attributes", "parameters", "buffers", "children", "training")

    def __init__(self, number, kind, attributes, parameters, buffers, children, training):
        self.number, self.kind, self.attributes = number, kind, attributes
        self.parameters, self.buffers, self.children, self.training = parameters, buffers, children, training


class OptimizerState:
    """An optimizer a check built over parameters the kernel holds (the check's module's, sent with it, or the
    student's): its class (a PyTorch optimizer, by path) and its parameter groups, each group's tensors as
    TensorRefs and its settings as values. The kernel builds it once per number; later sends bring the
    groups' settings (a schedule's learning rate)."""

    __slots__ = ("number", "kind", "groups")

    def __init__(self, number: int, kind, groups: list):
        self.number, self.kind, self.groups = number, kind, groups


class DataclassValue:
    """An instance of a dataclass both sides define alike (the release's `GPTConfig`): its class's name and
    its fields; the kernel builds it with its own class of that name."""

    __slots__ = ("name", "fields")

    def __init__(self, name: str, fields: dict):
        self.name, self.fields = name, fields


class ConfigValue:
    """A configuration of Hugging Face's transformers (a `GPT2Config` a check converts with the student's code):
    its class's name there and the fields that differ from that class's defaults; the kernel builds it with
    transformers' own class of that name (a configuration class, nothing else)."""

    __slots__ = ("name", "fields")

    def __init__(self, name: str, fields: dict):
        self.name, self.fields = name, fields


class ArgumentRef:
    """The student's function returned (or put into its result) one of its own arguments: the checker answers
    with its own object, so that `result is x` holds on both sides alike."""

    __slots__ = ("path",)

    def __init__(self, path: tuple):
        self.path = path


# --- writing ------------------------------------------------------------------------------------------

def tensor_bytes(tensor: torch.Tensor) -> bytes:
    """A tensor's elements as bytes, row-major, on the CPU."""
    if tensor.is_meta:
        return b""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    return flat.view(torch.uint8).numpy().tobytes()


def pack(tree, encode_other=None, refer=None) -> bytes:
    """`tree` as one message. `encode_other(value)` returns the node for a value of no known shape (the bridge
    makes handles and opaque values there); without it such a value is an error. `refer(tensor)` returns the
    number of a tensor that travels as a TensorRef, or None."""
    buffers: list[bytes] = []

    def tensor_node(value: torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in DTYPES:
            return {"$opaque": [f"Tensor of {dtype}", ""]}
        if value.is_meta:                            # a shape and a dtype, no bytes
            return {"$meta": [dtype, list(value.shape), bool(value.requires_grad)]}
        buffers.append(tensor_bytes(value))
        described = [dtype, list(value.shape), len(buffers) - 1, bool(value.requires_grad)]
        grad = value.grad if value.requires_grad and value.is_leaf else None
        if isinstance(grad, torch.Tensor) and grad.shape == value.shape and grad.dtype == value.dtype:
            buffers.append(tensor_bytes(grad))      # a parameter's gradient travels with it
            described.append(len(buffers) - 1)
        return {"$tensor": described}

    def node(value, depth: int = 0):
        if depth > 32:
            raise ValueError("the value nests deeper than 32 levels")
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            if abs(value) >= MOST_INTEGER:
                return {"$int": str(value)[:100]}
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"$float": repr(value)}
        if isinstance(value, TensorRef):
            if not isinstance(value.tensor, torch.Tensor):
                raise TypeError("a tensor reference holds no tensor")
            return {"$ref": [int(value.number), tensor_node(value.tensor)]}
        if isinstance(value, Library):
            return {"$library": [value.path, node(value.args, depth + 1), node(value.kwargs, depth + 1)]}
        if isinstance(value, ClassSource):
            return {"$class": [value.key, value.name, value.source]}
        if isinstance(value, ModuleState):
            return {"$module": [value.number, node(value.kind, depth + 1),
                                *(node(part, depth + 1) for part in (value.attributes, value.parameters,
                                                                     value.buffers, value.children)),
                                bool(value.training)]}
        if isinstance(value, DataclassValue):
            return {"$dataclass": [value.name, node(value.fields, depth + 1)]}
        if isinstance(value, ConfigValue):
            return {"$hfconfig": [value.name, node(value.fields, depth + 1)]}
        if isinstance(value, OptimizerState):
            return {"$optimizer": [int(value.number), node(value.kind, depth + 1), node(value.groups, depth + 1)]}
        if isinstance(value, torch.Tensor):
            number = refer(value) if refer is not None else None
            if number is not None:
                return {"$ref": [int(number), tensor_node(value)]}
            return tensor_node(value)
        if isinstance(value, torch.Size):
            return {"$size": [int(n) for n in value]}
        if isinstance(value, torch.dtype):
            return {"$dtype": str(value).removeprefix("torch.")}
        if isinstance(value, Handle):
            return {"$handle": [value.number, value.type_name, list(value.bases)]}
        if isinstance(value, Opaque):
            return {"$opaque": [value.type_name, value.text]}
        if isinstance(value, ArgumentRef):
            return {"$argument": list(value.path)}
        if isinstance(value, (tuple, list)):         # a named tuple, PyTorch's return types: their items
            items = [node(item, depth + 1) for item in value]
            return items if isinstance(value, list) else {"$tuple": items}
        if isinstance(value, dict) and all(type(key) is str for key in value):    # an OrderedDict too
            return {"$dict": {key: node(item, depth + 1) for key, item in value.items()}}
        if encode_other is not None:
            return node(encode_other(value), depth + 1)
        raise TypeError(f"a {type(value).__name__} cannot be sent")

    header = json.dumps(node(tree), separators=(",", ":"), allow_nan=False).encode()
    return b"".join([struct.pack("<I", len(header)), header, *buffers])
