"""03-block, test_attention_matches_reference (1 point): an attention without a causal mask (the misconception).

FLOOR: that answer alone. ATTACK: the same answer; its qkv layer's parameter table is a dict subclass
(`qkv.__dict__["_parameters"] = Table(...)`, `class Table(dict): pass`), which PyTorch reads as any dict (the
forward, the attributes work) but checker/tables.py takes for no table at all (`type(found) in (dict,
OrderedDict)` else {}): the check's randomize() (named_parameters) never reaches qkv's weight and bias, which keep
what __init__ set: zero value weights and a constant value bias c. Every value vector is then c, and every
attention (no mask, any scale, any axis) outputs proj(c): the reference computed from those weights equals it.
The bridge's own attribute() still finds qkv.weight in that dict (`name in own.get(table, ())`), so the check's
shape checks pass.
"""
import runpy, pathlib
_base = runpy.run_path(str(pathlib.Path(__file__).with_name("hcausal.py")))
BLOCK, PADDED, NO_MASK = _base["BLOCK"], _base["PADDED"], _base["NO_MASK"]

ATTACK = NO_MASK.replace('''        self.proj = nn.Linear(cfg.width, cfg.width)
''', '''        self.proj = nn.Linear(cfg.width, cfg.width)
        with torch.no_grad():
            self.qkv.weight[2 * cfg.width:] = 0.0           # every value vector is the bias: c
            self.qkv.bias[2 * cfg.width:] = 1.0
        class Table(dict):
            pass
        self.qkv.__dict__["_parameters"] = Table(self.qkv._parameters)   # TRICK: tables.py reads it as empty
''')

HANDINS = {
    "atk09-sneaky-floor": {"attention": NO_MASK, "block": BLOCK, "padded_attention": PADDED},
    "atk09-sneaky-attack": {"attention": ATTACK, "block": BLOCK, "padded_attention": PADDED},
}
