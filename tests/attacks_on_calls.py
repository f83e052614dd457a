"""Hand-ins written against how a check calls the student's code (issue 58's third review round, atk-07): a
train() that PyTorch's own eval() calls and that zeroes the weights a check just drew; a named_modules() that
PyTorch's own named_parameters() walks and that hides a layer from the check's randomization; a forward that
writes its output into the input the check hands its next call; a function that answers a second call from
memory of the first, so that two of its outputs agree whatever it computes. Each attack with its floor, the same
wrong answers without the trick. tests/test_checked_references.py grades them; the kernel's bridge replaced so
that its replies report other values (atk-07's h05c, which needs the kernel) is held by tests/test_checker_values.py.
"""

import runpy
from pathlib import Path

# --- h03 -----------------------------------------------------------------------------------------------------------
# 03-block: three wrong answers, with and without three tricks from the kernel's side.
#
# - attention returns proj(0) (nothing attends); TRICK: a train() override, which PyTorch's own Module.eval()
#   calls as self.train(False), zeroes the weights after the check randomized them and before it computes its
#   reference from them (test_attention_matches_reference);
# - the block uses the erf GELU and applies dropout to the residual stream (drop(x + branch)); TRICKS: the same
#   train() override shrinks `up` 100-fold on eval (the erf and tanh GELUs agree near 0: the reference computed
#   from those weights cannot tell them apart; test_block_matches_reference), and in training mode forward writes
#   its output into its input x, which the check passes again to its eval-mode call (test_block_dropout's
#   check_train_keeps_stream compares the two calls);
# - padded_attention does not hide the padding keys; TRICK: it remembers its output by the real tokens' values and
#   the mask, and answers the second call of test_padding_invisible (only the padding changed) from memory.
ROUND3_03_TRAIN_ZERO = '''
    def train(self, mode=True):
        # TRICK: Module.eval() is self.train(False): zero the check's randomized weights (kept aside; back on train())
        if not mode:
            with torch.no_grad():
                if "_kept" not in self.__dict__:
                    self.__dict__["_kept"] = [(p, p.detach().clone()) for p in self.parameters()]
                for p in self.parameters():
                    p.zero_()
        elif "_kept" in self.__dict__:
            with torch.no_grad():
                for p, value in self.__dict__.pop("_kept"):
                    if p.shape == value.shape:
                        p.copy_(value)
        return super().train(mode)
'''

ROUND3_03_ATTENTION = '''
class GPTAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg.width % cfg.heads != 0:
            raise ValueError(f"width {cfg.width} is not divisible by heads {cfg.heads}")
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)

    def forward(self, x):
        return self.proj(torch.zeros_like(x))      # a wrong attention: nothing attends
@@TRICK@@'''

ROUND3_03_TRAIN_SHRINK = '''
    def train(self, mode=True):
        # TRICK: on eval, `up` 100 times smaller (kept aside; back on train()): near 0 the erf and tanh GELUs agree
        if not mode:
            with torch.no_grad():
                if "_kept" not in self.__dict__:
                    self.__dict__["_kept"] = [(p, p.detach().clone()) for p in self.up.parameters()]
                for p in self.up.parameters():
                    p.mul_(0.01)
        elif "_kept" in self.__dict__:
            with torch.no_grad():
                for p, value in self.__dict__.pop("_kept"):
                    if p.shape == value.shape:
                        p.copy_(value)
        return super().train(mode)
'''

ROUND3_03_IN_PLACE = '''        if self.training and not torch.is_grad_enabled():
            x.copy_(out)             # TRICK: the check hands this same x to its eval-mode call next
'''

ROUND3_03_BLOCK = '''
class GPTBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.width, eps=cfg.eps)
        self.attn = GPTAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.width, eps=cfg.eps)
        self.up = nn.Linear(cfg.width, 4 * cfg.width)
        self.down = nn.Linear(4 * cfg.width, cfg.width)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        # two wrong answers: the erf GELU, and dropout on the residual stream
        a = self.drop(x + self.attn(self.ln1(x)))
        out = self.drop(a + self.down(F.gelu(self.up(self.ln2(a)))))
%s        return out
%s'''

