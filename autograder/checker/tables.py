"""nn.Module's methods that read and set what a module holds, as a check calls them on the student's module: over
the module's own tables (`_modules`, `_parameters`, `_buffers`, `training` in its `__dict__`), so that no code of
the student's class runs. PyTorch's own versions call back into the module (`eval()` calls `self.train(False)`,
`named_parameters()` walks `self.named_modules()`, `state_dict()` calls `_save_to_state_dict`): a class that
overrides those would run between a check's randomization and its reference, and could zero the weights the check
just drew, or hide a layer from it.

Runs in the student's kernel (loaded beside bridge.py); each function takes the module first, as a method would.
They follow PyTorch 2's semantics for the arguments a check passes; hooks are not run.
"""

from __future__ import annotations

from collections import OrderedDict

import torch


def own(module) -> dict:
    return object.__getattribute__(module, "__dict__")


TABLES = ("_parameters", "_buffers", "_modules")


def table(module, name: str) -> dict:
    """One of the module's tables as a plain dict, read without its class's code: a dict subclass whose methods
    say otherwise (an items() that hides a parameter) is read by dict's own, as PyTorch's attribute lookup reads it."""
    found = own(module).get(name)
    if type(found) in (dict, OrderedDict):
        return found
    return dict(dict.items(found)) if issubclass(type(found), dict) else {}


# A class's own MRO, namespace, module and qualified name, read through type's descriptors: a metaclass may define
# __mro__ or __dict__ as properties, which run the student's code where the plain attribute would be read.
static_mro = type.__dict__["__mro__"].__get__
class_dict = type.__dict__["__dict__"].__get__
class_module = type.__dict__["__module__"].__get__
class_qualname = type.__dict__["__qualname__"].__get__


def refuse_shadows(module) -> None:
    """TypeError unless `self.name` in the module's own code reads what its tables hold under each name. PyTorch
    never stores a table's name anywhere else (Module.__setattr__ removes it from __dict__; register_* refuse a
    name already in use), but an entry of the instance's __dict__ or a class attribute of the same name is found
    by Python's lookup before nn.Module.__getattr__ reads the tables, and a class that overrides __getattr__ or
    __getattribute__ answers as it likes: the forward would then compute with a layer or a weight the check never
    drew, while the check's reference reads the one it drew."""
    kind = type(module)
    for method, base in (("__getattr__", torch.nn.Module), ("__getattribute__", object)):
        owner = next((cls for cls in static_mro(kind) if method in class_dict(cls)), base)
        if owner is not base:                 # torch.nn's layers override neither
            raise TypeError(f"your {class_qualname(kind)} overrides {method}: the checks read a module's layers "
                            "and parameters as PyTorch registers them, and a module whose attributes its own code "
                            "answers cannot be checked. Remove the override.")
    instance, classes = own(module), [class_dict(cls) for cls in static_mro(kind)]
    for held in TABLES:
        for name in table(module, held):
            # What inspect.getattr_static would find (the instance's __dict__, then the classes'), without its cost:
            # this runs at every read a check makes of a module.
            if name in instance or any(name in namespace for namespace in classes):
                where = "its __dict__" if name in instance else f"its class ({class_qualname(kind)}.{name})"
                raise TypeError(
                    f"your {class_qualname(kind)} holds `{name}` twice, in PyTorch's table of its "
                    f"{held.strip('_')} and in {where}, and self.{name} reads the second: the checks read a module "
                    f"as PyTorch holds it. Set layers and parameters as plain attributes in __init__ "
                    f"(self.{name} = ...), never through __dict__, object.__setattr__ or a class attribute.")


def unregistered(value, depth: int = 0) -> bool:
    """Whether a value a module holds outside its tables is, or holds, a tensor or a module (a weight or a layer
    PyTorch does not know the module has: never drawn by a check that walks its parameters)."""
    if isinstance(value, (torch.Tensor, torch.nn.Module)):
        return True
    if depth < 3 and type(value) in (list, tuple, dict):
        items = value.values() if type(value) is dict else value
        return any(unregistered(item, depth + 1) for item in list(items)[:1000])
    return False


def member(module, name: str, missing=None):
    """The submodule, parameter or buffer the module's tables hold under `name` (PyTorch's attribute lookup reads
    them in this order); `missing` where none does."""
    for kind in ("_parameters", "_buffers", "_modules"):
        held = table(module, kind)
        if name in held:
            return held[name]
    return missing


def named_modules(module, memo=None, prefix: str = "", remove_duplicate: bool = True):
    memo = set() if memo is None else memo
    if remove_duplicate:
        if id(module) in memo:
            return
        memo.add(id(module))
    refuse_shadows(module)
    yield prefix, module
    for name, child in list(table(module, "_modules").items()):
        if child is not None:
            yield from named_modules(child, memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)


