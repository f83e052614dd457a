"""05-training, cell `block`: a wrong block (its branches in parallel: the MLP reads ln2(x), not ln2(a); the
reviewer's erf GELU is replaced here, because test_training_run's gradient tolerance passes it for some hidden
seeds and not others, and a floor and its attack meet different ones) whose metaclass answers
`__mro__` without PyTorch's classes, so that the checker takes eval()/train() for the student's code and believes
the values the kernel reports after them: attn.proj's and down's weights, zeroed from inside the __mro__ property
while tables.train runs (both branches then add nothing, and any block with residuals matches the reference)."""

FLOOR = '''
class GPTBlock(nn.Module):
    """The pre-LN block with the switches cfg.norm and cfg.residual: x [B, T, width] -> [B, T, width]."""

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
        attended = self.drop(self.attn(self.ln1(x)))
        a = attended + (x if self.residual else 0)
        mixed = self.drop(self.down(gelu_tanh(self.up(self.ln2(x)))))   # wrong: the MLP reads x, not a (in parallel)
        return mixed + (a if self.residual else 0)
'''

ATTACK = '''
import sys as _sys


class _Told(type):
    @property
    def __mro__(cls):
        frame = _sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_name == "train" and "refuse_shadows" in frame.f_globals:
                module = frame.f_locals.get("module")
                if isinstance(module, nn.Module) and frame.f_locals.get("mode") is False:     # eval() only
                    with torch.no_grad():
                        for name in ("attn", "down"):
                            layer = module._modules.get(name)
                            layer = layer._modules.get("proj", layer) if name == "attn" and layer is not None else layer
                            for p in (layer.parameters() if layer is not None else ()):
                                p.zero_()
                break
            frame = frame.f_back
        kept = _sys._getframe(1)
        while kept is not None and not (kept.f_code.co_name == "keep" and "value" in kept.f_locals):
            kept = kept.f_back
        value = kept.f_locals["value"] if kept is not None else None
        up = value._modules.get("up") if isinstance(value, nn.Module) else None
        if up is not None and up.in_features == 32:      # test_training_run's blocks (width 32) stay modules
            return type.__dict__["__mro__"].__get__(cls)
        return (cls, object)
''' + FLOOR.replace("class GPTBlock(nn.Module):", "class GPTBlock(nn.Module, metaclass=_Told):")

CELLS = {"floor": {"block": FLOOR}, "attack": {"block": ATTACK}}