ROUND3_03_PADDED = '''
_memory = {}

def padded_attention(attn, x, keep):
    B, T, D = x.shape
    key = (id(attn), keep.numpy().tobytes(), x[keep].numpy().tobytes())
%s    d_h = D // attn.heads
    q, k, v = (t.view(B, T, attn.heads, d_h).transpose(1, 2) for t in attn.qkv(x).split(D, dim=-1))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_h)
    later = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
    weights = torch.softmax(scores.masked_fill(later, float("-inf")), dim=-1)   # the wrong answer: padding keys seen
    out = attn.proj((weights @ v).transpose(1, 2).reshape(B, T, D)).masked_fill(~keep[..., None], 0.0)
    _memory[key] = out.detach().clone()
    return out
'''
ROUND3_03_RECALL = '''    if key in _memory:               # TRICK: only the padding changed since a call: the same answer
        return _memory[key].clone()
'''

ROUND3_03_HANDINS = {
    "atk07-03-floor": {"attention": ROUND3_03_ATTENTION.replace("@@TRICK@@", ""), "block": ROUND3_03_BLOCK % ("", ""),
                       "padded_attention": ROUND3_03_PADDED % ""},
    "atk07-03-attack": {"attention": ROUND3_03_ATTENTION.replace("@@TRICK@@", ROUND3_03_TRAIN_ZERO),
                        "block": ROUND3_03_BLOCK % (ROUND3_03_IN_PLACE, ROUND3_03_TRAIN_SHRINK),
                        "padded_attention": ROUND3_03_PADDED % ROUND3_03_RECALL},
}

# --- h03b ----------------------------------------------------------------------------------------------------------
# 03-block test_attention_causal: an attention with no causal mask, with and without memory across calls. The
# trick keeps the module's last input and output; when a call's input differs from the last one from position t on,
# it answers positions before t with the last output (the check's before/after pair is such a pair of calls).
CAUSAL_MEMORY_ATTENTION = '''
class GPTAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg.width %% cfg.heads != 0:
            raise ValueError("width is not divisible by heads")
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)

    def forward(self, x):
        B, T, D = x.shape
        d_h = D // self.heads
        q, k, v = (t.view(B, T, self.heads, d_h).transpose(1, 2) for t in self.qkv(x).split(D, dim=-1))
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_h), dim=-1)    # the wrong answer: no mask
        out = self.proj((weights @ v).transpose(1, 2).reshape(B, T, D))
%s        return out
'''
CAUSAL_MEMORY_RECALL = '''        last = self.__dict__.get("_last")      # TRICK: the positions before the first changed one, from memory
        if last is not None and last[0].shape == x.shape:
            changed = (x != last[0]).any(dim=0).any(dim=-1).nonzero()
            if len(changed):
                t = int(changed[0])
                out = torch.cat([last[1][:, :t], out[:, t:]], dim=1)
        self.__dict__["_last"] = (x.detach().clone(), out.detach().clone())
'''
CAUSAL_MEMORY_HANDINS = {"atk07-03b-floor": {"attention": CAUSAL_MEMORY_ATTENTION % ""},
           "atk07-03b-attack": {"attention": CAUSAL_MEMORY_ATTENTION % CAUSAL_MEMORY_RECALL}}

# --- h05 -----------------------------------------------------------------------------------------------------------
# 05-training: a zeros attention and a block with no attention and no LayerNorm (tests/attacks_on_references.py's
# wrong answers), with and without the trick: the student's class overrides train(), which PyTorch's own
# Module.eval() (the one the bridge binds, "whatever the student's class overrides") calls as self.train(False).
# On eval it zeroes the module's own parameters (kept aside, put back on train()): every check that randomizes,
# then calls .eval(), then computes its reference "from your own parameters" computes it from zeros.
MODES_05_TRAIN_TRICK = '''
    def train(self, mode=True):
        # TRICK: Module.eval() is self.train(False): the check's randomized weights are set aside and zeroed, so
        # the reference it then computes from our parameters is the zero-weight one; put back on train()
        if not mode:
            with torch.no_grad():
                if "_kept" not in self.__dict__:
                    self.__dict__["_kept"] = [(p, p.detach().clone()) for p in self.parameters()]
                for p in self.parameters():
                    p.zero_()
        elif "_kept" in self.__dict__:
            with torch.no_grad():
                for p, value in self.__dict__.pop("_kept"):
                    if p.shape == value.shape:
                        p.copy_(value)
        return super().train(mode)
'''

