"""04-gpt, cell `gpt`: a wrong GPT (its embedding dropout ignores eval mode: F.dropout's default training=True)
whose metaclass's `__mro__` hides PyTorch's classes from the checker and, while the check's eval() runs on a model
the check randomized (the final LayerNorm's weight no longer all ones) with dropout on, zeroes every parameter: the check's
references are then computed from zeros (logits 0), which the wrong forward also gives. The transformers check
loads GPT-2's weights after eval(), so it runs on real weights, where dropout 0.0 hides the bug."""

FLOOR = '''
class GPT(nn.Module):
    """Embeddings, a stack of blocks, a final LayerNorm and a head: ids [B, T] -> logits [B, T, vocab]."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.token = nn.Embedding(cfg.vocab, cfg.width)
        self.position = nn.Embedding(cfg.context, cfg.width)
        self.drop = nn.Dropout(p=cfg.dropout)
        self.blocks = nn.ModuleList([GPTBlock(cfg) for _ in range(cfg.layers)])
        self.norm = nn.LayerNorm(cfg.width, eps=cfg.eps)
        self.head = nn.Linear(cfg.width, cfg.vocab, bias=False)
        if cfg.tie_weights:
            self.head.weight = self.token.weight
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, ids):
        T = ids.shape[1]
        if T > self.cfg.context:
            raise ValueError(f"{T} tokens exceed the context of {self.cfg.context}")
        positions = torch.arange(T, device=ids.device)
        x = F.dropout(self.token(ids) + self.position(positions), self.cfg.dropout)   # wrong: on in eval mode too
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))
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
                norm = module._modules.get("norm") if isinstance(module, nn.Module) else None
                if (frame.f_locals.get("mode") is False and norm is not None and not bool((norm.weight == 1).all())
                        and module.cfg.dropout > 0):
                    with torch.no_grad():
                        for p in module.parameters():
                            p.zero_()
                break
            frame = frame.f_back
        return (cls, object)
''' + FLOOR.replace("class GPT(nn.Module):", "class GPT(nn.Module, metaclass=_Told):")

CELLS = {"floor": {"gpt": FLOOR}, "attack": {"gpt": ATTACK}}
