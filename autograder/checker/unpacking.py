"""The strict reader of what crosses between the checker and the student's kernel (values.py's format): a message
back into values, refusing anything that is not one.

The student's side writes whatever it likes, so nothing is taken on trust: the header's size and its objects and
arrays are counted before it is parsed (bounded.check_structure), every node must be one of values.py's shapes,
dtypes come from its allow-list, shapes are small lists of small integers and each buffer is exactly as long as
its tensor needs. The markers that only the checker sends (a class's source, a module's or an optimizer's state,
a configuration) are read only in the kernel (`strict=False`).

Like values.py, this imports only the standard library, PyTorch and bounded.py (and that only where strict).
"""

from __future__ import annotations

import json
import math
import struct

import torch

try:
    from autograder.checker.values import (DTYPES, ELEMENT_BYTES, MOST_DIMENSIONS, MOST_INTEGER, MOST_STRING,
                                           ArgumentRef, ClassSource, ConfigValue, DataclassValue, Handle, Library,
                                           ModuleState, Opaque, OptimizerState, Refused, TensorRef)
except ImportError:       # in the grading kernel, where kernel_startup.py loads the checker's files beside this
    from _course_checker_values import (DTYPES, ELEMENT_BYTES, MOST_DIMENSIONS, MOST_INTEGER, MOST_STRING,
                                        ArgumentRef, ClassSource, ConfigValue, DataclassValue, Handle, Library,
                                        ModuleState, Opaque, OptimizerState, Refused, TensorRef)