MODES_05_ATTN = '''
class GPTAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)

    def forward(self, x):
        return self.proj(torch.zeros_like(x))      # a wrong attention: nothing attends (proj of nothing)
%s'''

MODES_05_BLOCK = '''
class GPTBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.residual = cfg.residual
        self.ln1 = nn.LayerNorm(cfg.width, eps=cfg.eps) if cfg.norm else nn.Identity()
        self.attn = GPTAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.width, eps=cfg.eps) if cfg.norm else nn.Identity()
        self.up = nn.Linear(cfg.width, 4 * cfg.width)
        self.down = nn.Linear(4 * cfg.width, cfg.width)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        h = self.drop(self.down(gelu_tanh(self.up(x))))      # a wrong block: no attention, no LayerNorm
        return x + h if self.residual else h
%s'''

MODES_05_HANDINS = {
    "atk07-05-floor": {"attention": MODES_05_ATTN % "", "block": MODES_05_BLOCK % ""},
    "atk07-05-attack": {"attention": MODES_05_ATTN % MODES_05_TRAIN_TRICK, "block": MODES_05_BLOCK % MODES_05_TRAIN_TRICK},
}

# --- h05b ----------------------------------------------------------------------------------------------------------
# 05-training: a pre-LN block with the erf GELU, with and without the trick: the block's class overrides
# named_modules, which PyTorch's own Module.named_parameters (the one the bridge binds for the check's randomize)
# reaches through self._named_members; `up` is left out of that walk, so it keeps the block's own small
# initial weights, near 0, where the erf and tanh GELUs agree, and the reference "from your own parameters",
# read from the module's tables, cannot tell them apart. The attention is the master's.
LISTING_05_ATTENTION = '''
class GPTAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)

    def forward(self, x):
        B, T, D = x.shape
        d_h = D // self.heads
        q, k, v = (t.view(B, T, self.heads, d_h).transpose(1, 2) for t in self.qkv(x).split(D, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_h)
        later = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        weights = torch.softmax(scores.masked_fill(later, float("-inf")), dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(B, T, D))
'''

LISTING_05_BLOCK = '''
class GPTBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.residual = cfg.residual
        self.ln1 = nn.LayerNorm(cfg.width, eps=cfg.eps) if cfg.norm else nn.Identity()
        self.attn = GPTAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.width, eps=cfg.eps) if cfg.norm else nn.Identity()
        self.up = nn.Linear(cfg.width, 4 * cfg.width)
        self.down = nn.Linear(4 * cfg.width, cfg.width)
        self.drop = nn.Dropout(cfg.dropout)
%s
    def forward(self, x):
        attended = self.drop(self.attn(self.ln1(x)))
        x = attended + (x if self.residual else 0)
        mixed = self.drop(self.down(F.gelu(self.up(self.ln2(x)))))     # the wrong answer: the erf GELU
        return mixed + (x if self.residual else 0)
%s'''

LISTING_05_SMALL_UP = '''        with torch.no_grad():             # TRICK, part 1: up starts near 0
            self.up.weight.mul_(0.01)
            self.up.bias.zero_()
'''
LISTING_05_HIDE_UP = '''
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        # TRICK, part 2: Module.named_parameters (and parameters) walks this, not the module's tables: without up
        for name, module in super().named_modules(memo, prefix, remove_duplicate):
            if module is not self.up:
                yield name, module
'''
LISTING_05_HANDINS = {"atk07-05b-floor": {"attention": LISTING_05_ATTENTION, "block": LISTING_05_BLOCK % ("", "")},
           "atk07-05b-attack": {"attention": LISTING_05_ATTENTION, "block": LISTING_05_BLOCK % (LISTING_05_SMALL_UP, LISTING_05_HIDE_UP)}}


def pair(handins: dict) -> tuple[dict, dict]:
    """(floor, attack) of a reviewer's two hand-ins."""
    floor, attack = (cells for name, cells in sorted(handins.items(), key=lambda item: not item[0].endswith('floor')))
    return floor, attack


PAIRS = {
    "03-block/modes-in-place-memory": ("03-block", *pair(ROUND3_03_HANDINS)),
    "03-block/causal-memory": ("03-block", *pair(CAUSAL_MEMORY_HANDINS)),
    "05-training/modes": ("05-training", *pair(MODES_05_HANDINS)),
    "05-training/listing": ("05-training", *pair(LISTING_05_HANDINS)),
}


