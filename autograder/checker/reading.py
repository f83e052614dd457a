"""What the checker's bridge (bridge.py) reads in the student's kernel, without running the student's code: a
module's attributes from its own tables (tables.py), what changes when an object is written in place or rebound
(a tensor's stamp, an attribute's fingerprint), which of a call's results are the kernel's own state, the walks
over the containers a call takes and returns, and the classes a check's configuration is made of (the notebook's
dataclass, transformers' configurations). Like bridge.py, it runs in the process the student controls and holds
no test, no expected value and no reference.
"""

from __future__ import annotations

import dataclasses
import inspect
import types

import torch

try:
    from autograder.checker import tables
    from autograder.checker.values import ArgumentRef
except ImportError:       # in the grading kernel, where kernel_startup.py loads the checker's files beside this
    import _course_checker_tables as tables
    from _course_checker_values import ArgumentRef


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


def describe_error(error: BaseException) -> dict:
    """An exception as the checker re-raises it: its type's name, the names of the built-in exceptions it
    derives from, and its message."""
    builtin = [tables.class_qualname(kind) for kind in tables.static_mro(type(error))
               if tables.class_module(kind) == "builtins" and issubclass(kind, BaseException)]
    return {"type": type(error).__name__[:200], "bases": builtin[:20], "message": str(error)[:4000]}


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


def notebook_dataclass(namespace: dict, made: dict, name: str, fields: dict):
    """An instance of the notebook's dataclass of that name (the release's GPTConfig), or, where the notebook has
    none with these fields (a check's own Config of the same fields), of one made with them (kept in `made`)."""
    if not (name.isidentifier() and type(fields) is dict and all(key.isidentifier() for key in fields)):
        raise TypeError("a dataclass's name and fields are names")
    kind = namespace.get(name)
    if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)
            and set(fields) <= {field.name for field in dataclasses.fields(kind)}):
        kind = made.get((name, tuple(fields)))
        if kind is None:
            kind = made[name, tuple(fields)] = dataclasses.make_dataclass(name, list(fields))
    return kind(**fields)


def transformers_config(name: str, fields: dict):
    """transformers' configuration class of that name (GPT2Config), made with the check's fields."""
    import transformers

    kind = getattr(transformers, name, None) if name.isidentifier() else None
    if not (isinstance(kind, type) and issubclass(kind, transformers.PretrainedConfig)):
        raise TypeError(f"transformers has no configuration {name[:100]!r}")
    return kind(**fields)