def modules(module):
    for _, found in named_modules(module):
        yield found


def named_children(module):
    refuse_shadows(module)
    seen = set()
    for name, child in list(table(module, "_modules").items()):
        if child is not None and id(child) not in seen:
            seen.add(id(child))
            yield name, child


def children(module):
    for _, child in named_children(module):
        yield child


def _named_members(module, kind: str, prefix: str, recurse: bool, remove_duplicate: bool):
    if not recurse:
        refuse_shadows(module)
    holders = named_modules(module, prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, module)]
    seen = set()
    for holder_prefix, holder in holders:
        for name, value in list(table(holder, kind).items()):
            if value is None or (remove_duplicate and id(value) in seen):
                continue
            seen.add(id(value))
            yield f"{holder_prefix}.{name}" if holder_prefix else name, value


def named_parameters(module, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
    yield from _named_members(module, "_parameters", prefix, recurse, remove_duplicate)


def parameters(module, recurse: bool = True):
    for _, parameter in named_parameters(module, recurse=recurse):
        yield parameter


def named_buffers(module, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
    yield from _named_members(module, "_buffers", prefix, recurse, remove_duplicate)


def buffers(module, recurse: bool = True):
    for _, buffer in named_buffers(module, recurse=recurse):
        yield buffer


def train(module, mode: bool = True):
    if not isinstance(mode, bool):
        raise ValueError("training mode is expected to be boolean")
    for found in modules(module):
        own(found)["training"] = mode
    return module


def eval(module):      # noqa: A001  (nn.Module's name)
    return train(module, False)


def zero_grad(module, set_to_none: bool = True):
    for parameter in parameters(module):
        if parameter.grad is not None:
            if set_to_none:
                parameter.grad = None
            else:
                parameter.grad.detach_()
                parameter.grad.zero_()


def requires_grad_(module, requires_grad: bool = True):
    for parameter in parameters(module):
        parameter.requires_grad_(requires_grad)
    return module


def get_submodule(module, target: str = ""):
    found = module
    refuse_shadows(found)
    for name in target.split(".") if target else ():
        children_of = table(found, "_modules")
        if name not in children_of or children_of[name] is None:
            raise AttributeError(f"{type(found).__name__} has no attribute `{name}`")
        found = children_of[name]
        refuse_shadows(found)
    return found


def get_parameter(module, target: str):
    path, _, name = target.rpartition(".")
    holder = get_submodule(module, path)
    found = table(holder, "_parameters").get(name)
    if found is None:
        raise AttributeError(f"{type(holder).__name__} has no parameter `{name}`")
    return found


def state_dict(module, *args, destination=None, prefix: str = "", keep_vars: bool = False):
    """Every parameter and persistent buffer under its dotted name, shared ones under each (as PyTorch's)."""
    destination = OrderedDict() if destination is None else destination
    refuse_shadows(module)
    skipped = own(module).get("_non_persistent_buffers_set") or set()
    for name, parameter in list(table(module, "_parameters").items()):
        if parameter is not None:
            destination[prefix + name] = parameter if keep_vars else parameter.detach()
    for name, buffer in list(table(module, "_buffers").items()):
        if buffer is not None and name not in skipped:
            destination[prefix + name] = buffer if keep_vars else buffer.detach()
    for name, child in list(table(module, "_modules").items()):
        if child is not None:
            state_dict(child, destination=destination, prefix=f"{prefix}{name}.", keep_vars=keep_vars)
    return destination


def load_state_dict(module, state, strict: bool = True):
    """The values of `state` copied into the module's parameters and persistent buffers, by name."""
    held = state_dict(module, keep_vars=True)
    missing = [key for key in held if key not in state]
    unexpected = [key for key in state if key not in held]
    problems = []
    for key, target in held.items():
        if key in state:
            value = state[key]
            if not isinstance(value, torch.Tensor):
                problems.append(f'While copying the parameter named "{key}", expected torch.Tensor, got {type(value).__name__}.')
            elif tuple(value.shape) != tuple(target.shape):
                problems.append(f"size mismatch for {key}: copying a param with shape {torch.Size(value.shape)} from "
                                f"checkpoint, the shape in current model is {target.shape}.")
    if strict:
        if unexpected:
            problems.insert(0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{key}"' for key in unexpected)))
        if missing:
            problems.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{key}"' for key in missing)))
    if problems:
        raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(type(module).__name__,
                                                                                "\n\t".join(problems)))
    with torch.no_grad():
        for key, target in held.items():
            if key in state:
                target.copy_(state[key])
    return torch.nn.modules.module._IncompatibleKeys(missing, unexpected)


METHODS = {function.__name__: function for function in (
    named_modules, modules, named_children, children, named_parameters, parameters, named_buffers, buffers, train,
    eval, zero_grad, requires_grad_, get_submodule, get_parameter, state_dict, load_state_dict)}
