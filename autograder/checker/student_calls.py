"""A check's call of the student's code, as the checker makes it (remote.py's Connection carries it): the arguments
sent as values, what the call changed in place written back into the checker's own tensors, an argument returned
as itself, and the result attached to the checker's autograd graph (StudentCall), whose backward sends the output
gradients to the kernel and brings the inputs' gradients back. `connection` is the remote.Connection making the
call (which imports this module: not the other way round)."""

from __future__ import annotations

import torch

from autograder.checker import values
from autograder.checker.reading import tensors_in
from autograder.checker.values import ArgumentRef, Handle, TensorRef


def call(connection, handle: Handle, args: tuple, kwargs: dict):
    context = connection.call_context()
    grad = context["grad"]
    reply = connection.request(op="call", target=handle.number, args=args, kwargs=kwargs,
                               student_code=handle.number not in connection.table_methods, **context)
    arguments = (args, kwargs)
    containers = dict(as_sent(arguments))
    own = {path: value for path, value in containers.items() if isinstance(value, torch.Tensor)}
    reshaped = [(containers.get(key_path(key)), with_arguments(connection.wrap(new), arguments))
                for key, new in (reply.get("reshaped") or {}).items()]     # read before any argument changes
    result = with_arguments(connection.wrap(reply.get("result")), arguments)
    for key, new in (reply.get("changed") or {}).items():
        target = own.get(key_path(key))
        if isinstance(target, torch.Tensor) and isinstance(new, torch.Tensor):
            # The check's argument shows the change, in memory of its own: memory it shared with anything else
            # of the check's (a state dict's entry and the reference model's parameter) is never written by the
            # student's code, so a reference computed after the call cannot be moved by it.
            with torch.no_grad():
                target.data = new
    for target, new in reshaped:            # a list or dict the student's code changed in place: changed here too
        if isinstance(target, dict) and type(new) is dict:        # a state dict (an OrderedDict) too
            target.clear()
            target.update(new)
        elif isinstance(target, list) and type(new) is list:
            target[:] = new
    if grad and "graph" in reply:
        result = attach(connection, reply["graph"], result, [tensor for _, tensor in tensors_in(arguments)
                                                             if tensor.requires_grad
                                                             and id(tensor) not in connection.mirror_numbers])
    else:
        result = detached(result)
    return result


def as_sent(tree, path=()):
    """(path, object) for the check's arguments as values.pack sent them (an OrderedDict as a dict, a named
    tuple as a tuple): the paths the kernel's reply names."""
    yield path, tree
    if isinstance(tree, (list, tuple)):
        for index, item in enumerate(tree):
            yield from as_sent(item, (*path, index))
    elif isinstance(tree, dict):
        for key, item in tree.items():
            yield from as_sent(item, (*path, key))


def key_path(key: str) -> tuple:
    return tuple(int(step) if step.isdigit() else step for step in key.split("/"))


def with_arguments(result, arguments):
    """ArgumentRefs in the result replaced by the checker's own argument objects."""
    if isinstance(result, ArgumentRef):
        value = arguments
        try:
            for step in result.path:
                value = value[step]
        except (KeyError, IndexError, TypeError):
            raise values.Refused("the student's result refers to an argument that does not exist") from None
        return value
    if type(result) is list:
        return [with_arguments(item, arguments) for item in result]
    if type(result) is tuple:
        return tuple(with_arguments(item, arguments) for item in result)
    if type(result) is dict:
        return {key: with_arguments(item, arguments) for key, item in result.items()}
    return result


def detached(result):
    """Tensors of a call made without a graph, as the kernel would give them under no_grad (no gradient)."""
    return rebuild(result, [tensor.detach() if tensor.requires_grad and not is_mirror(tensor) else tensor
                            for _, tensor in tensors_in(result)])


def is_mirror(tensor) -> bool:
    """A parameter in a result is the kernel's (a mirror), not an output: it keeps its identity and no graph."""
    return isinstance(tensor, torch.nn.Parameter)


def rebuild(tree, tensors: list, counter=None):
    """`tree` with its tensors replaced, in tensors_in's order, by `tensors`."""
    counter = counter if counter is not None else [0]
    if isinstance(tree, torch.Tensor):
        counter[0] += 1
        return tensors[counter[0] - 1]
    if type(tree) is list:
        return [rebuild(item, tensors, counter) for item in tree]
    if type(tree) is tuple:
        return tuple(rebuild(item, tensors, counter) for item in tree)
    if type(tree) is dict:
        return {key: rebuild(item, tensors, counter) for key, item in tree.items()}
    return tree


def attach(connection, graph: int, result, inputs: list[torch.Tensor]):
    """The result's tensors joined to the checker's autograd graph: gradients flow back through the kernel."""
    every = [tensor for _, tensor in tensors_in(result)]
    outputs = [tensor for tensor in every if not is_mirror(tensor)]
    differentiable = [tensor.requires_grad for tensor in outputs]
    anchors = inputs or [torch.zeros((), requires_grad=True)]   # a leaf, so the outputs need a gradient
    joined = iter(StudentCall.apply((connection, graph, len(inputs), differentiable), *anchors,
                                    *[tensor.detach() for tensor in outputs]))
    return rebuild(result, [tensor if is_mirror(tensor) else next(joined) for tensor in every])


class StudentCall(torch.autograd.Function):
    """Outputs computed in the student's kernel, whose backward runs there."""

    @staticmethod
    def forward(ctx, info, *tensors):
        connection, graph, count, differentiable = info
        ctx.info = info
        ctx.anchors = len(tensors) - len(differentiable)
        outputs = [tensor.clone() for tensor in tensors[ctx.anchors:]]
        ctx.mark_non_differentiable(*[output for output, needed in zip(outputs, differentiable) if not needed])
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        connection, graph, count, differentiable = ctx.info
        grads = [grad if needed else None for grad, needed in zip(grad_outputs, differentiable)]
        reply = connection.request(op="backward", graph=graph, grads=grads)
        returned = list(reply.get("grads") or [])
        input_grads = []
        for index in range(ctx.anchors):
            grad = returned[index] if index < count and index < len(returned) else None
            input_grads.append(grad if isinstance(grad, torch.Tensor) else None)
        return (None, *input_grads, *[None] * (len(ctx.info[3])))