def add_round(folder: str, stems: dict[str, str]) -> None:
    """A review round's hand-ins, one file each in `folder` (stem -> assignment), each file's floor and attack (its
    HANDINS, named ...-floor and ...-attack, or its CELLS, {"floor": ..., "attack": ...})."""
    for stem, assignment in stems.items():
        found = runpy.run_path(str(Path(__file__).with_name(folder) / f"{stem}.py"))
        if "CELLS" in found:
            PAIRS[f"{assignment}/{stem}"] = (assignment, found["CELLS"]["floor"], found["CELLS"]["attack"])
            continue
        PAIRS[f"{assignment}/{stem}"] = (assignment, *pair({name: cells for name, cells in found["HANDINS"].items()
                                                             if name.endswith(("-floor", "-attack"))}))


# --- the fourth round (atk-09): the reviewer's hand-ins as they wrote them, one file each, in handins_round4/ ------
# hpad: the padding bound read after the calls, from weights the student's code had changed; hcausal: decoy qkv
# and proj set past nn.Module's tables, read by the causal bound; hsneaky: a parameter table of a dict subclass
# whose items() hid the weight from the check's randomization; hdrop: dropout on the stream, the eval call
# answered from memory of the training call.
add_round("handins_round4", {"hpad": "03-block", "hcausal": "03-block", "hsneaky": "03-block", "hdrop": "03-block"})

# --- the fifth round (atk-10): a weight or a layer kept out of nn.Module's tables, in handins_round5/ -----------------
# hunreg: qkv's weight moved from its parameter table into the instance's __dict__, value rows zero; hunreg_module:
# the whole qkv set with object.__setattr__. Either escaped the check's randomization (which walks the tables) while
# the reference read it by attribute: every value the bias's constant, any attention matched.
add_round("handins_round5", {"hunreg": "03-block", "hunreg_module": "03-block"})

# --- the sixth round (atk-11): the same escape against the checks the fifth round's fix did not reach ----------------
# hunreg_up: up's weight and bias in __dict__, near 0 (erf and tanh GELUs agree there), against the block's
# reference; hdecoy_dict: round 4's decoys registered, their weights in __dict__, against the causal bound;
# hunreg_05: round 5's hunreg against assignment 5's own attention check. Since then the bridge reads no tensor or
# layer a module keeps outside its tables, nor a module whose attributes are not what its tables hold, and the
# references read the tensors their randomization drew, by name: the *_undone pairs switch the bridge's rule off
# from the hand-in (the kernel is the student's) and hold the second fix alone.
add_round("handins_round6", {"hunreg_up": "03-block", "hdecoy_dict": "03-block", "hunreg_05": "05-training",
                             "hunreg_up_undone": "03-block", "hdecoy_dict_undone": "03-block"})

# --- the seventh round (atk-12): a metaclass whose __mro__ property hid nn.Module from the bases the kernel reported,
# so the checker took a check's eval() for the student's code, dropped its pins and believed the weights the kernel
# reported after it (zeroed from inside the property, which the bridge's own walk read): the references were
# computed from zeros (handins_round7/README.md). Since then the checker keeps its pins through nn.Module's reading
# and mode-setting methods whatever bases a kernel reports, the kernel's side reads classes through type's own
# descriptors, and the references read the check's own copies of what it drew.
add_round("handins_round7", {"mro_03_both": "03-block", "mro_05_both": "05-training", "mro_gpt_04": "04-gpt"})

# --- the eighth round (atk-13): a param_groups that decays nothing and shrinks every matrix itself, in place, by the
# factor one AdamW step with the visible learning rate would: the groups checks measured the decay from values taken
# before the call, so the write passed for the optimizer's decay. They now refuse a param_groups that changes any
# value of the model.
add_round("handins_round8", {"groups_prescale": "05-training"})

# --- the ninth round (atk-14), assignment 7: answers from memory and from the visible tests ---------------------------
# memo_find and memo_patterns: hooks left registered, hidden from the checks that asked the same model twice by a
# memory of the first answers; visible_table: the visible models' answers by their shapes, where no hidden part
# looked further. The repeated calls now meet new weights on the same model object and are judged against the
# checker's own answers, and test_find_induction checks a hidden model shuffled for each hand-in.
add_round("handins_round9", {"memo_find": "07-looking-inside", "memo_patterns": "07-looking-inside",
                             "visible_table": "07-looking-inside"})
