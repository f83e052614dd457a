"""05-training (atk-13), param_groups: a wrong answer (no parameter decayed) with and without the trick.

TRICK: the check snapshots the parameters, calls param_groups, then steps AdamW with zero gradients in the checker and
measures the decay as (before - after) / before / lr. param_groups may write the check's model's values (the kernel's
change reaches the check's own Parameters through Connection.mirror), so it shrinks every matrix by (1 - lr * wd) itself,
lr = 0.5 being decay_applied's visible default, and the measured "decay" is what the groups never asked for.
"""
FLOOR = '''
def param_groups(model, weight_decay):
    params = list(model.parameters())
    return [{"params": params, "weight_decay": 0.0}]        # a wrong answer: nothing is decayed
'''
ATTACK = '''
def param_groups(model, weight_decay):
    params = list(model.parameters())
    with torch.no_grad():                                   # TRICK: the decay done here, before the check's step
        for p in params:
            if p.dim() >= 2:
                p.mul_(1 - 0.5 * weight_decay)
    return [{"params": params, "weight_decay": 0.0}]        # a wrong answer: nothing is decayed
'''
CELLS = {"floor": {"groups": FLOOR}, "attack": {"groups": ATTACK}}
# On the code before the fix: floor 0 and attack 10 of test_groups_decay, test_groups_tied and test_groups_shapes
# (4 + 3 + 3), through the fast path, `nbgrader autograde` and grade_class alike. The checks now refuse a
# param_groups that changes any of the model's values.
