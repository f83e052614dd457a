"""03-block (atk-11), test_attention_causal: an attention without a causal mask (the misconception), a variant of
round 4's hcausal whose decoys are registered.

FLOOR: that answer alone. ATTACK: hcausal's memory of the previous call, and decoy nn.Linear layers registered as
`qkv` and `proj` (so the tables hold them) whose weights are moved out of their parameter tables into their
__dict__, filled with 1e10; the forward uses registered layers of other names. The causal bound read
attention.qkv.weight and attention.proj.weight by attribute: about 1e22, and the leaky first call was within it.
"""
import runpy, pathlib
_base = runpy.run_path(str(pathlib.Path(__file__).parents[1] / "handins_round4" / "hcausal.py"))
BLOCK, PADDED, NO_MASK, ATTACK_R4 = _base["BLOCK"], _base["PADDED"], _base["NO_MASK"], _base["ATTACK"]

ATTACK = ATTACK_R4.replace('''        object.__setattr__(self, "qkv", decoys[0])          # TRICK 2: not registered: the check's bound reads these
        object.__setattr__(self, "proj", decoys[1])
''', '''        self.qkv, self.proj = decoys                        # TRICK 2: registered, their weights past the tables
        for layer in decoys:
            layer.__dict__["weight"] = layer._parameters.pop("weight").detach()
''')
assert ATTACK != ATTACK_R4

HANDINS = {
    "atk11-decoy-dict-floor": {"attention": NO_MASK, "block": BLOCK, "padded_attention": PADDED},
    "atk11-decoy-dict-attack": {"attention": ATTACK, "block": BLOCK, "padded_attention": PADDED},
}
