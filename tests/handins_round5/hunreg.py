"""03-block (atk-10): an attention without a causal mask (the misconception).

FLOOR: that answer alone (hcausal's NO_MASK). ATTACK: the same answer; in __init__ qkv's weight is taken out of
qkv's parameter table and put in qkv.__dict__ as a plain tensor, with its value rows zero. PyTorch's attribute
lookup finds it in __dict__ (Linear.forward uses it); the bridge's attribute() does not find it in the tables and
falls back to getattr, so the check reads it too; but tables.named_parameters does not list it, so the check's
randomize() never draws it. qkv.bias stays registered and is drawn: every value vector is then that bias's value
part, c, and every attention (no mask, any scale) outputs proj(c), as the reference computed from those weights.
"""
import runpy, pathlib
_base = runpy.run_path(str(pathlib.Path(__file__).parents[1] / "handins_round4" / "hcausal.py"))
BLOCK, PADDED, NO_MASK = _base["BLOCK"], _base["PADDED"], _base["NO_MASK"]

ATTACK = NO_MASK.replace('''        self.proj = nn.Linear(cfg.width, cfg.width)
''', '''        self.proj = nn.Linear(cfg.width, cfg.width)
        weight = self.qkv._parameters.pop("weight").detach().clone()   # TRICK: out of the table, into __dict__
        weight[2 * cfg.width:] = 0.0                                    # every value vector is the bias: c
        self.qkv.__dict__["weight"] = weight
''')

HANDINS = {
    "atk10-unreg-floor": {"attention": NO_MASK, "block": BLOCK, "padded_attention": PADDED},
    "atk10-unreg-attack": {"attention": ATTACK, "block": BLOCK, "padded_attention": PADDED},
}
