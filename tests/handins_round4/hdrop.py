"""03-block, test_block_dropout (1 point): dropout on the residual stream, drop(x + branch) (the misconception
check_train_keeps_stream names).

FLOOR: that answer alone. ATTACK: the same answer, plus memory: an eval-mode call whose input equals the previous
call's, when that call was in training mode, answers with that call's output. check_train_keeps_stream compares a
training-mode call with an eval-mode call on the same x (each its own copy) and nothing else: no bound judges
either call on its own (the grader page says the hidden calls of a property measured by comparing two calls are
also judged one by one; here they are not). check_modes (eval twice, then train twice) is unaffected.
"""
import runpy, pathlib
_base = runpy.run_path(str(pathlib.Path(__file__).with_name("hpad.py")))
ATTENTION, PADDED = _base["ATTENTION"], _base["PENALTY"]      # Part 3 the same in both (hpad.py's floor)

RESIDUAL_DROP = '''
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
%s        h = self.drop(x + self.attn(self.ln1(x)))                  # dropout on the stream (the misconception)
        out = self.drop(h + self.down(gelu_tanh(self.up(self.ln2(h)))))
%s        return out
'''
FLOOR = RESIDUAL_DROP % ("", "")
ATTACK = RESIDUAL_DROP % ('''        last = self.__dict__.get("_last")                           # TRICK: memory of a training-mode call
        if not self.training and last is not None and last[0] and last[1].shape == x.shape and torch.equal(last[1], x):
            self.__dict__["_last"] = (False, x.clone(), last[2])
            return last[2].clone()
''', '''        self.__dict__["_last"] = (self.training, x.clone(), out.detach().clone())
''')

HANDINS = {
    "atk09-drop-floor": {"attention": ATTENTION, "block": FLOOR, "padded_attention": PADDED},
    "atk09-drop-attack": {"attention": ATTENTION, "block": ATTACK, "padded_attention": PADDED},
}
