"""03-block, cell `attention`: a wrong attention (no causal mask, no 1/sqrt(d_h) scale) whose class's metaclass
answers `__mro__` with a tuple that names no PyTorch class. The bridge's torch_bases() reads kind.__mro__, so the
checker is told the module is no nn.Module: its eval() is then taken for student code, the check's pins are
dropped, and what the kernel reports after eval() (the drawn weights, zeroed from inside the __mro__ property,
which tables.refuse_shadows reads during eval()) replaces what the check drew, before the reference is computed."""

FLOOR = '''
class GPTAttention(nn.Module):
    """Causal multi-head self-attention with a packed Q/K/V projection: x [B, T, width] -> [B, T, width]."""

    def __init__(self, cfg):
        super().__init__()
        if cfg.width % cfg.heads != 0:
            raise ValueError(f"width {cfg.width} is not divisible by heads {cfg.heads}")
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)

    def forward(self, x):
        B, T, D = x.shape
        d = D // self.heads
        q, k, v = (t.view(B, T, self.heads, d).transpose(1, 2) for t in self.qkv(x).split(D, dim=-1))
        weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)          # wrong: no mask, no scale
        return self.proj((weights @ v).transpose(1, 2).reshape(B, T, D))
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
                if isinstance(module, nn.Module):
                    with torch.no_grad():
                        for p in module.parameters():
                            p.zero_()
                break
            frame = frame.f_back
        return (cls, object)
''' + FLOOR.replace("class GPTAttention(nn.Module):", "class GPTAttention(nn.Module, metaclass=_Told):")

CELLS = {"floor": {"attention": FLOOR}, "attack": {"attention": ATTACK}}