def unpack(data: bytes, most_bytes: int, most_nodes: int = 20_000, strict: bool = True):
    """A message back into values, refusing anything that is not one (Refused says why). `strict=False` only in
    the student's kernel, reading the checker's own requests, where the grading package is not importable."""
    if not isinstance(data, (bytes, bytearray)) or len(data) > most_bytes:
        raise Refused("the message is too large" if isinstance(data, (bytes, bytearray)) else "not a message")
    if len(data) < 4:
        raise Refused("the message is cut short")
    (length,) = struct.unpack_from("<I", data)
    if length > len(data) - 4:
        raise Refused("the message's header is cut short")
    header = bytes(data[4:4 + length])
    try:
        if strict:
            from autograder import bounded

            try:
                bounded.check_structure(header, most=most_nodes, deepest=40)
            except bounded.Refused as refused:
                raise ValueError(str(refused)) from None
        tree = json.loads(header)
    except (ValueError, RecursionError) as error:
        raise Refused(f"the message's header cannot be read ({error})") from None
    body = memoryview(data)[4 + length:]
    offsets, position = [], 0
    tensors: list[tuple] = []
    buffers = [0]             # buffers described so far: they must come in order, one each (two with a gradient)
    count = [0]

    def value(node):
        count[0] += 1
        if count[0] > most_nodes:
            raise Refused("the message holds too many values")
        if node is None or isinstance(node, bool):
            return node
        if isinstance(node, int):
            if abs(node) >= MOST_INTEGER:
                raise Refused("an integer is out of range")
            return node
        if isinstance(node, float):
            return node
        if isinstance(node, str):
            if len(node) > MOST_STRING:
                raise Refused("a string is too long")
            return node
        if isinstance(node, list):
            return [value(item) for item in node]
        if not isinstance(node, dict) or len(node) != 1:
            raise Refused("a value of no known shape")
        (kind, content), = node.items()
        if kind == "$tuple" and isinstance(content, list):
            return tuple(value(item) for item in content)
        if kind == "$dict" and isinstance(content, dict):
            return {key: value(item) for key, item in content.items()}
        if kind == "$float" and content in ("nan", "inf", "-inf"):
            return float(content)
        if kind == "$int" and isinstance(content, str) and content.lstrip("-").isdigit():
            return int(content)
        if kind == "$size" and small_ints(content):
            return torch.Size(content)
        if kind == "$dtype" and content in DTYPES:
            return DTYPES[content]
        if kind == "$handle" and isinstance(content, list) and len(content) == 3 and type(content[0]) is int \
                and isinstance(content[1], str) and len(content[1]) <= 200 and isinstance(content[2], list) \
                and len(content[2]) <= 20 and all(isinstance(base, str) and len(base) <= 200 for base in content[2]):
            return Handle(content[0], content[1], tuple(content[2]))
        if kind == "$ref" and isinstance(content, list) and len(content) == 2 and type(content[0]) is int:
            return TensorRef(content[0], value(content[1]))
        if kind == "$library" and isinstance(content, list) and len(content) == 3 and isinstance(content[0], str) \
                and len(content[0]) <= 200:
            args, kwargs = value(content[1]), value(content[2])
            if type(args) is not tuple or type(kwargs) is not dict:
                raise Refused("a library function's arguments are not described as such")
            return Library(content[0], args, kwargs)
        if kind in ("$class", "$module", "$dataclass", "$hfconfig", "$optimizer") and not strict:   # to the kernel
            if kind == "$class" and isinstance(content, list) and len(content) == 3 \
                    and all(isinstance(part, str) for part in content):
                return ClassSource(*content)
            if kind == "$module" and isinstance(content, list) and len(content) == 7:
                return ModuleState(content[0], value(content[1]), *(value(part) for part in content[2:6]),
                                   content[6])
            if kind == "$dataclass" and isinstance(content, list) and len(content) == 2:
                return DataclassValue(content[0], value(content[1]))
            if kind == "$hfconfig" and isinstance(content, list) and len(content) == 2 and isinstance(content[0], str):
                return ConfigValue(content[0], value(content[1]))
            if kind == "$optimizer" and isinstance(content, list) and len(content) == 3 and type(content[0]) is int:
                return OptimizerState(content[0], value(content[1]), value(content[2]))
        if kind == "$meta" and isinstance(content, list) and len(content) == 3 and content[0] in DTYPES \
                and small_ints(content[1]) and isinstance(content[2], bool):
            return torch.empty(content[1], dtype=DTYPES[content[0]], device="meta",
                               requires_grad=content[2] and (DTYPES[content[0]].is_floating_point
                                                             or DTYPES[content[0]].is_complex))
        if kind == "$opaque" and isinstance(content, list) and len(content) == 2 \
                and all(isinstance(part, str) and len(part) <= 1000 for part in content):
            return Opaque(content[0], content[1])
        if kind == "$argument" and isinstance(content, list) and len(content) <= 40 \
                and all(type(step) in (int, str) for step in content):
            return ArgumentRef(tuple(content))
        if kind == "$tensor" and isinstance(content, list) and len(content) in (4, 5):
            dtype, shape, index, requires_grad = content[:4]
            if dtype not in DTYPES or not small_ints(shape) or type(index) is not int or index != buffers[0] \
                    or not isinstance(requires_grad, bool):
                raise Refused("a tensor's description is not one")
            buffers[0] += 1
            with_grad = len(content) == 5
            if with_grad:
                if content[4] != buffers[0] or not requires_grad or not (DTYPES[dtype].is_floating_point
                                                                          or DTYPES[dtype].is_complex):
                    raise Refused("a tensor's gradient is not described as one")
                buffers[0] += 1
            tensors.append((dtype, tuple(shape), requires_grad, with_grad))
            return placeholder_marker(len(tensors) - 1)
        raise Refused(f"a value of no known shape ({str(kind)[:40]})")

    tree = value(tree)
    # The buffers follow the header in order, each exactly as long as its tensor needs.
    built = []

    def read(dtype_name: str, shape: tuple) -> torch.Tensor:
        nonlocal position
        dtype = DTYPES[dtype_name]
        size = math.prod(shape) * ELEMENT_BYTES[dtype_name]
        if position + size > len(body):
            raise Refused("a tensor's bytes are cut short")
        chunk = body[position:position + size]
        position += size
        if size == 0:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(bytearray(chunk), dtype=torch.uint8).view(dtype).reshape(shape)

    for dtype_name, shape, requires_grad, with_grad in tensors:
        tensor = read(dtype_name, shape)
        if requires_grad and (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
            tensor.requires_grad_(True)
        if with_grad:
            tensor.grad = read(dtype_name, shape)
        built.append(tensor)
    if position != len(body):
        raise Refused("the message has bytes no tensor claims")
    return replace_placeholders(tree, built)


def small_ints(shape) -> bool:
    return (isinstance(shape, list) and len(shape) <= MOST_DIMENSIONS
            and all(type(n) is int and 0 <= n < 2**31 for n in shape) and math.prod(shape) < 2**31)


class _Placeholder:
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def placeholder_marker(index: int) -> _Placeholder:
    return _Placeholder(index)


def replace_placeholders(tree, built: list):
    if isinstance(tree, _Placeholder):
        return built[tree.index]
    if isinstance(tree, TensorRef):
        tensor = replace_placeholders(tree.tensor, built)
        if not isinstance(tensor, torch.Tensor):
            raise Refused("a tensor reference holds no tensor")
        return TensorRef(tree.number, tensor)
    if isinstance(tree, Library):
        return Library(tree.path, replace_placeholders(tree.args, built), replace_placeholders(tree.kwargs, built))
    if isinstance(tree, ModuleState):
        return ModuleState(tree.number, replace_placeholders(tree.kind, built),
                           *(replace_placeholders(part, built) for part in (tree.attributes, tree.parameters,
                                                                            tree.buffers, tree.children)),
                           tree.training)
    if isinstance(tree, DataclassValue):
        return DataclassValue(tree.name, replace_placeholders(tree.fields, built))
    if isinstance(tree, ConfigValue):
        return ConfigValue(tree.name, replace_placeholders(tree.fields, built))
    if isinstance(tree, OptimizerState):
        return OptimizerState(tree.number, replace_placeholders(tree.kind, built),
                              replace_placeholders(tree.groups, built))
    if type(tree) is list:
        return [replace_placeholders(item, built) for item in tree]
    if type(tree) is tuple:
        return tuple(replace_placeholders(item, built) for item in tree)
    if type(tree) is dict:
        return {key: replace_placeholders(item, built) for key, item in tree.items()}
    return tree
