"""The student's objects as a check sees them in the checker: a `StudentObject` for a function, a class or an
instance that stays in the kernel (calling it sends its arguments as values, reading an attribute brings back a
value or another proxy), a stand-in subclass of the nn.Module or optimizer class the kernel names, so that a check's
isinstance holds, and the notebook's namespace (`StudentNamespace`) for a check that swaps a name for a while.
Each holds the `connection` (remote.Connection) that made it, which imports this module: not the other way round."""

from __future__ import annotations

import sys

import torch

from autograder.checker.reading import MODULE_METHODS
from autograder.checker.student_calls import call
from autograder.checker.values import Handle

VALUE_FREE = MODULE_METHODS - {"load_state_dict"}     # nn.Module's methods that change no parameter's value


class StudentObject:
    """An object that stays in the student's kernel: a function, a class, an instance. Calling it sends the
    arguments as values; reading an attribute brings back a value or another StudentObject."""

    __slots__ = ("_connection", "_handle")

    def __init__(self, connection, handle: Handle):
        object.__setattr__(self, "_connection", connection)
        object.__setattr__(self, "_handle", handle)

    def __repr__(self) -> str:
        return f"<{object.__getattribute__(self, '_handle').type_name} of the student's>"

    @property
    def __class__(self):
        """A stand-in for the student's class, derived from the nearest PyTorch class it derives from, so that
        `isinstance(block.ln_1, nn.LayerNorm)` is answered as in the kernel (and nothing more is claimed)."""
        handle = object.__getattribute__(self, "_handle")
        connection = object.__getattribute__(self, "_connection")
        for base in handle.bases:                           # an instance of a class the check sent
            if base.startswith("course:") and base[7:] in connection.classes:
                return connection.classes[base[7:]]
        return stand_in_class(handle.type_name, handle.bases)

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        connection = object.__getattribute__(self, "_connection")
        handle = object.__getattribute__(self, "_handle")
        key = (handle.number, name)
        if key in connection.attributes:
            return connection.attributes[key]
        reply = connection.request(op="getattr", target=handle.number, name=name)
        value = connection.wrap(reply["value"])
        # nn.Module's reading and mode-setting methods, asked of any of the student's objects (whatever bases its
        # kernel reports: a metaclass can hide nn.Module from them): the call keeps the check's pins, so a value it
        # changes is refused (a module's are tables.py's; what else a check calls by these names changes none).
        if name in VALUE_FREE and isinstance(value, StudentObject):
            connection.table_methods.add(object.__getattribute__(value, "_handle").number)
        if reply.get("held") is True:          # what the object stores: held until the kernel says it changed
            connection.attributes[key] = value
        return value

    def __setattr__(self, name: str, value) -> None:
        connection = object.__getattribute__(self, "_connection")
        connection.request(op="setattr", target=object.__getattribute__(self, "_handle").number, name=name,
                           value=value)

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """nn.Module's walk over a module and its children, answered here for the student's module: a module of
        the check's that holds it (a check's GPT of the student's blocks) walks its children passing a set of
        those seen, which cannot cross; the children are asked of the kernel, one level at a time, as
        PyTorch's own walk asks them."""
        if not isinstance(self, torch.nn.Module):          # its __class__: the student's class's stand-in
            return StudentObject.__getattr__(self, "named_modules")(memo, prefix, remove_duplicate)
        return walk_modules(self, set() if memo is None else memo, prefix, remove_duplicate)

    def _ask(self, op: str, **message):
        connection = object.__getattribute__(self, "_connection")
        handle = object.__getattribute__(self, "_handle")
        return connection.wrap(connection.request(op=op, target=handle.number, **message)["value"])

    def __len__(self) -> int:
        return self._ask("len")          # Python itself insists on a non-negative int

    def __iter__(self):
        items = self._ask("items")
        if type(items) is not list:
            raise TypeError("the student's object gave no items")
        return iter(items)

    def __getitem__(self, key):
        return self._ask("getitem", key=key)

    def __call__(self, *args, **kwargs):
        return call(object.__getattribute__(self, "_connection"), object.__getattribute__(self, "_handle"),
                    args, kwargs)


def walk_modules(module: StudentObject, memo: set, prefix: str, remove_duplicate: bool):
    """torch.nn.Module.named_modules, for a module in the student's kernel."""
    if module in memo:
        return
    if remove_duplicate:
        memo.add(module)
    yield prefix, module
    children = module._modules
    if not isinstance(children, dict):
        raise TypeError("the student's module gave no children")
    for name, child in children.items():
        if child is None:
            continue
        if not isinstance(child, torch.nn.Module):
            raise TypeError("the student's module holds a child that is not a module")
        yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else str(name), remove_duplicate)


def stand_in_class(name: str, bases: tuple) -> type:
    for qualified in bases:
        module, _, attribute = qualified.rpartition(".")
        found = sys.modules.get(module)                 # only what the checker has imported: nothing is loaded
        for part in attribute.split(".") if found is not None else ():
            found = getattr(found, part, None)
        # Only a module's or an optimizer's classes: a claimed Tensor base would have PyTorch's C++ read this
        # proxy as a tensor (the kernel names the bases, so they are claims).
        if isinstance(found, type) and issubclass(found, (torch.nn.Module, torch.optim.Optimizer)):
            return _stand_in(name if name.isidentifier() else "StudentClass", found)
    return StudentObject


_STAND_INS: dict = {}


def _stand_in(name: str, base: type) -> type:
    key = (name, base)
    if key not in _STAND_INS:
        _STAND_INS[key] = type(name, (base,), {"__module__": "student"})
    return _STAND_INS[key]


class StudentNamespace:
    """The student's notebook namespace, as a check that swaps a name for a while sees it (`names =
    _course_namespace()` in the checker, `globals()` in the kernel): reads, writes and deletes go to the kernel."""

    def __init__(self, connection):
        self._connection = connection

    def _entry(self, name: str):
        found = self._connection.request(op="lookup", names=[name])["names"]
        entry = found.get(name) if isinstance(found, dict) else None
        if isinstance(entry, (list, tuple)) and len(entry) == 2 and entry[0] in ("value", "class"):
            return True, self._connection.wrap(entry[1])
        return bool(isinstance(entry, (list, tuple)) and entry and entry[0] == "module"), None

    def __contains__(self, name) -> bool:
        return self._entry(name)[0]

    def get(self, name, default=None):
        present, value = self._entry(name)
        return value if present else default

    def __getitem__(self, name):
        present, value = self._entry(name)
        if not present:
            raise KeyError(name)
        return value

    def __setitem__(self, name, value) -> None:
        self._connection.request(op="assign", name=name, value=value)

    def __delitem__(self, name) -> None:
        self._connection.request(op="delete", name=name)
